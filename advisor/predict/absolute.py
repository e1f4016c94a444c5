"""Absolute serving figures for one layout: decode step, prefill, host tok/s, TPOT and TTFT.

Built on the step-cost model (:mod:`advisor.predict.stepcost`): a decode step of the replica's
running sequences, and a prefill of one prompt from its FLOPs (the same roofline at
``tokens_per_seq = prompt_len``). Those two times give a steady-state serving cycle per replica:

    n sequences run; each emits ``output_len`` tokens in ``output_len / g`` steps (g tokens per
    sequence per step: 1 plain, the speculative gain otherwise), and the n requests that replace
    them are prefilled in the same cycle, stalling decode (chunked prefill shares steps, but the
    prefill FLOPs still take the GPU):

    T = output_len x t_step / g + n x t_prefill_marginal
    host tok/s = DP x n x output_len / T;   TPOT = T / output_len
    TTFT = t_prefill + t_step + (c - n) / n x T       (c requests per replica, n of them running)

``t_prefill_marginal`` is a prompt's FLOPs and all-reduces only (its prefill shares decode steps'
weight reads); ``t_prefill`` is a whole step of it (what the request waits for).

Everything here is a pure function of (ModelProfile, GpuSpec, layout, shapes). Terms that are not
the validated step-cost model are labelled: ASSUMED (not measured) or MEASURED / FITTED (with the
file they come from). Units: seconds, tokens.
"""

from __future__ import annotations

import math
import statistics

from pydantic import BaseModel, ConfigDict, Field

from advisor.domain.prediction import INTERVAL_Z, Band
from advisor.hardware.gpus import GpuSpec
from advisor.model.schema import ModelProfile
from advisor.predict import step_correction
from advisor.predict import stepcost as sc
from advisor.predict.kbar_prior import KbarChoice

STEP_BAND = 0.10
"""ASSUMED ± share on a decode step time. The plain step is within 1 % of real vLLM 0.26.0 on one
H200 for Llama-3.1-8B at TP 1 (calibration/gpu_steps/h200-vllm0.26.0/grid.jsonl); other models,
TP sizes and GPUs are unmeasured, so the band is kept at 10 %."""
PREFILL_BAND = 0.25
"""ASSUMED ± share on a prefill time (FLOP efficiency 0.64 is measured for GEMMs of hundreds to a
thousand rows, not for vLLM's prefill attention kernels or chunking)."""
TP_STEP_SYNC_S = 0.3e-3
"""ASSUMED per-step cost of a TP group over one GPU: vLLM V1's MultiprocExecutor broadcasts every
SchedulerOutput to the TP workers through a shared-memory queue and waits for rank 0's output
(vllm/v1/executor/multiproc_executor.py); not in the single-GPU grid, not measured."""
A2A_LATENCY_S = 20e-6
"""ASSUMED latency of one expert-parallel all-to-all (dispatch or combine) inside one NVLink node."""
MTP_ACCEPT = (0.80, 0.875, 0.90)
"""(low, mid, high) acceptance of one MTP draft token. DeepSeek-V3 technical report §5.4.3
(arXiv 2412.19437): "the acceptance rate of the second token prediction ranges between 85% and
90%"; the low end widened to 0.80 (ASSUMED) for traffic unlike theirs."""
NGRAM_KBAR_HEAD = "n-gram tokens/step"
MTP_KBAR_HEAD = "MTP acceptance"
"""How the K̄ note of :func:`ngram_gain` / :func:`mtp_gain` starts: the first of their notes, which says where K̄ came
from (advisor.methods.base.GainEstimate.k_bar_note carries it typed)."""

NGRAM_SHARE = (0.25, 0.50, 0.75)
"""ASSUMED (low, mid, high) share of suffix decoding's extra tokens per step that n-gram prompt
lookup reaches on the same traffic: it matches only the request's own prompt and output, suffix
decoding also the global tree of earlier responses. Never measured here."""
REJECTION_S = 0.1e-3
"""ASSUMED cost of the rejection sampler per speculative step for GPU-drafted methods (MTP)."""


