"""Enumerate layouts (TP x DP, EP) x speculative methods (none / suffix K / n-gram K / MTP) x
max_num_seqs and predict each in absolute terms (pure). Which one is launched is
:func:`advisor.plan.choose.choose`'s call, not this module's.

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
from advisor.predict.pipeline import pp_serve, pp_split
from advisor.predict.absolute import ReplicaLayout, ServingFigures, mtp_gain, ngram_gain, serve
from advisor.plan.memory_terms import dense_intermediate
from advisor.rules.policy import load_policy
from advisor.plan.memory_terms import batch_defaults

Objective = Literal["throughput", "latency"]


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
    """num_speculative_tokens of the n-gram candidates (``--ngram-k``; None: the advisor's n-gram K)."""
    ngram_lookup: tuple[int, int] | None = None
    """(prompt_lookup_min, prompt_lookup_max) of the n-gram candidates (``--ngram-lookup``; None: vLLM's)."""
    gpus_per_node: int = Field(default=8, ge=1)
    """A replica of more GPUs runs TP inside a node x PP across nodes (advisor.render.multinode)."""
    pp_speculative_methods: tuple[str, ...] = ()
    """Speculative methods the target vLLM runs with PP (advisor.vllm_facts; none known today)."""


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
    k_bar: float | None = None
    """Tokens per verification step the gain assumes (speculative methods)."""
    r: float | None = None
    """Verification step / plain step (speculative methods)."""
    measured_gain: float | None = None
    """Suffix only: what probes on this host measured for exactly this deployment (advisor.plan.predictor)."""
    eligible: bool = True
    why_not: str | None = None
    """Why this candidate cannot win (does not boot, rule, SLA); None when eligible."""

    def label(self) -> str:
        spec = "plain" if self.method == "none" else f"{self.method} K={self.k}"
        seqs = f", max_num_seqs {self.max_num_seqs}" if self.max_num_seqs else ""
        return f"{self.layout.label()}, {spec}{seqs}"


def tp_reasons(p: ModelProfile, tp: int, *, ep: bool, group: int) -> list[str]:
    """Why vLLM refuses tensor_parallel_size ``tp`` (empty: accepted). ``group`` = TP x DP (MoE layers
    split over the whole group when DP > 1)."""
    out = []
    if p.num_attention_heads % tp:
        out.append(f"{p.num_attention_heads} attention heads % TP {tp} != 0 (vllm/config/parallel.py verify_with_model_config)")
    kv = p.num_kv_heads
    if p.attention != "mla" and kv % tp and tp % kv:
        out.append(f"{kv} KV heads neither split nor replicate over TP {tp} (QKVParallelLinear)")
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


SuffixGain = Callable[[int, int, int], "object | None"]
"""(tp, concurrency per replica, K) -> the K > R prediction there (gain, gain_low, gain_high, p_win,
k_bar, r, measured), or None when the predictor declines."""


def _spec_options(p: ModelProfile, k_fixed: int | None, k_rules: int, pol, k_ngram: int | None = None) -> list[tuple[str, int | None]]:
    opts: list[tuple[str, int | None]] = [("none", None)]
    ks = [k_fixed] if k_fixed else [k_rules, *(x for x in pol.suffix_k_fallback if x < k_rules)]
    opts += [("suffix", k) for k in ks]
    # --k is "num_speculative_tokens when suffix is chosen" (cli/options.py): the other methods keep their own K
    opts.append(("ngram", k_ngram or DEFAULT_NGRAM_K))  # --ngram-k, else the advisor's n-gram K (advisor.kbar.ngram)
    if p.mtp_layers:
        opts.append(("mtp", p.mtp_layers))
    return opts


def score(p: ModelProfile, gpu: GpuSpec, gpus: int, base: Decision, *, concurrency: int, query: LayoutQuery,
          suffix_gain: SuffixGain, planner, tp_fixed: int | None = None, k_fixed: int | None = None,
          k_rules: int, policy_table=None) -> list[Candidate]:  # fmt: skip
    """Every candidate with its boot verdict and predicted figures (eligibility and ranking are
    :func:`advisor.plan.choose.choose`'s). ``planner(profile, decision) -> (boots, kv_cache_tokens, reason)``.
    A suffix candidate that does not boot at the rules' K is tried at the table's lower K (without
    ``--k``), and then under lower max_num_seqs caps."""
    pol = policy_table or load_policy()
    lays, refused = layouts(p, gpus, tp_fixed)
    if not lays:
        raise NoFeasibleLayout(f"no tensor-parallel layout vLLM accepts on {gpus} GPUs: {'; '.join(refused)}")
    seq_caps: list[int | None] = [base.max_num_seqs]
    if base.max_num_seqs is None and (query.objective == "latency" or query.max_tpot_ms):
        seq_caps += list(pol.seqs_caps)
    cands: list[Candidate] = []
    gains: dict[tuple, object | None] = {}
    opts = _spec_options(p, k_fixed, k_rules, pol, query.ngram_k)
    last_k = [k for m, k in opts if m == "suffix"][-1]
    for lay in lays:
        per_replica = -(-concurrency // lay.dp)
        suffix_booted = False
        for method, k in opts:
            if method == "suffix" and k != (k_fixed or k_rules) and suffix_booted:
                continue  # a lower K only where the rules' K does not boot
            # the memory planner's order: lower K first, then fewer sequences (the last K only)
            fallback = method == "suffix" and k == last_k and len(seq_caps) == 1 and base.max_num_seqs is None
            for cap in [*seq_caps, *(pol.seqs_caps if fallback else ())]:
                if cap is not None and cap >= per_replica and not fallback:
                    continue
                c = _one(p, gpu, lay, method, k, cap, base, concurrency, query, suffix_gain, planner, gains,
                         pol.num_speculative_tokens)  # fmt: skip
                suffix_booted |= method == "suffix" and c.boots
                cands.append(c)
                if fallback and c.boots:
                    break
    return cands


def _one(p, gpu, lay, method, k, cap, base, concurrency, query, suffix_gain, planner, gains, k_ngram_ref) -> Candidate:
    d = base.model_copy(update={
        "tensor_parallel_size": lay.tp, "data_parallel_size": lay.dp, "enable_expert_parallel": lay.ep,
        "speculative_method": None if method == "none" else method, "num_speculative_tokens": k, "max_num_seqs": cap,
    })  # fmt: skip
    split = pp_split(lay.tp, query.gpus_per_node) if lay.dp == 1 else None
    if lay.dp > 1 and lay.gpus > query.gpus_per_node:
        # advisor.render.multinode renders one replica across nodes (TP x PP), not DP replicas spread over nodes.
        return Candidate(layout=lay, method=method, k=k, max_num_seqs=cap, boots=False, memory_reason="not planned",
                         eligible=False, why_not=f"{lay.dp} data-parallel replicas over {lay.gpus} GPUs span more than a node "
                         f"of {query.gpus_per_node}: not rendered (run one server per node instead)")  # fmt: skip
    if split is not None and method != "none" and method not in query.pp_speculative_methods:
        cand = Candidate(layout=lay, method=method, k=k, max_num_seqs=cap, boots=False, kv_cache_tokens=0,
                         memory_reason="not planned", eligible=False)  # fmt: skip
        cand.why_not = (f"{method} with pipeline parallelism (TP {split[0]} x PP {split[1]} over {split[1]} nodes): no "
                        "speculative method the advisor renders is known to work with PP in this vLLM (advisor.vllm_facts "
                        "pp_speculative_methods: vLLM issue #57755, PR #55623)")  # fmt: skip
        return cand
    boots, kv_tokens, reason = planner(replica_profile(p, lay, method), d)
    cand = Candidate(layout=lay, method=method, k=k, max_num_seqs=cap, boots=boots, kv_cache_tokens=kv_tokens, memory_reason=reason)
    if not boots:
        cand.eligible, cand.why_not = False, f"does not boot: {reason}"
        return cand
    per_replica = -(-concurrency // lay.dp)
    need = query.prompt_len + query.output_len
    slots = min(cap or batch_defaults(gpu)[1], max(1, kv_tokens // need))
    n = max(1, min(per_replica, slots))
    context = query.prompt_len + query.output_len / 2
    gain, notes = None, []
    if method in ("suffix", "ngram"):
        # n-gram's tokens per step are a share of suffix's at the table's K on the same traffic
        key = (lay.tp, n, k if method == "suffix" else k_ngram_ref)
        if key not in gains:
            gains[key] = suffix_gain(*key)
        sp = gains[key]
        if sp is None:
            cand.eligible, cand.why_not = False, "the suffix predictor declined (no calibration for this model/GPU)"
            return cand
        if method == "suffix":
            gain = Band(value=sp.gain, low=sp.gain_low, high=sp.gain_high)
            cand.p_win, cand.k_bar, cand.r = sp.p_win, sp.k_bar, sp.r
            measured = getattr(sp, "measured", None)
            cand.measured_gain = measured.gain if measured else None
            notes.append("suffix gain: K > R predictor FITTED on the seed sweep (+ this host's probes), speculative-step cost from the host profile (calibration/host_profiles.csv)")
        else:
            gain, cand.r, notes2 = ngram_gain(p, gpu, lay, n, context, k, sp.k_bar)
            cand.k_bar = gain.value * cand.r
            notes += notes2
    elif method == "mtp":
        gain, cand.r, notes = mtp_gain(p, gpu, lay, n, context, k)
        cand.k_bar = gain.value * cand.r
    split = pp_split(lay.tp, query.gpus_per_node) if lay.dp == 1 else None
    if split is not None:  # multi-node: priced (and later rendered) as TP per node x PP across nodes
        cand.figures = pp_serve(p, gpu, split[0], split[1], concurrency=concurrency, prompt_len=query.prompt_len,
                                output_len=query.output_len, slots=slots, gain=gain, notes=notes)  # fmt: skip
    else:
        cand.figures = serve(p, gpu, lay, concurrency=concurrency, prompt_len=query.prompt_len, output_len=query.output_len,
                             slots=slots, gain=gain, notes=notes)  # fmt: skip
    return cand
