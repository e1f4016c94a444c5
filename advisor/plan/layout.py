"""Enumerate layouts (TP x DP, EP) x speculative methods (advisor.methods: plain, suffix, n-gram, MTP, EAGLE-3, …) x
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

from advisor.errors import AdvisorError
from advisor.hardware.gpus import GpuSpec
from advisor.model.schema import ModelProfile
from advisor.domain.decision import Decision
from advisor.domain.prediction import Band, KbarSourceKind, Objective
from advisor.domain.views import WhyKind
from advisor.predict.pipeline import pp_serve, pp_split
from advisor.predict.absolute import ReplicaLayout, ServingFigures, serve
from advisor import methods as _methods
from advisor.methods import MethodContext
from advisor.plan.memory_terms import dense_intermediate
from advisor.rules.policy import load_policy
from advisor.plan.memory_terms import batch_defaults



class NoFeasibleLayout(AdvisorError):
    """No candidate boots and meets the limits."""

    exit_code = 8


class RateNotServed(NoFeasibleLayout):
    """--request-rate: no server of up to a node's GPUs meets the limits at any rate (exit 8, one line)."""


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
    concurrency_given: bool = True
    """False when the user gave no --concurrency: with a limit, the operating point offers the load too."""
    kv_cache_dtype: Literal["auto", "fp8", "search"] = "auto"
    """--kv-cache-dtype: the KV cache's dtype, or ``search`` for both (fp8 changes numerics: opt-in)."""
    request_rate: float | None = Field(default=None, gt=0)
    """--request-rate: requests per second over the host (open loop); the fewest GPUs that serve it are sought."""
    spec: str | None = None
    """--spec: the speculative method the user forces (an advisor.methods id, launched however it is predicted);
    None: the fastest."""
    draft_k: int | None = Field(default=None, ge=1, le=16)
    """--draft-k: num_speculative_tokens of the drafter methods (EAGLE-3, draft model); None: searched."""
    length_spread: float = Field(default=0.0, ge=0, lt=1)
    """--length-spread R: each request's prompt and output lengths drawn as ``vllm bench serve --random-range-ratio R``
    draws them (advisor.predict.closed_loop.spread_lengths; means prompt_len / output_len); 0: fixed lengths. The
    closed loop is played request by request with them; every other figure is at the mean lengths."""
    arrival: Literal["closed", "poisson"] | None = None
    """--arrival: the load pattern --max-tpot-ms / --max-ttft-ms are judged on (None: what the emitted benchmark runs,
    closed without --request-rate, Poisson with it)."""

    @property
    def judged_on(self) -> Literal["closed", "poisson"]:
        """The arrival pattern the limits are judged on."""
        if self.request_rate is not None:
            return "poisson"
        return self.arrival or "closed"

    @property
    def operating_point(self) -> bool:
        """Whether max_num_seqs x max_num_batched_tokens (x offered load) is searched (advisor.plan.operating_point)."""
        return self.request_rate is not None or self.max_tpot_ms is not None or self.max_ttft_ms is not None

    def point_query(self, concurrency: int):
        from advisor.plan.operating_point import PointQuery

        return PointQuery(prompt_len=self.prompt_len, output_len=self.output_len, max_tpot_ms=self.max_tpot_ms,
                          max_ttft_ms=self.max_ttft_ms, request_rate=self.request_rate,
                          concurrency=concurrency if self.concurrency_given and self.request_rate is None else None)  # fmt: skip