class ReplicaLayout(BaseModel):
    """How the host's GPUs are split: DP replicas of TP GPUs, experts optionally spread (EP)."""

    model_config = ConfigDict(extra="forbid")

    tp: int = Field(ge=1)
    dp: int = Field(default=1, ge=1)
    ep: bool = False

    @property
    def gpus(self) -> int:
        return self.tp * self.dp

    def label(self) -> str:
        out = f"TP {self.tp}" + (f" x DP {self.dp}" if self.dp > 1 else "")
        return out + (" + EP" if self.ep else "")


def _per_expert_bytes(p: ModelProfile) -> float:
    if not (p.arch == "moe" and p.experts and p.moe_layers):
        return 0.0
    return p.expert_params_b * 1e9 * sc.bytes_per_param(p) / (p.moe_layers * p.experts)


def ep_worst_local_experts(experts: int, top_k: int, tokens: float, gpus: int) -> float:
    """Touched experts on the busiest GPU of an expert-parallel group, which every MoE layer waits for.
    Expert-TP slices every touched expert over the group (each GPU reads touched / gpus of them, balanced);
    EP places experts / gpus whole experts per GPU, each touched with probability q = touched / experts, so
    a GPU's count is Binomial(experts / gpus, q) and the busiest of ``gpus`` is about mean + sd x sqrt(2 ln gpus)
    (the normal approximation of the maximum; ASSUMED uniform routing, no EPLB). Many tokens touch every
    expert (q -> 1) and the two converge; few tokens leave EP imbalanced."""
    local = experts / max(gpus, 1)
    q = sc.experts_touched(experts, top_k, tokens) / max(experts, 1)
    mean = local * q
    if gpus <= 1:
        return mean
    sd = math.sqrt(local * q * (1 - q))
    return min(local, mean + sd * math.sqrt(2 * math.log(gpus)))


def _moe_shared(p: ModelProfile, lay: ReplicaLayout, tokens_rank: float) -> tuple[float, float, float]:
    """(extra bytes, extra FLOPs, bytes each collective moves) per GPU when the MoE layers of DP ranks work
    together (vLLM: with DP > 1 the expert layers form one group of TP x DP GPUs, EP or not), against
    the step-cost model's independent TP replica. Expert weights: each GPU holds 1/(TP x DP) of them
    and serves every rank's tokens."""
    per = _per_expert_bytes(p)
    if not per or (lay.dp == 1 and not lay.ep):
        return 0.0, 0.0, 0.0
    k, e = p.experts_per_token, p.experts
    total = tokens_rank * lay.dp
    tp_bytes = p.moe_layers * sc.experts_touched(e, k, tokens_rank) * per / lay.tp
    grp_bytes = p.moe_layers * sc.experts_touched(e, k, total) * per / lay.gpus
    if lay.ep:
        grp_bytes = p.moe_layers * ep_worst_local_experts(e, k, total, lay.gpus) * per
    bpp = max(sc.bytes_per_param(p), 1e-9)
    # Routed-expert FLOPs: the step-cost model already charges the rank's own tokens over TP.
    flops_tp = 2.0 * tokens_rank * k * (per / bpp) * p.moe_layers / lay.tp
    flops_grp = 2.0 * total * k * (per / bpp) * p.moe_layers / lay.gpus
    # The collectives: vLLM's default all2all backend is allgather_reducescatter, EP or not (0.26/0.32/0.33
    # vllm/config/parallel.py all2all_backend; without EP, fused_moe/all2all_utils.py:209-213 (0.32.0) "Falling
    # back to AllGather+ReduceScatter dispatch/combine"): each GPU gathers the other DP ranks' tokens and
    # reduce-scatters the result, (DP - 1) x its tokens x hidden each way, whatever k is. With DP 1 there is
    # no dispatch (use_all2all_kernels needs DP > 1, fused_moe/config.py:1026-1029): EP over TP alone adds nothing.
    msg = (lay.dp - 1) * tokens_rank * p.hidden_size * 2
    return grp_bytes - tp_bytes, flops_grp - flops_tp, msg


