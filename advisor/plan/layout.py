"""Search layouts (TP x DP, EP) x speculative methods (none / suffix K / n-gram K / MTP) x
max_num_seqs, predict each in absolute terms, and pick the best feasible one (pure).

Candidates are what vLLM 0.32 accepts on the host (checks below, each naming the vLLM rule), the
memory planner decides whether each boots, and :mod:`advisor.predict.absolute` predicts host
tok/s, TPOT and TTFT. The suffix gain comes from the calibrated K > R predictor at the candidate's
own TP and per-replica concurrency (injected as ``suffix_gain``, so this module stays pure).
A flag the user gave (``--tp``, ``--k``) fixes that dimension; only the rest is searched.
"""

from __future__ import annotations

from typing import Callable, Literal

from pydantic import BaseModel, ConfigDict, Field

from advisor.kbar.ngram import DEFAULT_NGRAM_K
from advisor.errors import AdvisorError
from advisor.hardware.gpus import GpuSpec
from advisor.model.schema import ModelProfile
from advisor.domain.decision import Decision
from advisor.domain.prediction import Band
from advisor.predict.absolute import ReplicaLayout, ServingFigures, mtp_gain, ngram_gain, serve
from advisor.predict.kbar_prior import max_draft

Objective = Literal["throughput", "latency"]
NGRAM_K = DEFAULT_NGRAM_K  # the advisor's n-gram K, one place (advisor.kbar.ngram)
"""n-gram drafts per step searched (vLLM's prompt lookup defaults to 5-token matches)."""
SUFFIX_K_FALLBACK = (16, 8)
"""Lower suffix K tried when the rules' K does not boot (only without --k)."""
SEQS_CAPS = (256, 128, 64, 32)
"""max_num_seqs caps searched when a latency objective or a TPOT/TTFT limit makes them matter."""
SUFFIX_THRESHOLDS = {"default_on": 0.30, "default_off": 0.70, "open": 0.50}
"""P(win) a suffix candidate needs under each rules policy (advisor.plan.recommend's FLIP_* values)."""


class NoFeasibleLayout(AdvisorError):
    """No candidate boots and meets the limits."""

    exit_code = 8


class LayoutQuery(BaseModel):
    """What the user asked the search for."""

    model_config = ConfigDict(extra="forbid")

    objective: Objective = "throughput"
    """throughput: most host output tok/s; latency: shortest request (TTFT + output_len x TPOT)."""
    max_tpot_ms: float | None = Field(default=None, gt=0)
    max_ttft_ms: float | None = Field(default=None, gt=0)
    prompt_len: int = Field(default=1024, ge=1)
    output_len: int = Field(default=512, ge=1)
    ngram_k: int | None = Field(default=None, ge=1, le=64)
    """num_speculative_tokens of the n-gram candidates (``--ngram-k``; None: NGRAM_K)."""
    ngram_lookup: tuple[int, int] | None = None
    """(prompt_lookup_min, prompt_lookup_max) of the n-gram candidates (``--ngram-lookup``; None: vLLM's)."""


class Candidate(BaseModel):
    """One searched configuration and what it is predicted to do."""

    model_config = ConfigDict(extra="forbid")

    layout: ReplicaLayout
    method: Literal["none", "suffix", "ngram", "mtp"]
    k: int | None = None
    max_num_seqs: int | None = None
    boots: bool
    kv_cache_tokens: int = 0
    memory_reason: str = ""
    figures: ServingFigures | None = None
    p_win: float | None = None
    """P(suffix wins) from the calibrated predictor (suffix only)."""
    eligible: bool = True
    why_not: str | None = None
    """Why this candidate cannot win (does not boot, rule, SLA); None when eligible."""

    def label(self) -> str:
        spec = "plain" if self.method == "none" else f"{self.method} K={self.k}"
        seqs = f", max_num_seqs {self.max_num_seqs}" if self.max_num_seqs else ""
        return f"{self.layout.label()}, {spec}{seqs}"


class LayoutResult(BaseModel):
    """The ranked candidates: ``chosen`` is ``ranked[0]``."""

    model_config = ConfigDict(extra="forbid")

    chosen: Candidate
    ranked: list[Candidate]
    """Eligible candidates, best first, then the ineligible ones."""
    searched: int
    limits_missed: str | None = None
    """Set when no candidate meets --max-tpot-ms / --max-ttft-ms: the chosen one is the best that boots."""