class Candidate(BaseModel):
    """One searched configuration and what it is predicted to do."""

    model_config = ConfigDict(extra="forbid")

    layout: ReplicaLayout
    method: str
    """An advisor.methods id (``none`` for plain decoding)."""
    k: int | None = None
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    kv_cache_dtype: Literal["auto", "fp8"] = "auto"
    concurrency: int | None = None
    """Requests in flight offered to the host at the chosen operating point (None: the user's, or an open loop)."""
    spec_schedule: list[list[int]] | None = None
    """num_speculative_tokens_per_batch_size to render ([[lo, hi, K], …]); None: a fixed K."""
    schedule_reason: str | None = None
    """Why the K follows (or cannot follow) the batch size (advisor.plan.operating_point.spec_schedule)."""
    load_guard: str | None = None
    """Suffix only: why it is off at this load per replica (advisor.plan.operating_point.suffix_load_guard)."""
    points: list = Field(default_factory=list, exclude=True)
    """Every operating point searched for this layout and method (advisor.plan.operating_point.Point)."""
    boots: bool
    kv_cache_tokens: int = 0
    memory_reason: str = ""
    figures: ServingFigures | None = None
    p_win: float | None = None
    """P(suffix wins) from the calibrated predictor (suffix only)."""
    k_bar: float | None = None
    """Tokens per verification step the gain assumes (speculative methods)."""
    k_bar_source: str | None = None
    """Where K̄ came from, where the method says (drafters: probe, published acceptance or class prior)."""
    k_bar_kind: KbarSourceKind | None = None
    """The kind of K̄'s source (advisor.methods.base.GainEstimate.k_bar_kind)."""
    k_bar_published_source_id: str | None = None
    """The publication of a published traffic K̄ (advisor.methods.base.GainEstimate.k_bar_published_source_id)."""
    k_bar_note: str | None = None
    """The note that says where K̄ came from (advisor.methods.base.GainEstimate.k_bar_note: n-gram, MTP)."""
    drafter: str | None = None
    """The drafter the method runs (EAGLE head or draft model: HF id or directory); None for the others."""
    r: float | None = None
    """Verification step / plain step (speculative methods)."""
    measured_gain: float | None = None
    """Suffix only: what probes on this host measured for exactly this deployment (advisor.plan.predictor)."""
    pipeline: tuple[int, int] | None = None
    """(TP per node, PP nodes) where the replica spans nodes (priced and rendered so); None: one node."""
    eligible: bool = True
    why_not: str | None = None
    """Why this candidate cannot win (does not boot, rule, SLA); None when eligible."""
    why_kind: WhyKind | None = None
    """What kind of reason ``why_not`` is (typed: logic reads this, never the message text)."""

    def layout_label(self) -> str:
        """The layout as it runs: TP x DP (+ EP), or TP per node x PP across nodes."""
        if self.pipeline:
            return f"TP {self.pipeline[0]} x PP {self.pipeline[1]} ({self.pipeline[1]} nodes)"
        return self.layout.label()

    def label(self) -> str:
        spec = "plain" if self.method == "none" else f"{self.method} K={self.k}"
        seqs = f", max_num_seqs {self.max_num_seqs}" if self.max_num_seqs else ""
        seqs += f", max_num_batched_tokens {self.max_num_batched_tokens}" if self.max_num_batched_tokens else ""
        seqs += ", KV fp8" if self.kv_cache_dtype == "fp8" else ""
        return f"{self.layout_label()}, {spec}{seqs}"


KV_FP8_NOTE = ("KV cache fp8: half the bytes per token in the cache (more sequences fit) and in decode attention "
               "reads (vllm/config/cache.py CacheDType 'fp8'); the numerics change: check quality on your evaluation")  # fmt: skip


def kv_fp8_refusal(p: ModelProfile, gpu: GpuSpec) -> str | None:
    """Why ``--kv-cache-dtype fp8`` is not searched here (None: it is)."""
    if p.attention == "mla":
        return "MLA's latent cache has its own fp8 format (fp8_ds_mla) whose kernels are not modelled here"
    if not gpu.fp8_tflops:
        return f"{gpu.name} has no FP8 tensor cores in the GPU table (catalog/gpus.yaml)"
    return None