def decode_step(p: ModelProfile, gpu: GpuSpec, lay: ReplicaLayout, seqs: int, context: float, *,
                tokens_per_seq: float = 1.0, spec: bool = False, draft_share: float = 0.6, k: int | None = None,
                method: str = "suffix", build: str = "release") -> tuple[float, list[str]]:  # fmt: skip
    """Seconds of one step of a replica running ``seqs`` sequences (per GPU), and the labelled terms added
    (``method`` / ``build``: whose speculative-step cost a verification step pays, advisor.predict.host_profile;
    ``k``: the K the engine was booted with, needed by a verification step, :class:`~advisor.predict.stepcost.StepShape`)."""
    c = sc.step_cost(p, gpu, lay.tp, sc.StepShape(seqs=max(1, seqs), tokens_per_seq=max(1.0, tokens_per_seq),
                                                  context=context, spec=spec, draft_share=draft_share, k=k,
                                                  method=method, build=build))  # fmt: skip
    total, notes = c.total, []
    if lay.tp > 1:
        total += TP_STEP_SYNC_S
        notes.append(f"TP step sync {TP_STEP_SYNC_S * 1e3:.1f} ms (ASSUMED)")
    dbytes, dflops, msg = _moe_shared(p, lay, c.tokens)
    if dbytes or dflops or msg:
        bw = gpu.bandwidth_tbs * 1e12 * sc.WEIGHT_MEM_EFFICIENCY
        t_mem = c.t_memory + dbytes / bw
        t_cmp = c.t_compute + dflops / sc.peak_flops(p, gpu)
        total += max(t_mem, t_cmp) - max(c.t_memory, c.t_compute)
        one_way = gpu.interconnect_gbs * 1e9 / 2
        a2a = 2 * p.moe_layers * (A2A_LATENCY_S + msg / one_way) if lay.dp > 1 else 0.0
        total += a2a
        if a2a:
            notes.append(f"DP all-gather + reduce-scatter around each MoE layer {a2a * 1e3:.1f} ms (vLLM's default "
                         f"allgather_reducescatter backend, EP or not; ASSUMED latency {A2A_LATENCY_S * 1e6:.0f} us each)")
    corr = step_correction.lookup(p, lay.tp, lay.dp)  # only where `advisor verify` measured this host and class
    if corr is not None and corr[0].applied:
        total *= corr[0].factor
        notes.append(corr[0].note(corr[1]))
    elif corr is not None:
        notes.append(step_correction.not_applied_note(corr[0]))
    return total, notes


def prefill_time(p: ModelProfile, gpu: GpuSpec, lay: ReplicaLayout, prompt_len: int) -> float:
    """Seconds to prefill one prompt on one replica: the step-cost roofline at prompt_len query tokens
    over a causal mean context of prompt_len / 2 (compute-bound: FLOPs / measured GEMM efficiency)."""
    c = sc.step_cost(p, gpu, lay.tp, sc.StepShape(seqs=1, tokens_per_seq=max(1, prompt_len), context=prompt_len / 2))
    return c.total + (TP_STEP_SYNC_S if lay.tp > 1 else 0.0)


def prefill_marginal(p: ModelProfile, gpu: GpuSpec, lay: ReplicaLayout, prompt_len: int) -> float:
    """Seconds a prompt adds to the replica's work when its prefill rides in decode steps (chunked
    prefill: the weight reads, fixed step cost and launches are paid by the decode step anyway), so
    only its FLOPs and its all-reduces count. Checked against the H200 grid's prefill (docs/layout.md)."""
    c = sc.step_cost(p, gpu, lay.tp, sc.StepShape(seqs=1, tokens_per_seq=max(1, prompt_len), context=prompt_len / 2))
    return c.t_compute + c.t_allreduce


