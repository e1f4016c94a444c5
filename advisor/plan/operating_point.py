"""The operating point: per replica ``max_num_seqs`` x ``max_num_batched_tokens`` x offered load under
a TPOT / TTFT limit, the Pareto frontier, and speculation that follows load (pure).

For one layout and speculative method the caller hands in the physics as functions of the running
sequences n (a decode step, the speculative gain); every (b, M) of the policy table's grids (rules/policy/decider.yaml
``seqs_grid`` x ``batched_tokens_grid``) is predicted by :func:`advisor.predict.serving.operating_figures` at the load
the question fixes:

- ``--max-tpot-ms`` / ``--max-ttft-ms`` without ``--concurrency``: the offered concurrency is chosen
  too — b requests per replica (a closed loop exactly at the cap; offering more only queues);
- ``--concurrency C``: the user's load, C / DP per replica; b up to it;
- ``--request-rate R``: an open loop of R / DP requests per second per replica.

The best point has the most output tok/s per GPU within the limits (ties: lower TPOT). The frontier
is every point not beaten on both tok/s per GPU and tok/s per user.
"""

from __future__ import annotations

from typing import Callable

from pydantic import BaseModel, ConfigDict, Field

from advisor.domain.prediction import Band
from advisor.predict.absolute import ReplicaLayout
from advisor.predict.serving import LoadedFigures, busy_replicas, operating_figures
from advisor.rules.policy import load_policy

HIGH_LOAD_EVIDENCE = ("published serving runs see suffix decoding lose at high concurrency: ArcticInference issue #185 "
                      "(https://github.com/snowflakedb/ArcticInference/issues/185: output throughput below no speculation "
                      "above ~20 concurrent requests; the maintainers: 'high-concurrency scenarios leave less compute for "
                      "verifying speculations'), vLLM PR #25784 (suffix 5.8% slower than no speculation at concurrency 64, "
                      "out=256)")  # fmt: skip


class PointQuery(BaseModel):
    """The load and the limits one operating point is judged at."""

    model_config = ConfigDict(extra="forbid")

    prompt_len: int = Field(ge=1)
    output_len: int = Field(ge=1)
    max_tpot_ms: float | None = None
    max_ttft_ms: float | None = None
    concurrency: int | None = Field(default=None, ge=1)
    """Requests in flight over the host (the user's load); None: the search offers b per replica."""
    request_rate: float | None = Field(default=None, gt=0)
    """Requests per second over the host (open loop)."""


class Point(BaseModel):
    """One searched operating point of one layout and method."""

    model_config = ConfigDict(extra="forbid")

    layout: ReplicaLayout
    method: str
    """An advisor.methods id (``none``: plain decoding)."""
    k: int | None = None
    max_num_seqs: int
    max_num_batched_tokens: int
    kv_cache_dtype: str = "auto"
    concurrency: int | None = None
    """Requests in flight offered to the host (closed loop); None for an open loop."""
    figures: LoadedFigures
    tok_s_per_gpu: float
    tok_s_per_user: float
    feasible: bool = True
    why_not: str | None = None

    def label(self) -> str:
        spec = "plain" if self.method == "none" else f"{self.method} K={self.k}"
        kv = ", KV fp8" if self.kv_cache_dtype == "fp8" else ""
        return f"{self.layout.label()}, {spec}, max_num_seqs {self.max_num_seqs}, max_num_batched_tokens {self.max_num_batched_tokens}{kv}"