def kv_fp8_profile(p: ModelProfile) -> ModelProfile:
    """The profile with an 8-bit KV cache: half the KV bytes per token (memory planner and step cost both
    read them from the profile), nothing else changed."""
    return p.model_copy(update={"kv_bytes_per_token": p.kv_bytes_per_token // 2,
                                "kv_bytes_per_token_full": p.kv_bytes_per_token_full // 2})  # fmt: skip


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


def replica_profile(p: ModelProfile, lay: ReplicaLayout, method: str, drafter=None, *, kv_fp8: bool = False) -> ModelProfile:
    """The profile the memory planner sees for one replica: MoE layers of DP ranks share the experts
    (each GPU holds 1/(TP x DP) of them), and the method's own weights and KV per token (MTP layers, a drafter:
    advisor.methods ``extra_memory``) ride on the target's."""
    wb, kv = p.weight_bytes, p.kv_bytes_per_token
    if p.arch == "moe" and p.experts and lay.dp > 1:
        expert = p.expert_params_b * 1e9 * (p.weight_bytes / max(p.params_total_b * 1e9, 1.0))
        wb -= int(expert * (1 - 1 / lay.dp))
    extra_w, extra_kv = _methods.get(method).extra_memory(p, drafter)
    if kv_fp8:  # --kv-cache-dtype applies to every attention layer vLLM allocates, the drafter's too
        extra_kv //= 2
    wb, kv = wb + extra_w, kv + extra_kv
    if wb == p.weight_bytes and kv == p.kv_bytes_per_token:
        return p
    return p.model_copy(update={"weight_bytes": wb, "kv_bytes_per_token": kv,
                                "kv_bytes_per_token_full": p.kv_bytes_per_token_full + extra_kv})


SuffixGain = Callable[[int, int, int], "object | None"]
"""(tp, concurrency per replica, K) -> the K > R prediction there (gain, gain_low, gain_high, p_win,
k_bar, r, measured), or None when the predictor declines."""


def _spec_options(p: ModelProfile, k_fixed: int | None, k_rules: int, pol, query: LayoutQuery, drafters=(),
                  vf=None) -> list[tuple[str, int | None, object]]:  # fmt: skip
    """(method, K, drafter) triples searched: plain, then every method of advisor.methods that can run here, at its
    Ks; a drafter method once per drafter of its kind (the first that runs with the model)."""
    opts: list[tuple[str, int | None, object]] = [("none", None, None)]
    for m in _methods.all_methods():
        if m.id == "none" or (vf is not None and m.vllm_name(vf) not in vf.spec_methods):
            continue  # plain is there already; a method this vLLM line does not have (VllmFacts.spec_methods) is none
        drafter = next((d for d in drafters if d.kind in getattr(m, "kinds", ()) and m.needs(p, d, vf) is None), None)
        if m.needs(p, drafter, vf) is not None:
            continue
        opts += [(m.id, k, drafter) for k in m.ks(p, drafter, k_fixed=k_fixed, k_rules=k_rules, policy=pol, query=query, vf=vf)]
    return opts


def score(p: ModelProfile, gpu: GpuSpec, gpus: int, base: Decision, *, concurrency: int, query: LayoutQuery,
          suffix_gain: SuffixGain, planner, tp_fixed: int | None = None, k_fixed: int | None = None,
          k_rules: int, policy_table=None, vllm_version: str | None = None, workload=None,
          drafters=(), probes=()) -> list[Candidate]:  # fmt: skip
    """Every candidate with its boot verdict and predicted figures (eligibility and ranking are
    :func:`advisor.plan.choose.choose`'s). ``planner(profile, decision) -> (boots, kv_cache_tokens, reason)``.
    A suffix candidate that does not boot at the rules' K is tried at the table's lower K (without
    ``--k``), and then under lower max_num_seqs caps. ``workload``: the traffic methods read their K̄ from
    (n-gram's own, a drafter's dataset class); ``drafters``: the EAGLE heads and draft models (advisor.model.drafter)."""
    from advisor.vllm_facts import DEFAULT_VERSION, facts

    pol = policy_table or load_policy()
    vf = facts(vllm_version or DEFAULT_VERSION)
    lays, refused = layouts(p, gpus, tp_fixed)
    if not lays:
        raise NoFeasibleLayout(f"no tensor-parallel layout vLLM accepts on {gpus} GPUs: {'; '.join(refused)}")
    seq_caps: list[int | None] = [base.max_num_seqs]
    if base.max_num_seqs is None and (query.objective == "latency" or query.max_tpot_ms) and not query.operating_point:
        seq_caps += list(pol.seqs_caps)
    cands: list[Candidate] = []
    gains: dict[tuple, object | None] = {("probes",): tuple(probes)}  # the methods' context reads the probes from here
    opts = _spec_options(p, k_fixed, k_rules, pol, query, drafters, vf)
    last_k = ([k for m, k, _ in opts if m == "suffix"] or [None])[-1]
    kv_opts = ["auto", "fp8"] if query.kv_cache_dtype == "search" else [query.kv_cache_dtype]
    why_no_fp8 = kv_fp8_refusal(p, gpu)
    if why_no_fp8:
        if query.kv_cache_dtype == "fp8":
            from advisor.errors import UsageError

            raise UsageError(f"--kv-cache-dtype fp8: {why_no_fp8}; pass --kv-cache-dtype auto (or search)")
        kv_opts = ["auto"]
    op_mode = query.operating_point and base.max_num_seqs is None
    for kvd in kv_opts:
        pk = kv_fp8_profile(p) if kvd == "fp8" else p
        for lay in lays:
            per_replica = -(-concurrency // lay.dp)
            suffix_booted = False
            keep = _drafter_ks(opts, pk, gpu, lay, vf, suffix_gain, gains, pol.num_speculative_tokens, workload, query,
                               per_replica, pol.drafter_ks_scored)  # fmt: skip
            for method, k, drafter in opts:
                if keep.get(method) is not None and k not in keep[method]:
                    continue  # a drafter K predicted below the method's best two at this load (see _drafter_ks)
                if method == "suffix" and k != (k_fixed or k_rules) and suffix_booted:
                    continue  # a lower K only where the rules' K does not boot
                # the memory planner's order: lower K first, then fewer sequences (the last K only)
                fallback = (method == "suffix" and k == last_k and len(seq_caps) == 1 and base.max_num_seqs is None
                            and not op_mode)  # fmt: skip
                for cap in [*seq_caps, *(pol.seqs_caps if fallback else ())]:
                    if cap is not None and cap >= per_replica and not fallback:
                        continue
                    c = _one(pk, gpu, lay, method, k, cap, base, concurrency, query, suffix_gain, planner, gains,
                             pol.num_speculative_tokens, vf, workload, drafter, kv_fp8=kvd == "fp8")  # fmt: skip
                    c.kv_cache_dtype = kvd
                    for pt in c.points:
                        pt.kv_cache_dtype = kvd
                    if kvd == "fp8" and c.figures is not None:
                        c.figures.notes.append(KV_FP8_NOTE)
                    suffix_booted |= method == "suffix" and c.boots
                    cands.append(c)
                    if fallback and c.boots:
                        break
    return cands


def _drafter_ks(opts, p, gpu, lay, vf, suffix_gain, gains, k_ngram_ref, workload, query, per_replica, kept: int) -> dict:
    """method -> the ``kept`` Ks scored in full for a drafter method (the policy table's ``drafter_ks_scored``: its gain at
    ``per_replica`` running sequences, best first); methods without a drafter or with at most ``kept`` Ks: absent (all
    kept). A --draft-k keeps its one K anyway."""
    out: dict[str, set] = {}
    context = query.prompt_len + query.output_len / 2
    for method in {m for m, _, d in opts if d is not None}:
        ks = [(k, d) for m, k, d in opts if m == method]
        if len(ks) <= kept:
            continue
        ctx = _context(p, gpu, lay, vf, suffix_gain, gains, k_ngram_ref, workload, ks[0][1])
        spec = _methods.get(method)
        scored = sorted(ks, key=lambda kd: -spec.estimate(ctx, kd[0], max(1, per_replica), context).gain.value)
        out[method] = {k for k, _ in scored[:kept]}
    return out


def drafter_position_refusal(drafter, max_model_len: int, vf) -> str | None:
    """Why a drafter cannot serve ``max_model_len`` on this vLLM line (None: it can): a head whose config's
    max_position_embeddings is below it, on a line that does not raise it to the target's (VllmFacts
    draft_position_override)."""
    limit = drafter.profile.max_context
    if vf is None or vf.draft_position_override or limit >= max_model_len:
        return None
    return (f"does not run: drafter {drafter.id} says max_position_embeddings {limit} < max_model_len {max_model_len}, and "
            f"vLLM {vf.version} sizes the draft's rotary cache from it: the engine dies with a device-side assert once a "
            f"draft position passes {limit} (vLLM #48894; seen in campaign 15, calibration/serving_bench/"
            f"h100-vllm0.26.0-c15); pass --max-model-len {limit}, a vLLM line that raises it (0.32+), or a head "
            "trained for the target's context")  # fmt: skip


def _context(p, gpu, lay, vf, suffix_gain, gains, k_ngram_ref, workload, drafter, probes=()) -> MethodContext:
    """What a method's estimate reads about this layout; ``gains`` caches suffix's prediction per (TP, n, K)."""

    def suffix_at(tp: int, n: int, k: int):
        key = (tp, n, k)
        if key not in gains:
            gains[key] = suffix_gain(*key)
        return gains[key]

    from advisor.vllm_facts import facts

    return MethodContext(profile=p, gpu=gpu, layout=lay, vf=vf or facts(), suffix_at=suffix_at, workload=workload,
                         drafter=drafter, ngram_k_ref=k_ngram_ref, memo=gains.setdefault(("memo",), {}),
                         probes=gains.get(("probes",), ()))  # fmt: skip


DECLINED = "the suffix predictor declined (no calibration for this model/GPU)"


def _apply(cand: Candidate, est) -> None:
    """Copy what a method's estimate says about its K̄, R and P(win) onto the candidate."""
    cand.p_win, cand.k_bar, cand.r = est.p_win, est.k_bar, est.r
    cand.measured_gain, cand.k_bar_source, cand.k_bar_kind = est.measured_gain, est.k_bar_source, est.k_bar_kind
    cand.k_bar_note, cand.k_bar_published_source_id = est.k_bar_note, est.k_bar_published_source_id


def _one(p, gpu, lay, method, k, cap, base, concurrency, query, suffix_gain, planner, gains, k_ngram_ref, vf=None,
         workload=None, drafter=None, kv_fp8: bool = False) -> Candidate:  # fmt: skip
    spec = _methods.get(method)
    uses_drafter = spec.uses_drafter and drafter is not None
    d = base.model_copy(update={
        "tensor_parallel_size": lay.tp, "data_parallel_size": lay.dp, "enable_expert_parallel": lay.ep,
        "speculative_method": None if method == "none" else method, "num_speculative_tokens": k, "max_num_seqs": cap,
        "speculative_model": drafter.id if uses_drafter else None,
    })  # fmt: skip
    split = pp_split(lay.tp, query.gpus_per_node) if lay.dp == 1 else None
    if lay.dp > 1 and lay.gpus > query.gpus_per_node:
        # advisor.render.multinode renders one replica across nodes (TP x PP), not DP replicas spread over nodes.
        return Candidate(layout=lay, method=method, k=k, max_num_seqs=cap, boots=False, memory_reason="not planned",
                         eligible=False, why_kind="span", why_not=f"{lay.dp} data-parallel replicas over {lay.gpus} GPUs span more than a node "
                         f"of {query.gpus_per_node}: not rendered (run one server per node instead)")  # fmt: skip
    if split is not None and method != "none" and method not in query.pp_speculative_methods:
        cand = Candidate(layout=lay, method=method, k=k, max_num_seqs=cap, boots=False, kv_cache_tokens=0,
                         memory_reason="not planned", eligible=False, why_kind="pp")  # fmt: skip
        cand.why_not = (f"{method} with pipeline parallelism (TP {split[0]} x PP {split[1]} over {split[1]} nodes): no "
                        "speculative method the advisor renders is known to work with PP in this vLLM (advisor.vllm_facts "
                        "pp_speculative_methods: vLLM issue #57755, PR #55623)")  # fmt: skip
        return cand
    if uses_drafter and (why := drafter_position_refusal(drafter, d.max_model_len, vf)):
        return Candidate(layout=lay, method=method, k=k, max_num_seqs=cap, boots=False, memory_reason="not planned",
                         drafter=drafter.id, eligible=False, why_kind="boot", why_not=why)  # fmt: skip
    boots, kv_tokens, reason = planner(replica_profile(p, lay, method, drafter if uses_drafter else None, kv_fp8=kv_fp8), d)
    cand = Candidate(layout=lay, method=method, k=k, max_num_seqs=cap, boots=boots, kv_cache_tokens=kv_tokens, memory_reason=reason,
                     pipeline=split, drafter=d.speculative_model)  # fmt: skip
    if not boots:
        cand.eligible, cand.why_not, cand.why_kind = False, f"does not boot: {reason}", "boot"
        return cand
    if vf is not None and query.operating_point and base.max_num_seqs is None and split is None:
        # (a multi-node TP x PP replica keeps the fixed-load pricing: the operating point models one node's steps)
        _operating_point(cand, p, gpu, lay, method, k, kv_tokens, concurrency, query, suffix_gain, gains, vf, k_ngram_ref, workload,
                         drafter)  # fmt: skip
        return cand
    per_replica = -(-concurrency // lay.dp)
    need = query.prompt_len + query.output_len
    slots = min(cap or batch_defaults(gpu)[1], max(1, kv_tokens // need))
    n = max(1, min(per_replica, slots))
    context = query.prompt_len + query.output_len / 2
    gain, notes = None, []
    ctx = _context(p, gpu, lay, vf, suffix_gain, gains, k_ngram_ref, workload, drafter)
    if method != "none":
        est = spec.estimate(ctx, k, n, context)
        if est is None:
            cand.eligible, cand.why_not, cand.why_kind = False, DECLINED, "declined"
            return cand
        gain, notes = est.gain, list(est.notes)
        _apply(cand, est)
    split = pp_split(lay.tp, query.gpus_per_node) if lay.dp == 1 else None
    if split is not None:  # multi-node: priced (and later rendered) as TP per node x PP across nodes
        cand.figures = pp_serve(p, gpu, split[0], split[1], concurrency=concurrency, prompt_len=query.prompt_len,
                                output_len=query.output_len, slots=slots, gain=gain, notes=notes)  # fmt: skip
    else:
        cand.figures = serve(p, gpu, lay, concurrency=concurrency, prompt_len=query.prompt_len, output_len=query.output_len,
                             slots=slots, gain=gain, notes=notes)  # fmt: skip
    if vf is not None:
        from advisor.plan import operating_point as op

        if method == "suffix":
            cand.load_guard = op.suffix_load_guard(cand.figures.running_per_replica, cand.p_win, vf, lay.dp)
        elif method != "none" and gain is not None:
            def gain_at(m: int):
                return spec.estimate(ctx, k, m, context).gain

            cand.spec_schedule, cand.schedule_reason = op.spec_schedule(method, k, gain_at, cap or batch_defaults(gpu, vf.version)[1],
                                                                        lay.dp, vf)  # fmt: skip
    return cand


def _judge_closed(pts, query: LayoutQuery, lay, step_of, gain_of, cp: float, kv_slots: int, q_tok: float) -> None:
    """--arrival closed (the default without --request-rate: what the emitted benchmark runs): the limits are judged
    on the closed loop simulated step by step (advisor.predict.closed_loop, mid end), best point first, until one
    meets them; the points that miss are ruled out with the simulated figure."""
    from advisor.plan import operating_point as op
    from advisor.predict.closed_loop import bench_prompts, simulate

    from advisor.predict.closed_loop import MAX_SIMULATED_IN_FLIGHT

    while True:
        pt = op.best(pts, query.objective, query.output_len)
        if pt is None:
            return
        per = -(-(pt.concurrency or pt.max_num_seqs * lay.dp) // lay.dp)
        if per > MAX_SIMULATED_IN_FLIGHT:
            pt.feasible, pt.why_not = False, (f"closed loop of {per} requests per replica: beyond what the simulation plays "
                                              f"({MAX_SIMULATED_IN_FLIGHT}); pass --arrival poisson to judge it on Poisson arrivals")  # fmt: skip
            continue
        g = gain_of(pt.figures.running_per_replica)
        run = simulate(step_of, prefill_token_s=cp, prompt_len=query.prompt_len, output_len=query.output_len,
                       concurrency=per, num_prompts=bench_prompts(per), max_num_seqs=pt.max_num_seqs,
                       max_num_batched_tokens=pt.max_num_batched_tokens, kv_slots=kv_slots,
                       gain=g.value if g is not None else 1.0, tokens_per_seq=q_tok,
                       lengths=spread_of(query, bench_prompts(per)))  # fmt: skip
        if query.max_tpot_ms and run.mean_tpot_ms > query.max_tpot_ms:
            why = f"closed loop (the benchmark's): mean TPOT {run.mean_tpot_ms:.1f} ms > --max-tpot-ms {query.max_tpot_ms:g}"
        elif query.max_ttft_ms and run.mean_ttft_ms > query.max_ttft_ms:
            why = f"closed loop (the benchmark's): mean TTFT {run.mean_ttft_ms:.0f} ms > --max-ttft-ms {query.max_ttft_ms:g}"
        else:
            return
        pt.feasible, pt.why_not = False, why


def spread_of(query: LayoutQuery, n: int) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """The ``n`` requests' (prompt, output) lengths the benchmark draws with --length-spread (None: fixed lengths).
    A replica of a DP layout plays the first ``n`` draws: the same distribution as the share the benchmark sends it."""
    if not query.length_spread:
        return None
    from advisor.predict.closed_loop import spread_lengths

    return spread_lengths(query.prompt_len, query.output_len, query.length_spread, n)


def schedule_graph_cost(p: ModelProfile, vf) -> float:
    """Seconds a K schedule adds to every step that drafts nothing: vLLM lines that force PIECEWISE CUDA graphs
    with ``num_speculative_tokens_per_batch_size`` (``VllmFacts.spec_schedule_piecewise``) replay plain steps
    PIECEWISE instead of FULL (the per-layer launch cost of advisor.predict.stepcost)."""
    from advisor.predict import stepcost as sc

    if not vf.spec_schedule_piecewise:
        return 0.0
    return sc.launch_time(p, "piecewise") - sc.launch_time(p, "full")


def closed_loop_run(p: ModelProfile, gpu: GpuSpec, lay: ReplicaLayout, *, prompt_len: int, output_len: int,
                    concurrency: int, num_prompts: int, max_num_seqs: int, max_num_batched_tokens: int, kv_cache_tokens: int,
                    gain: float = 1.0, tokens_per_seq: float = 1.0, step_scale: float = 1.0, prefill_scale: float = 1.0,
                    lengths=None):
    """One replica's closed loop at ``concurrency`` (advisor.predict.closed_loop.simulate) with the decode step and
    prefill of ``p`` on ``lay`` (``p`` already the KV-dtype profile), each scaled by its band end: what
    :func:`closed_loop_figures` plays three times and the lab replays at a verify run's own load."""
    from advisor.predict.absolute import decode_step, prefill_marginal
    from advisor.predict.closed_loop import simulate

    context = prompt_len + output_len / 2
    cp = prefill_marginal(p, gpu, lay, prompt_len) / prompt_len
    steps: dict[int, float] = {}

    def step_of(n: int) -> float:
        if n not in steps:
            steps[n] = decode_step(p, gpu, lay, n, context)[0]
        return steps[n] * step_scale

    return simulate(step_of, prefill_token_s=cp * prefill_scale, prompt_len=prompt_len, output_len=output_len,
                    concurrency=concurrency, num_prompts=num_prompts, max_num_seqs=max_num_seqs,
                    max_num_batched_tokens=max_num_batched_tokens, kv_slots=max(1, kv_cache_tokens // (prompt_len + output_len)),
                    gain=gain, tokens_per_seq=tokens_per_seq, lengths=lengths)  # fmt: skip


def closed_loop_figures(p: ModelProfile, gpu: GpuSpec, c: Candidate, query: LayoutQuery, concurrency: int,
                        vllm_version: str | None = None) -> dict | None:  # fmt: skip
    """What ``vllm bench serve --max-concurrency C`` (the closed loop the emitted benchmark runs, fixed lengths)
    measures on candidate ``c``: the step-by-step simulation of vLLM's scheduler (advisor.predict.closed_loop) at
    mid, fast and slow ends (step ±STEP_BAND, prefill ±PREFILL_BAND, the gain's interval), per replica at
    ceil(C / DP), host tok/s over the busy replicas. None for a multi-node (PP) replica or no figures."""
    from advisor.predict.absolute import PREFILL_BAND, STEP_BAND
    from advisor.predict.closed_loop import MAX_SIMULATED_IN_FLIGHT, bench_prompts
    from advisor.predict.serving import busy_replicas

    if c.figures is None or c.pipeline or concurrency < 1 or -(-concurrency // c.layout.dp) > MAX_SIMULATED_IN_FLIGHT:
        return None
    pk = kv_fp8_profile(p) if c.kv_cache_dtype == "fp8" else p
    lay = c.layout
    P, out_len = query.prompt_len, query.output_len
    tokens_default, seqs_default = batch_defaults(gpu, vllm_version) if vllm_version else batch_defaults(gpu)
    per = -(-concurrency // lay.dp)
    g = c.figures.gain
    q = _methods.get(c.method).tokens_per_seq(c.k or 1, facts_of(vllm_version))
    ends = {"mid": (1.0, 1.0, g.value if g else 1.0), "fast": (1 - STEP_BAND, 1 - PREFILL_BAND, g.high if g else 1.0),
            "slow": (1 + STEP_BAND, 1 + PREFILL_BAND, g.low if g else 1.0)}  # fmt: skip
    runs = {}
    lengths = spread_of(query, bench_prompts(per))
    for name, (fs, fp, gg) in ends.items():
        runs[name] = closed_loop_run(pk, gpu, lay, prompt_len=P, output_len=out_len, concurrency=per,
                                     num_prompts=bench_prompts(per), max_num_seqs=c.max_num_seqs or seqs_default,
                                     max_num_batched_tokens=c.max_num_batched_tokens or tokens_default,
                                     kv_cache_tokens=c.kv_cache_tokens, gain=gg, tokens_per_seq=q, step_scale=fs,
                                     prefill_scale=fp, lengths=lengths)  # fmt: skip
    busy = busy_replicas(concurrency, lay.dp)
    band = lambda key, scale=1.0, d=1: {"value": round(getattr(runs["mid"], key) * scale, d),  # noqa: E731
                                        "low": round(getattr(runs["fast" if key != "output_tok_s" else "slow"], key) * scale, d),
                                        "high": round(getattr(runs["slow" if key != "output_tok_s" else "fast"], key) * scale, d)}  # fmt: skip
    out = {"pattern": "closed", "concurrency": concurrency, "num_prompts": bench_prompts(concurrency),
           "mean_ttft_ms": band("mean_ttft_ms"), "median_ttft_ms": band("median_ttft_ms"), "p99_ttft_ms": band("p99_ttft_ms"),
           "mean_tpot_ms": band("mean_tpot_ms", d=2), "output_tok_s": band("output_tok_s", busy, 0),
           "model": "advisor.predict.closed_loop: vLLM V1's scheduler played step by step over the benchmark's closed loop "
                    "(all C prompts arrive together; prefills chunked by max_num_batched_tokens; ASSUMED no client or "
                    "API-server overhead)"}  # fmt: skip
    if lengths is not None:
        import statistics

        from advisor.predict.closed_loop import spread_range

        r = query.length_spread
        out["lengths"] = {"spread": r, "prompt_range": list(spread_range(P, r)), "output_range": list(spread_range(out_len, r, output=True)),
                          "played_mean_prompt_len": round(statistics.fmean(lengths[0]), 1),
                          "played_mean_output_len": round(statistics.fmean(lengths[1]), 1), "requests_played": len(lengths[0])}  # fmt: skip
        out["model"] = ("advisor.predict.closed_loop: vLLM V1's scheduler played request by request over the benchmark's "
                        f"closed loop with lengths spread ±{r * 100:g}% (each request's prompt and output drawn as vllm bench serve "
                        "--random-range-ratio draws them, seed 0: the waves break up; prefills chunked by "
                        "max_num_batched_tokens; ASSUMED no client or API-server overhead, KV slots at the mean lengths)")  # fmt: skip
    return out


def facts_of(version: str | None):
    """advisor.vllm_facts.VllmFacts of ``version`` (None: the default line)."""
    from advisor.vllm_facts import DEFAULT_VERSION, facts

    return facts(version or DEFAULT_VERSION)


def _operating_point(cand: Candidate, p, gpu, lay, method, k, kv_tokens, concurrency, query: LayoutQuery, suffix_gain, gains, vf,
                     k_ngram_ref, workload=None, drafter=None) -> None:  # fmt: skip
    """Fill ``cand`` with its best operating point (advisor.plan.operating_point) under the query's limits."""
    from advisor.plan import operating_point as op
    from advisor.predict.absolute import decode_step, prefill_marginal, prefill_time

    need = query.prompt_len + query.output_len
    kv_slots = max(1, kv_tokens // need)
    context = query.prompt_len + query.output_len / 2
    steps: dict[int, float] = {}

    def step_of(n: int) -> float:
        if n not in steps:
            steps[n] = decode_step(p, gpu, lay, n, context)[0]
        return steps[n]

    spec = _methods.get(method)
    ctx = _context(p, gpu, lay, vf, suffix_gain, gains, k_ngram_ref, workload, drafter)
    memo: dict[int, tuple] = {}

    def raw(n: int):
        """(gain band, P(win), notes, estimate) of the method at ``n`` running sequences per replica."""
        if n not in memo:
            est = spec.estimate(ctx, k, n, context) if method != "none" else None
            memo[n] = (est.gain, est.p_win, list(est.notes), est) if est is not None else (None, None, [], None)
        return memo[n]

    notes = list(decode_step(p, gpu, lay, 1, context)[1])
    gain_of = lambda n: raw(n)[0]  # noqa: E731
    ranges = None
    schedulable = method in vf.spec_schedule_methods and (lay.dp == 1 or vf.spec_schedule_with_dp) and vf.spec_schedule
    if method != "none":
        if raw(1)[0] is None:
            cand.eligible, cand.why_not, cand.why_kind = False, DECLINED, "declined"
            return
        notes += raw(1)[2]
        if schedulable:
            ranges = op.schedule_ranges(gain_of, k, max(load_policy().seqs_grid))
            if len(ranges) > 1:  # where the schedule drafts nothing: a plain step, in the graph mode the schedule forces
                extra = schedule_graph_cost(p, vf)

                def idle(n: int) -> Band:
                    f = step_of(n) / (step_of(n) + extra)
                    return Band(value=round(f, 4), low=round(f, 4), high=round(f, 4))

                gain_of = lambda n: raw(n)[0] if op.k_at(ranges, n) else idle(n)  # noqa: E731
                notes.append(f"{method}: K=0 where its gain is predicted <= 1 (num_speculative_tokens_per_batch_size); "
                             + (f"a step that drafts nothing is a plain step replayed PIECEWISE, not FULL (vLLM {vf.version} "
                                f"forces PIECEWISE with a schedule: {vf.sources.get('spec_schedule_piecewise', '')}), "
                                f"+{extra * 1e3:.2f} ms per step (advisor.predict.stepcost LAYER_LAUNCH_S)"
                                if extra else "a step that drafts nothing costs a plain step"))  # fmt: skip
    q_tok = spec.tokens_per_seq(k or 1, vf)
    pq = query.point_query(concurrency)
    P = query.prompt_len
    pts = op.points(pq, lay, method, k, step_of=step_of, gain_of=gain_of, prefill_token_s=prefill_marginal(p, gpu, lay, P) / P,
                    prefill_alone_s=prefill_time(p, gpu, lay, P), kv_slots=kv_slots, tokens_per_seq=q_tok, notes=notes)  # fmt: skip
    if method == "suffix":
        first_guard = None
        for pt in pts:
            guard = op.suffix_load_guard(pt.figures.running_per_replica, raw(pt.figures.running_per_replica)[1], vf, lay.dp)
            if guard and pt.feasible:
                pt.feasible, pt.why_not = False, guard
                first_guard = first_guard or guard
        if pts and not any(pt.feasible for pt in pts):
            cand.load_guard = first_guard
    if query.judged_on == "closed" and (query.max_tpot_ms or query.max_ttft_ms):
        _judge_closed(pts, query, lay, step_of, gain_of if method != "none" else (lambda n: None),
                      prefill_marginal(p, gpu, lay, P) / P, kv_slots, q_tok)  # fmt: skip
    cand.points = pts
    chosen = op.best(pts, query.objective, query.output_len) or op.nearest(pts)
    if chosen is None:
        cand.eligible, cand.why_not, cand.why_kind = False, "no operating point to predict", "no_point"
        return
    cand.figures, cand.max_num_seqs, cand.max_num_batched_tokens = chosen.figures, chosen.max_num_seqs, chosen.max_num_batched_tokens
    cand.concurrency = chosen.concurrency if not (query.concurrency_given and query.request_rate is None) else None
    n_run = chosen.figures.running_per_replica
    if method != "none" and (est := raw(n_run)[3]) is not None:  # the prediction at the running sequences
        _apply(cand, est)
    if method != "none":
        sched, cand.schedule_reason = op.spec_schedule(method, k, lambda n: raw(n)[0], chosen.max_num_seqs, lay.dp, vf)
        cand.spec_schedule = sched if schedulable else None