def mtp_gain(p: ModelProfile, gpu: GpuSpec, lay: ReplicaLayout, seqs: int, context: float, k: int = 1, *,
             build: str | None = None, eager: bool = False,
             eager_costs: tuple[float, float] | None = None, gpu_only: bool = False) -> tuple[Band, float, list[str]]:  # fmt: skip
    """Throughput gain of MTP with ``k`` drafts over plain decoding, and R. MTP keeps async scheduling on, so the
    suffix-step CPU costs do not apply: the verification step is the main model at 1 + k tokens (the host's
    plain-step floor overlapped, ``build``'s profile; None: every profile matching ``gpu``, R their geometric mean).

    Drafting, per drafter class (``eager``: ``VllmFacts.mtp_eager_drafters``, no torch.compile; else compiled):
    the host profile's MEASURED cost of an MTP step over a plain one, first draft and each further draft
    (``HostProfile.mtp_costs``, advisor.calibrate.mtp_cost: GLM-4.5's eager drafter 6.1 + 3.5 ms, DeepSeek-V3's
    compiled one 3.5 + 0.9 ms on the H200 serving host), carried from the profiles that measured the class where this
    host's did not (ASSUMED within x2, in the band). The step is max(the modelled verification at 1 + k tokens + the
    GPU draft, the plain step + that cost). A class no profile measured, or ``gpu_only`` (the held-out check's
    baseline), prices the drafter as GPU work alone: one MTP layer's share of the roofline per draft + launches + the
    rejection sampler, ASSUMED. ``eager_costs`` (seconds) overrides the measured costs (the held-out check)."""
    from advisor.predict import host_profile as hp

    builds = [build] if build else hp.match(gpu.name).profiles
    c = sc.step_cost(p, gpu, lay.tp, sc.StepShape(seqs=max(1, seqs), tokens_per_seq=1, context=context))
    gpu_draft = k * (c.t_roofline / max(p.num_layers, 1) + sc.LAYER_LAUNCH_S["full"] * 4) + REJECTION_S
    rs, drafts, label, spread = [], [], "", []
    for b in builds:
        plain, _ = decode_step(p, gpu, lay, seqs, context, build=b)
        verify, _ = decode_step(p, gpu, lay, seqs, context, tokens_per_seq=1 + k, draft_share=1.0, k=k, build=b)
        first, per, label, carried = (0.0, 0.0, "", False) if gpu_only else (
            _drafter_costs(b, eager) if eager_costs is None else (*eager_costs, "MEASURED, given", False))
        measured = first > 0 or per > 0
        gpu_step = verify + (0.0 if eager else gpu_draft)  # an eager drafter's forwards are in its measured cost
        if measured:  # measured whole over a plain step (verification growth included): the GPU's where larger
            step = max(gpu_step, plain + first + (k - 1) * per)
            if carried:  # another host's CPU: its cost ASSUMED within x2 either way
                spread += [max(gpu_step, plain + (first + (k - 1) * per) * f) / plain for f in (0.5, 2.0)]
        else:
            step = verify + gpu_draft
        drafts.append(step - plain if measured else gpu_draft)  # what the note reports: over a plain step, or the GPU draft
        rs.append(step / plain)
    r = math.exp(sum(math.log(x) for x in rs) / len(rs))
    draft = statistics.median(drafts)
    lo, mid, hi = (sum(a ** i for i in range(1, k + 1)) for a in MTP_ACCEPT)
    down, up = math.log(r / min(rs + spread)), math.log(max(rs + spread) / r)
    band = Band(value=(1 + mid) / r, low=(1 + lo) / r * math.exp(-up), high=(1 + hi) / r * math.exp(down))
    notes = [f"{MTP_KBAR_HEAD} {MTP_ACCEPT[1]:.2f} [{MTP_ACCEPT[0]:.2f}, {MTP_ACCEPT[2]:.2f}] per draft (DeepSeek-V3 report; low end ASSUMED)"]
    kind = "eagerly (no torch.compile)" if eager else "compiled"
    if label:
        notes.append(f"MTP step {draft * 1e3:.2f} ms over a plain step: this vLLM runs {p.model_type}'s MTP drafter {kind}, "
                     f"with host work per step ({label}"
                     + ("; ASSUMED within x2 on this host, in the band)" if spread else ")"))  # fmt: skip
    else:
        notes.append(f"MTP draft forward {draft * 1e3:.2f} ms per step (ASSUMED: one layer's share of the roofline + rejection sampler)")
    return band, r, notes