def tp_reasons(p: ModelProfile, tp: int, *, ep: bool, group: int) -> list[str]:
    """Why vLLM refuses tensor_parallel_size ``tp`` (empty: accepted). ``group`` = TP x DP (MoE layers
    split over the whole group when DP > 1)."""
    out = []
    if p.num_attention_heads % tp:
        out.append(f"{p.num_attention_heads} attention heads % TP {tp} != 0 (vllm/config/parallel.py verify_with_model_config)")
    kv = p.num_kv_heads
    if p.attention != "mla" and kv % tp and tp % kv:
        out.append(f"{kv} KV heads neither split nor replicate over TP {tp} (QKVParallelLinear)")
    from advisor.plan.memory_terms import dense_intermediate

    block = (p.quant.block_size or [None])[0]
    # The profile does not carry intermediate_size: recovered from the parameter count, rounded to 128.
    inter = int(round(dense_intermediate(p) / 128) * 128) if p.arch == "dense" else 0
    if inter and inter % tp:
        out.append(f"intermediate size {inter} % TP {tp} != 0 (MergedColumnParallelLinear)")
    elif inter and block and (inter // tp) % block:
        out.append(f"intermediate {inter} / TP {tp} not a multiple of the FP8 weight block {block} (fp8.py)")
    if p.arch == "moe" and p.experts:
        if ep:
            if p.experts % group:
                out.append(f"{p.experts} experts % EP size {group} != 0 (advisor: uneven expert maps not searched)")
        elif p.expert_intermediate_size:
            if p.expert_intermediate_size % group:
                out.append(f"expert intermediate {p.expert_intermediate_size} % TP x DP {group} != 0 (fused_moe)")
            elif block and (p.expert_intermediate_size // group) % block:
                out.append(f"expert intermediate {p.expert_intermediate_size} / {group} not a multiple of the FP8 block {block}")
    return out


def layouts(p: ModelProfile, gpus: int, tp_fixed: int | None = None) -> tuple[list[ReplicaLayout], list[str]]:
    """Every TP x DP (x EP) that uses as many of ``gpus`` as a valid TP allows, and the refusals."""
    out, refused = [], []
    for tp in ([tp_fixed] if tp_fixed else range(1, gpus + 1)):
        dp = gpus // tp
        for ep in ((False, True) if p.arch == "moe" and p.experts and tp * dp > 1 else (False,)):
            why = tp_reasons(p, tp, ep=ep, group=tp * dp)
            if why:
                if tp_fixed or gpus % tp == 0:
                    refused.append(f"TP {tp}{' + EP' if ep else ''}: {'; '.join(why)}")
                continue
            out.append(ReplicaLayout(tp=tp, dp=dp, ep=ep))
    return out, refused


def replica_profile(p: ModelProfile, lay: ReplicaLayout, method: str) -> ModelProfile:
    """The profile the memory planner sees for one replica: MoE layers of DP ranks share the experts
    (each GPU holds 1/(TP x DP) of them), and MTP loads its layers (ASSUMED: a decoder layer's share)."""
    wb = p.weight_bytes
    if p.arch == "moe" and p.experts and lay.dp > 1:
        expert = p.expert_params_b * 1e9 * (p.weight_bytes / max(p.params_total_b * 1e9, 1.0))
        wb -= int(expert * (1 - 1 / lay.dp))
    if method == "mtp" and p.mtp_layers:
        wb += int(p.weight_bytes * p.mtp_layers / max(p.num_layers, 1))
    return p if wb == p.weight_bytes else p.model_copy(update={"weight_bytes": wb})


SuffixGain = Callable[[int, int, int], "tuple[Band, float, float] | None"]
"""(tp, concurrency per replica, K) -> (gain band, P(win), K̄) from the calibrated predictor, or None."""


def _spec_options(p: ModelProfile, k_fixed: int | None, k_rules: int, k_ngram: int | None = None) -> list[tuple[str, int | None]]:
    opts: list[tuple[str, int | None]] = [("none", None)]
    ks = [k_fixed] if k_fixed else [k_rules, *(x for x in SUFFIX_K_FALLBACK if x < k_rules)]
    opts += [("suffix", k) for k in ks]
    # --k is "num_speculative_tokens when suffix is chosen" (cli/options.py): the other methods keep their own K
    opts.append(("ngram", k_ngram or NGRAM_K))
    if p.mtp_layers:
        opts.append(("mtp", p.mtp_layers))
    return opts


def search(p: ModelProfile, gpu: GpuSpec, gpus: int, base: Decision, *, concurrency: int, query: LayoutQuery,
           policy: str, suffix_gain: SuffixGain, planner, tp_fixed: int | None = None, k_fixed: int | None = None,
           k_rules: int = 32) -> LayoutResult:  # fmt: skip
    """Rank every candidate. ``planner(profile, decision) -> (boots, kv_cache_tokens, reason)``;
    ``policy`` is the rules' speculation policy for suffix decoding (required/forbidden/default_on/default_off/open)."""
    lays, refused = layouts(p, gpus, tp_fixed)
    if not lays:
        raise NoFeasibleLayout(f"no tensor-parallel layout vLLM accepts on {gpus} GPUs: {'; '.join(refused)}")
    seq_caps: list[int | None] = [base.max_num_seqs]
    if base.max_num_seqs is None and (query.objective == "latency" or query.max_tpot_ms):
        seq_caps += list(SEQS_CAPS)
    cands: list[Candidate] = []
    gains: dict[tuple, tuple | None] = {}
    for lay in lays:
        per_replica = -(-concurrency // lay.dp)
        suffix_booted = False
        for method, k in _spec_options(p, k_fixed, k_rules, query.ngram_k):
            if method == "suffix" and k != (k_fixed or k_rules) and suffix_booted:
                continue  # a lower K only where the rules' K does not boot
            for cap in seq_caps:
                if cap is not None and cap >= per_replica:
                    continue
                c = _one(p, gpu, lay, method, k, cap, base, concurrency, query, policy, suffix_gain, planner, gains)
                suffix_booted |= method == "suffix" and c.boots
                cands.append(c)
    elig = [c for c in cands if c.eligible]
    key = _rank_key(query.objective, query.output_len)
    missed = None
    if not elig:
        # Nothing meets --max-tpot-ms / --max-ttft-ms: recommend the best that boots (rules still
        # apply) and say by how much it misses; nothing booting at all is an error.
        near = [c for c in cands if c.figures is not None and (c.why_not or "").startswith(("TPOT ", "TTFT "))]
        if not near:
            worst = "; ".join(sorted({c.why_not or "" for c in cands})[:3])
            raise NoFeasibleLayout(f"no searched configuration boots on {gpus}x{gpu.name} ({worst})")
        best = min(near, key=key)
        missed = f"no configuration meets the limits; the best one misses them: {best.why_not}"
        best.eligible, best.why_not = True, None
        elig = [best]
    elig.sort(key=key)
    rest = sorted((c for c in cands if not c.eligible), key=lambda c: (c.figures is None, key(c) if c.figures else 0))
    return LayoutResult(chosen=elig[0], ranked=elig + rest, searched=len(cands), limits_missed=missed)


def request_latency_ms(c: Candidate, output_len: int) -> float:
    """What one user waits for a whole answer: TTFT + output_len x TPOT (queueing included)."""
    return c.figures.ttft_ms.value + output_len * c.figures.tpot_ms.value


def _rank_key(objective: Objective, output_len: int):
    # Ties (MoE with DP: EP and expert-TP predict alike) go to EP, vLLM's documented wide-EP layout.
    if objective == "latency":
        return lambda c: (request_latency_ms(c, output_len), c.figures.tpot_ms.value, not c.layout.ep)
    return lambda c: (-c.figures.throughput_tok_s.value, c.figures.tpot_ms.value, not c.layout.ep)


def _one(p, gpu, lay, method, k, cap, base, concurrency, query, policy, suffix_gain, planner, gains) -> Candidate:
    d = base.model_copy(update={
        "tensor_parallel_size": lay.tp, "data_parallel_size": lay.dp, "enable_expert_parallel": lay.ep,
        "speculative_method": None if method == "none" else method, "num_speculative_tokens": k, "max_num_seqs": cap,
    })  # fmt: skip
    boots, kv_tokens, reason = planner(replica_profile(p, lay, method), d)
    cand = Candidate(layout=lay, method=method, k=k, max_num_seqs=cap, boots=boots, kv_cache_tokens=kv_tokens, memory_reason=reason)
    if not boots:
        cand.eligible, cand.why_not = False, f"does not boot: {reason}"
        return cand
    from advisor.plan.memory_terms import batch_defaults

    per_replica = -(-concurrency // lay.dp)
    need = query.prompt_len + query.output_len
    slots = min(cap or batch_defaults(gpu)[1], max(1, kv_tokens // need))
    n = max(1, min(per_replica, slots))
    context = query.prompt_len + query.output_len / 2
    gain, notes, p_win = None, [], None
    if method in ("suffix", "ngram"):
        key = (lay.tp, n, max_draft(k) if method == "suffix" else max_draft(32))
        if key not in gains:
            gains[key] = suffix_gain(lay.tp, n, key[2] if method == "suffix" else 32)
        sg = gains[key]
        if sg is None:
            cand.eligible, cand.why_not = False, "the suffix predictor declined (no calibration for this model/GPU)"
            return cand
        if method == "suffix":
            gain, p_win, _ = sg
            notes.append("suffix gain: K > R predictor FITTED on the seed sweep (+ this host's probes), speculative-step cost from the host profile (calibration/host_profiles.csv)")
        else:
            gain, _, notes2 = ngram_gain(p, gpu, lay, n, context, k, sg[2])
            notes += notes2
    elif method == "mtp":
        gain, _, notes = mtp_gain(p, gpu, lay, n, context, k)
    cand.figures = serve(p, gpu, lay, concurrency=concurrency, prompt_len=query.prompt_len, output_len=query.output_len,
                         slots=slots, gain=gain, notes=notes)  # fmt: skip
    cand.p_win = p_win
    cand.why_not = _ineligible(cand, policy, query)
    cand.eligible = cand.why_not is None
    return cand


def _ineligible(c: Candidate, policy: str, q: LayoutQuery) -> str | None:
    f = c.figures
    if c.method == "suffix":
        if policy == "forbidden":
            return "the rules forbid suffix decoding here"
        need = SUFFIX_THRESHOLDS.get(policy)
        if need is not None and c.p_win is not None and c.p_win < need:
            return f"suffix P(win) {c.p_win:.2f} < {need:.2f} the rules' {policy} policy needs"
    elif policy == "required":
        return "the rules (or a probe on this host) require suffix decoding"
    if q.max_tpot_ms and f.tpot_ms.value > q.max_tpot_ms:
        return f"TPOT {f.tpot_ms.value:.1f} ms > --max-tpot-ms {q.max_tpot_ms:g}"
    if q.max_ttft_ms and f.ttft_ms.value > q.max_ttft_ms:
        return f"TTFT {f.ttft_ms.value:.0f} ms > --max-ttft-ms {q.max_ttft_ms:g}"
    return None


def why_lost(winner: Candidate, other: Candidate, objective: Objective, output_len: int = 512) -> str:
    """One line: how ``other`` compares with the winner."""
    if not other.eligible:
        return other.why_not or "ineligible"
    a, b = winner.figures, other.figures
    if objective == "latency":
        la, lb = request_latency_ms(winner, output_len), request_latency_ms(other, output_len)
        return (f"request latency {lb:,.0f} ms vs {la:,.0f} ms (TTFT {b.ttft_ms.value:,.0f} + {output_len} x TPOT "
                f"{b.tpot_ms.value:.1f})")
    pct = (b.throughput_tok_s.value / a.throughput_tok_s.value - 1) * 100
    if abs(pct) < 0.5:
        tie = "EP preferred" if winner.layout.ep != other.layout.ep else "lower TPOT or fewer drafts first"
        return f"ties the winner ({b.throughput_tok_s.value:,.0f} tok/s, same figures); tie-break: {tie}"
    return f"{pct:+.0f}% host throughput ({b.throughput_tok_s.value:,.0f} vs {a.throughput_tok_s.value:,.0f} tok/s)"