def grid(q: PointQuery, lay: ReplicaLayout, kv_slots: int, tokens_per_seq: float) -> list[tuple[int, int]]:
    """The (max_num_seqs, max_num_batched_tokens) pairs worth predicting for this replica (the policy table's
    ``seqs_grid`` x ``batched_tokens_grid``)."""
    pol = load_policy()
    seqs_grid, tokens_grid = pol.seqs_grid, pol.batched_tokens_grid
    per_replica = None if q.concurrency is None else -(-q.concurrency // lay.dp)
    limit = min(per_replica or max(seqs_grid), max(seqs_grid))
    seqs: list[int] = []
    for b in seqs_grid:
        if b >= limit:
            break
        seqs.append(b)
        if b >= kv_slots:  # more slots than the KV cache holds only queue in vLLM
            break
    if not seqs or seqs[-1] < kv_slots:
        seqs.append(limit)
    # vLLM requires max_num_batched_tokens >= max_num_seqs (vllm/config/scheduler.py:328-333 verify_max_model_len, 0.32.0)
    pairs = [(b, m) for b in seqs for m in tokens_grid if m >= b and m >= b * min(tokens_per_seq, 2.0)]
    return pairs or [(seqs[0] if seqs else 1, max(tokens_grid))]


def points(q: PointQuery, lay: ReplicaLayout, method: str, k: int | None, *, step_of: Callable[[int], float],
           gain_of: Callable[[int], Band | None], prefill_token_s: float, prefill_alone_s: float, kv_slots: int,
           tokens_per_seq: float = 1.0, notes: list[str] | None = None) -> list[Point]:  # fmt: skip
    """Every grid point of one layout and method, predicted at the question's load and judged."""
    out = []
    for b, m in grid(q, lay, kv_slots, tokens_per_seq):
        n = max(1, min(b, kv_slots))
        if q.concurrency is not None:
            n = min(n, -(-q.concurrency // lay.dp))
        gain = gain_of(n) if method != "none" else None
        if method != "none" and gain is None:
            continue
        load: dict = {}
        if q.request_rate is not None:
            load["rate"] = q.request_rate / lay.dp
        else:
            load["concurrency"] = b if q.concurrency is None else -(-q.concurrency // lay.dp)
            if q.concurrency is not None:  # only the replicas that have requests produce tokens
                load["busy"] = busy_replicas(q.concurrency, lay.dp)
        f = operating_figures(step_of, prefill_token_s=prefill_token_s, prefill_alone_s=prefill_alone_s,
                              prompt_len=q.prompt_len, output_len=q.output_len, max_num_seqs=b, max_num_batched_tokens=m,
                              kv_slots=kv_slots, dp=lay.dp, gain=gain, tokens_per_seq=tokens_per_seq, notes=notes, **load)  # fmt: skip
        conc = None if q.request_rate is not None else (q.concurrency or b * lay.dp)
        pt = Point(layout=lay, method=method, k=k, max_num_seqs=b, max_num_batched_tokens=m, concurrency=conc, figures=f,
                   tok_s_per_gpu=round(f.throughput_tok_s.value / lay.gpus, 1), tok_s_per_user=f.tok_s_per_user)  # fmt: skip
        pt.why_not = judge(f, q)
        pt.feasible = pt.why_not is None
        out.append(pt)
    return out


def judge(f: LoadedFigures, q: PointQuery) -> str | None:
    """Why a point misses the question (None: it meets it)."""
    if not f.stable:
        return (f"request rate {q.request_rate:g}/s exceeds what the replicas serve "
                f"({f.request_rate_per_replica:.2f}/s each at {f.limit})")  # fmt: skip
    if q.max_tpot_ms and f.tpot_ms.value > q.max_tpot_ms:
        return f"TPOT {f.tpot_ms.value:.1f} ms > --max-tpot-ms {q.max_tpot_ms:g}"
    if q.max_ttft_ms and f.ttft_value > q.max_ttft_ms:
        return f"TTFT {f.ttft_value:.0f} ms under load > --max-ttft-ms {q.max_ttft_ms:g}"
    return None


def best(pts: list[Point], objective: str, output_len: int) -> Point | None:
    """The feasible point with the most tok/s per GPU (ties: lower TPOT, lower TTFT, fewer sequences);
    with ``objective="latency"`` the one whose whole request (TTFT + output_len x TPOT) is shortest (the query's
    objective and output length: no default of its own)."""
    ok = [p for p in pts if p.feasible]
    if not ok:
        return None
    if objective == "latency":
        return min(ok, key=lambda p: (p.figures.ttft_value + output_len * p.figures.tpot_ms.value, -p.tok_s_per_gpu))
    return min(ok, key=lambda p: (-p.tok_s_per_gpu, p.figures.tpot_ms.value, p.figures.ttft_value, p.max_num_seqs,
                                  p.max_num_batched_tokens))  # fmt: skip


def nearest(pts: list[Point]) -> Point | None:
    """Where no point meets the limits: the one that misses TPOT least (then TTFT), stable first."""
    if not pts:
        return None
    return min(pts, key=lambda p: (not p.figures.stable, p.figures.tpot_ms.value, p.figures.ttft_value))


def pareto(pts: list[Point]) -> list[Point]:
    """Points no other beats on both tok/s per GPU and tok/s per user (stable ones only), by tok/s per user."""
    cand = sorted((p for p in pts if p.figures.stable), key=lambda p: (-p.tok_s_per_user, -p.tok_s_per_gpu))
    front, top = [], -1.0
    for p in cand:
        if p.tok_s_per_gpu > top:
            front.append(p)
            top = p.tok_s_per_gpu
    return front


def schedule_ranges(gain_of: Callable[[int], Band | None], k: int, upto: int) -> list[list[int]]:
    """K by batch size from the predicted gain: at each size of the policy's ``seqs_grid`` (and 1, ``upto``) K where the gain
    is > 1, else 0; a size between two of them takes the decision of the one at or above it (a conservative
    step where the gain crosses 1), merged into vLLM's ``[[lo, hi, K], …]`` from 1 to ``upto``. The gain
    need not fall with batch size: CPU-side drafting costs a fixed share per step, so n-gram can lose at one
    sequence and win at hundreds."""
    sizes = sorted({1, *(b for b in load_policy().seqs_grid if b <= upto), upto})
    out: list[list[int]] = []
    lo = 1
    for n in sizes:
        g = gain_of(n)
        kk = k if g is not None and g.value > 1.0 else 0
        if out and out[-1][2] == kk:
            out[-1][1] = n
        else:
            out.append([lo, n, kk])
        lo = n + 1
    return out


def k_at(ranges: list[list[int]], n: int) -> int:
    """The scheduled K at ``n`` running sequences."""
    return next((kk for lo, hi, kk in ranges if lo <= n <= hi), ranges[-1][2] if ranges else 0)


def spec_schedule(method: str, k: int, gain_of: Callable[[int], Band | None], max_num_seqs: int, dp: int,
                  facts) -> tuple[list[list[int]] | None, str]:  # fmt: skip
    """``num_speculative_tokens_per_batch_size`` for the chosen method — K where the predicted gain is > 1,
    0 elsewhere (:func:`schedule_ranges`) — or None, and the reason either way (``facts``: the chosen vLLM
    line's :class:`advisor.vllm_facts.VllmFacts`)."""
    src = facts.sources
    if method == "none":
        return None, ""
    ranges = schedule_ranges(gain_of, k, max_num_seqs)
    if len(ranges) == 1 and ranges[0][2] == k:
        return None, f"{method} K={k}: predicted to gain at every batch size up to max_num_seqs {max_num_seqs}: a fixed K"
    if len(ranges) == 1:
        return None, f"{method}: predicted to lose at every batch size up to max_num_seqs {max_num_seqs}"
    where = "predicted gain > 1 at " + ", ".join(f"{lo}-{hi}" for lo, hi, kk in ranges if kk) + " running sequences"
    if not facts.spec_schedule:
        return None, f"vLLM {facts.version} has no num_speculative_tokens_per_batch_size; {method} chosen for the offered load"
    if method not in facts.spec_schedule_methods:
        return None, (f"{method}: {where}, but vLLM {facts.version} cannot schedule {method} by batch size "
                      f"({src.get('spec_schedule_methods', '')}); chosen for the offered load")  # fmt: skip
    if dp > 1 and not facts.spec_schedule_with_dp:
        return None, (f"{method}: {where}, but vLLM {facts.version} drops num_speculative_tokens_per_batch_size with "
                      f"--data-parallel-size {dp} ({src.get('spec_schedule_with_dp', '')}); chosen for the offered load")  # fmt: skip
    note = (f"; vLLM {facts.version} runs FULL CUDA graphs as PIECEWISE with a schedule on the V1 runner "
            f"({src.get('spec_schedule_piecewise', '')})") if facts.spec_schedule_piecewise else ""  # fmt: skip
    return ranges, (f"{method}: K={k} where it gains, none elsewhere ({where}; num_speculative_tokens_per_batch_size, "
                    f"{src.get('spec_schedule', '')}){note}")  # fmt: skip


def suffix_load_guard(running: int, p_win: float | None, facts, dp: int) -> str | None:
    """Why suffix decoding is off at ``running`` sequences per replica, or None. Above the concurrency
    suffix was measured at (the policy table's ``suffix_max_running``, the load cut-off), its gain is the
    K > R predictor's extrapolation, and published serving runs see it lose there; vLLM cannot schedule
    suffix off by batch size, so the search keeps suffix to loads inside the evidence (a probe on this host,
    which makes the rules require suffix, overrides)."""
    cut = load_policy().suffix_max_running
    if running <= cut:
        return None
    how = ("cannot schedule suffix off by batch size" if "suffix" not in facts.spec_schedule_methods
           else "drops the batch-size schedule with DP" if dp > 1 and not facts.spec_schedule_with_dp else "")  # fmt: skip
    pw = f" (predicted P(win) {p_win:.2f})" if p_win is not None else ""
    return (f"suffix off at {running} running per replica: its gain{pw} is extrapolated past the "
            f"{cut} running sequences it was measured at, where {HIGH_LOAD_EVIDENCE}; "
            f"vLLM {facts.version} {how or 'is not asked to schedule it'} ({facts.sources.get('spec_schedule_methods', '')}); "
            f"`advisor probe` at this concurrency settles it on this host")  # fmt: skip