def _drafter_costs(build: str, eager: bool) -> tuple[float, float, str, bool]:
    """(first-draft, per-further-draft) seconds of an eager or compiled MTP drafter on ``build``'s host profile, where
    they come from, and whether they are carried from other hosts: measured there, else the median over the known
    profiles that measured the class (carried), else (0, 0, "", False) for the GPU-only price."""
    from advisor.predict import host_profile as hp

    prof = hp.get(build)
    own = prof.mtp_costs(eager)
    if any(own):
        return *own, f"MEASURED on host profile {prof.id}", False
    measured = [x.mtp_costs(eager) for x in hp.profiles() if any(x.mtp_costs(eager))]
    if not measured:
        return 0.0, 0.0, "", False
    ids = ", ".join(x.id for x in hp.profiles() if any(x.mtp_costs(eager)))
    first = statistics.median(m[0] for m in measured)
    per = statistics.median(m[1] for m in measured)
    return first, per, f"carried: MEASURED on {ids}, not on {prof.id}", True


def ngram_gain(p: ModelProfile, gpu: GpuSpec, lay: ReplicaLayout, seqs: int, context: float, k: int, suffix_kbar: float,
               *, build: str | None = None, ngram: KbarChoice | None = None,
               suffix_kbar_sigma: float = 0.0) -> tuple[Band, float, list[str]]:  # fmt: skip
    """Throughput gain of n-gram prompt lookup with ``k`` drafts, verified in a step that pays n-gram's own
    speculative-step cost from the host profile (``build``; None: the profile matching ``gpu``, or the
    geometric mean of R over the known profiles when none does).

    Tokens per step: n-gram's own K̄ when it is known (``ngram``: replayed on the model's own outputs, or
    the own-output prior of the corpus; carried from its K to ``k``), else ASSUMED a share of suffix
    decoding's (NGRAM_SHARE). With its own K̄ the verification step is sized from K: n-gram drafts
    exactly K tokens when it matches, so a step verifies 1 + (K̄ - 1) / NGRAM_ACCEPTANCE tokens per
    sequence (MEASURED acceptance, kbar_prior.NGRAM_ACCEPTANCE), at most 1 + K. With the ASSUMED share
    the step keeps the 1.5 x drafted it was assumed with (sized from K alone it flips seed-host
    decisions by < 1 % of predicted throughput with no n-gram measurement on that host), and its band spans the
    share of suffix's K̄ band (``suffix_kbar_sigma``, σ of ln K̄: e.g. an unseen corpus's spread), so an n-gram
    interval is never surer of K̄ than the suffix one it is derived from."""
    from advisor.predict import host_profile as hp
    from advisor.predict import kbar_prior as kp

    if ngram is not None:
        mid, lo, hi = (kp.kbar_at_draft(x, ngram.k, k) for x in (ngram.k_bar, ngram.low, ngram.high))
        head = f"{NGRAM_KBAR_HEAD} {mid:.2f} [{lo:.2f}, {hi:.2f}] from {ngram.source}"
        if ngram.k != k:
            head += f" (at K={ngram.k}, carried to K={k}: ASSUMED constant per-token acceptance)"
    else:
        span = math.exp(INTERVAL_Z * suffix_kbar_sigma)
        lo, mid, hi = (1 + s * max(0.0, min(kb, 1 + k) - 1)
                       for s, kb in zip(NGRAM_SHARE, (suffix_kbar / span, suffix_kbar, suffix_kbar * span)))
        head = f"{NGRAM_KBAR_HEAD} {mid:.2f} [{lo:.2f}, {hi:.2f}] = {NGRAM_SHARE[1]:.2f} of suffix's extra tokens (ASSUMED)"
        if suffix_kbar_sigma:
            head += f", over suffix's K̄ band (sigma(ln K̄) {suffix_kbar_sigma:.2f})"
    if ngram is not None:  # sized from K: n-gram drafts exactly K tokens when it matches
        verified = min(float(k), (mid - 1) / kp.NGRAM_ACCEPTANCE)
        share = min(1.0, verified / k)
        sizing = (f"n-gram verifies {1 + verified:.2f} tokens per sequence per step: K={k} drafted by {share:.0%} of "
                  f"sequences (acceptance {kp.NGRAM_ACCEPTANCE:.2f} MEASURED, SmolLM2 on vLLM 0.32 CPU)")  # fmt: skip
    else:  # K̄ itself ASSUMED: the step keeps the sizing it was assumed with (docs/predictor.md, n-gram as itself)
        verified, share = min(float(k), max(1.0, mid - 1) * 1.5), 0.6
        sizing = f"n-gram verifies {1 + verified:.2f} tokens per sequence per step (1.5 x drafted, ASSUMED with the share)"
    builds = [build] if build else hp.match(gpu.name).profiles
    rs = []
    for b in builds:
        plain, _ = decode_step(p, gpu, lay, seqs, context, build=b)  # the host's floor of a plain step, where measured
        verify, _ = decode_step(p, gpu, lay, seqs, context, tokens_per_seq=1 + verified, spec=True, k=k, draft_share=share,
                                method="ngram", build=b)  # fmt: skip
        rs.append(verify / plain)
    r = math.exp(sum(math.log(x) for x in rs) / len(rs))
    prof = [hp.get(b) for b in builds]
    # a host class whose repeated probes measured R's run-to-run spread widens the band by it (in log, with the
    # K̄ band: independent); INTERVAL_Z as the suffix interval's 90 %
    run = hp.run_sigma_of(builds, "ngram")
    down, up = math.log(mid / r / (lo / max(rs))), math.log(hi / min(rs) / (mid / r))
    if run:
        down, up = math.hypot(down, INTERVAL_Z * run), math.hypot(up, INTERVAL_Z * run)
    band = Band(value=mid / r, low=mid / r * math.exp(-down), high=mid / r * math.exp(up))
    notes = [head, sizing,
             "n-gram step cost: host profile " + ", ".join(f"{x.id} ({x.ngram_step_s * 1e3:.2f} ms + {x.ngram_per_seq_s * 1e6:.0f} us/seq)"
                                                     for x in prof)]  # fmt: skip
    if run:
        notes.append(f"n-gram R run to run: sigma(ln R) {run:.2f} MEASURED on this host class (repeated probes), in the band")
    return band, r, notes


class ServingFigures(BaseModel):
    """Predicted steady-state figures of one candidate on the whole host."""

    model_config = ConfigDict(extra="forbid")

    throughput_tok_s: Band
    """Output tokens per second over every replica."""
    tpot_ms: Band
    """Time per output token one user sees."""
    ttft_ms: Band | None
    """Time to first token (prefill + one step + waiting for a slot); None where the queue grows without bound
    (``ttft_unbounded`` says why)."""
    ttft_unbounded: str | None = None
    """Why there is no TTFT figure (an offered rate above capacity); None when ``ttft_ms`` is a figure."""
    step_ms: Band
    """One plain decode step of a replica at its running sequences."""
    prefill_ms: Band
    """Prefill of one prompt on one replica."""
    running_per_replica: int
    """Sequences a replica runs at once (concurrency / DP, capped by max_num_seqs and the KV cache)."""
    waiting_per_replica: float | None
    """Requests per replica waiting for a slot (None: a queue growing without bound)."""
    busy_replicas: float | None = None
    """Replicas' worth of the host that has requests (advisor.predict.serving.busy_replicas): host tok/s counts
    only those; fewer requests than replicas leave replicas idle. None: every replica."""
    gain: Band | None = None
    """Speculative tokens-per-time gain over plain decoding (None: plain)."""
    notes: list[str] = Field(default_factory=list)
    """Labelled terms (ASSUMED / MEASURED / FITTED) behind these figures."""

    @property
    def ttft_value(self) -> float:
        """TTFT in ms for ranking and limits: infinite where there is no steady state (never printed)."""
        return self.ttft_ms.value if self.ttft_ms is not None else math.inf


def serve(p: ModelProfile, gpu: GpuSpec, lay: ReplicaLayout, *, concurrency: int, prompt_len: int, output_len: int,
          slots: int, gain: Band | None = None, notes: list[str] | None = None) -> ServingFigures:
    """The cycle model of the module docstring, at mid, fast (low times, high gain) and slow ends."""
    per_replica = max(1, -(-concurrency // lay.dp))
    n = max(1, min(per_replica, slots))
    context = prompt_len + output_len / 2
    t_step, step_notes = decode_step(p, gpu, lay, n, context)
    t_pf = prefill_time(p, gpu, lay, prompt_len)
    t_pm = prefill_marginal(p, gpu, lay, prompt_len)
    g = gain or Band(value=1.0, low=1.0, high=1.0)
    wait = (per_replica - n) / n

    # only requests produce tokens: the host runs min(C, DP x n) sequences, not DP x n (idle replicas add nothing)
    running_host = min(max(1, concurrency), lay.dp * n)

    def cycle(ts: float, tp: float, tm: float, gg: float) -> tuple[float, float, float]:
        t = output_len * ts / gg + n * tm
        return running_host * output_len / t, t / output_len, tp + ts + wait * t

    lo, hi = 1 - PREFILL_BAND, 1 + PREFILL_BAND
    mid = cycle(t_step, t_pf, t_pm, g.value)
    fast = cycle(t_step * (1 - STEP_BAND), t_pf * lo, t_pm * lo, g.high)
    slow = cycle(t_step * (1 + STEP_BAND), t_pf * hi, t_pm * hi, g.low)
    r = lambda x, d=1: round(x, d)  # noqa: E731
    return ServingFigures(
        throughput_tok_s=Band(value=r(mid[0], 0), low=r(slow[0], 0), high=r(fast[0], 0)),
        tpot_ms=Band(value=r(mid[1] * 1e3, 2), low=r(fast[1] * 1e3, 2), high=r(slow[1] * 1e3, 2)),
        ttft_ms=Band(value=r(mid[2] * 1e3), low=r(fast[2] * 1e3), high=r(slow[2] * 1e3)),
        step_ms=Band(value=r(t_step * 1e3, 3), low=r(t_step * (1 - STEP_BAND) * 1e3, 3), high=r(t_step * (1 + STEP_BAND) * 1e3, 3)),
        prefill_ms=Band(value=r(t_pf * 1e3, 2), low=r(t_pf * (1 - PREFILL_BAND) * 1e3, 2), high=r(t_pf * (1 + PREFILL_BAND) * 1e3, 2)),
        running_per_replica=n, waiting_per_replica=round(max(0, per_replica - n), 1), gain=gain,
        busy_replicas=round(running_host / n, 3),
        notes=step_notes + list(notes or []) + [
            "prefill: FLOPs at the GEMM efficiency MEASURED on the H200 (0.64); the grid's prefill is 9-20% faster"],
    )  # fmt: skip
