"""Step-cost model: what one engine step costs on one GPU of a tensor-parallel group, and R.

R is the cost of a suffix verification step relative to a plain decode step at the same
concurrency. A step costs a roofline, ``max(bytes / bandwidth, flops / peak)``, plus what the
roofline does not see: tensor-parallel all-reduces, a fixed per-step host cost, per-layer launch
cost that depends on the CUDA-graph mode vLLM runs the step in, and (suffix only) drafting on
the CPU and MLA's prefill-path fallback. Every vLLM behaviour charged here comes from
``mechanisms.py``, which names the source line.

Pure functions of (ModelProfile, GpuSpec, tensor-parallel size, step shape). Units: bytes,
FLOPs, seconds.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

from advisor.hardware.gpus import GpuSpec
from advisor.model.schema import ModelProfile
from advisor.predict import host_profile as _hp
from advisor.predict import mechanisms as mech
from advisor.predict import moe_kernel as _moe_kernel
from advisor.predict.step_correction import dtype_key as _dtype_key

# Measured on an H200 (scripts/measure_layer_cost.py → calibration/layer_cost/h200_ctx2048.json,
# fitted by scripts/compare_layer_cost.py: the four GEMMs of one TP-8 layer share of Llama-3.1-8B,
# Qwen2.5-32B and Llama-3.1-70B at 32 sequences × 1…33 tokens, CUDA-graph replay; rms log error
# 0.04, against 0.59 for the assumed 0.80 / 0.60 / no floor it replaced).
WEIGHT_MEM_EFFICIENCY = 1.00
"""Share of peak HBM bandwidth a GEMM streaming its weights reaches, once its fixed latency is paid."""
FLOP_EFFICIENCY = 0.64
"""Share of dense tensor-core peak a GEMM with hundreds to a thousand rows reaches."""
GEMM_FLOOR_S = 8e-6
"""Fixed latency of one GEMM kernel (prologue, tail, wave quantisation), paid by plain and
verification steps alike: four per dense layer (QKV, O, gate/up, down) and one for the LM head."""
FP8_FLOP_EFFICIENCY = 0.56
"""Share of FP8 tensor-core peak an FP8 GEMM reaches (torch._scaled_mm, per-tensor scales: the four
GEMMs of a Llama-3.1-405B TP-8 layer share at 160–1056 rows, calibration/layer_cost/h200_moe_fp8.json)."""
# MoE blocks: timed with torch._grouped_mm on DeepSeek-V3, Qwen3-30B-A3B and Mixtral TP-8 expert
# shares (calibration/layer_cost/h200_moe_fp8.json), which fit 0.66 of peak bandwidth + 48 µs per
# block + 0.3 µs per touched expert. That is not the kernel vLLM runs (fused_moe's Triton kernel;
# block-FP8 for DeepSeek-R1), so those figures are not used; the measurement does confirm
# experts_touched() (152 of 256 DeepSeek-V3 experts touched by 32 tokens, formula 163). Expert
# weights therefore stream at the dense WEIGHT_MEM_EFFICIENCY, with no per-expert cost.
MOE_BLOCK_GEMMS = 3
"""GEMM kernels of one MoE block at the dense floor: router, grouped gate/up, grouped down (assumed)."""
# Assumptions (not measured; the calibrated model absorbs their error).
KV_MEM_EFFICIENCY = 0.80
"""Share of peak HBM bandwidth vLLM's decode attention kernels reach reading the KV cache
(torch's SDPA, which the script times, is not vLLM's kernel, so this stays assumed)."""
ATTN_PROJ_GEMMS = {"mla": 5}
"""GEMM kernels of the attention projections per layer: 2 (fused QKV, O) unless listed. MLA decode:
fused_qkv_a_proj, q_b_proj, the W_UK_T and W_UV batched GEMMs around the latent attention kernel
(vllm/v1/attention/backends/mla/common.py, "data-movement friendly" decode path), o_proj."""
STEP_FIXED_S = 0.8e-3
"""Host cost of one engine step (scheduling, input preparation, sampling, output processing)."""
LAYER_LAUNCH_S = {"full": 1e-6, "piecewise": 10e-6, "none": 60e-6}
"""Per-layer launch cost by graph mode: a replayed FULL graph, PIECEWISE (attention and its
metadata eager between captured pieces), NONE (every kernel launched from Python).
PIECEWISE: a PyTorch proxy of the structure (two captured pieces per layer, eager SDPA between)
costs 4.8–6.0 µs per layer over one full graph on an H200 host (scripts/measure_graph_modes.py →
calibration/layer_cost/h200_graph_modes*.json), a lower bound, since vLLM's attention custom op
also builds metadata in Python; vLLM PR #16072 reports FULL graphs cutting median TPOT 7 % against
PIECEWISE for Qwen2.5-1.5B (28 layers), about 10 µs per layer at a few-ms TPOT. NONE: the proxy
measured 45–81 µs per layer when the step is launch-bound (Llama-8B share), 60 µs is kept."""
MOE_LAYER_LAUNCH_FACTOR = 1.5
"""An MoE layer launches more kernels (router, top-k, permute, grouped GEMMs, shared expert)."""
ALLREDUCE_LATENCY_S = 10e-6
"""Latency of one small NVLink all-reduce (vLLM custom all-reduce); two per layer."""
DRAFT_CPU_S_PER_SEQ_ASSUMED = 20e-6
"""The per-sequence drafting cost assumed before real vLLM was measured (kept for the before/after
figure of ``calibrate --evaluate``'s GPU-step section; not used to predict)."""
# Measured on real vLLM 0.26.0, one H200, Llama-3.1-8B-Instruct, dummy weights, prefill removed
# (calibration/gpu_steps/h200-vllm0.26.0/, fitted by advisor/calibrate/gpu_steps.fit_spec_constants;
# a test refits them from the shipped grid). What the roofline misses in a suffix verification step.
# Mechanism: suffix decoding drafts on the CPU from the sampled tokens (vllm/v1/spec_decode/
# suffix_decoding.py SuffixDecodingProposer.propose: a Python loop over the batch calling Arctic's
# SuffixDecodingCache.add_active_response and .speculate per request), so every step waits for the
# GPU->CPU copy of the sampled ids and the drafting before the next step is scheduled
# (gpu_model_runner.py propose_draft_token_ids, ``method == "suffix"`` branch), and the rejection
# sampler (vllm/v1/sample/rejection_sampler.py) runs over every drafted position.
SPEC_STEP_FIXED_S, SPEC_STEP_PER_SEQ_S = _hp.spec_costs("release", "suffix")
"""MEASURED (fitted to the H200 offline-engine grid, calibration/host_profiles.csv row ``h200-vllm0.26.0``, aliases ``release`` and ``offline-grid``; the serving fit is the reference row ``serving-dummy``): per-step
and per-sequence cost of a suffix-decoding step over a plain one on that host (serialised drafting,
rejection sampler launch, draft bookkeeping; suffix-tree update and lookup per request)."""
Build = str
"""A host profile id or alias (advisor.predict.host_profile): whose speculative-step costs apply."""
LOGIT_BYTES = 4
"""fp32 logits, written by the LM head and read by the (rejection) sampler."""
MLA_DEFAULT_DIMS = {"qk_nope": 128, "qk_rope": 64, "v_head": 128}
"""DeepSeek-V2/V3 MLA head dims, used only for a profile without ``mla`` (built before it existed)."""


def mla_dims(p: ModelProfile) -> dict[str, float]:
    """qk_nope / qk_rope / v_head widths of the profile's MLA (config.json), else the DeepSeek-V3 defaults."""
    if p.mla is None:
        return dict(MLA_DEFAULT_DIMS)
    return {"qk_nope": p.mla.qk_nope_head_dim, "qk_rope": p.mla.qk_rope_head_dim, "v_head": p.mla.v_head_dim}


class StepShape(BaseModel):
    """One engine step: how many sequences, how many tokens each, at what context."""

    model_config = ConfigDict(extra="forbid")

    seqs: int = Field(ge=1)
    """Sequences in the step (the server's concurrency in steady decode)."""
    tokens_per_seq: float = Field(ge=1)
    """Query tokens per sequence: 1 for plain decode, 1 + drafted tokens for verification."""
    context: float = Field(ge=0)
    """Mean tokens already in each sequence's KV cache."""
    spec: bool = False
    """Speculative decoding is on (verification step, or a plain step in a speculative run)."""
    draft_share: float = Field(default=0.0, ge=0, le=1)
    """Share of sequences that drafted at least one token this step."""
    k: int | None = Field(default=None, ge=1)
    """num_speculative_tokens the engine was booted with (sets vLLM's CUDA-graph capture sizes); read only by a
    verification step (``spec`` with more than one token per sequence), which needs it; None: a plain step."""
    build: Build = "release"
    """Which host profile's speculative-step costs apply (calibration/host_profiles.csv)."""
    method: _hp.Method = "suffix"
    """The CPU proposer (suffix decoding or n-gram): each has its own step cost in the profile."""

    @model_validator(mode="after")
    def _k_for_verification(self) -> "StepShape":
        if self.spec and self.tokens_per_seq > 1 and self.k is None:
            raise ValueError("a verification step (spec, tokens_per_seq > 1) needs k, the K the engine was booted with")
        return self


class StepCost(BaseModel):
    """Cost of one step on one GPU, with its parts (seconds)."""

    model_config = ConfigDict(extra="forbid")

    tokens: float
    """Tokens in the step over all sequences."""
    weight_bytes: float
    kv_bytes: float
    other_bytes: float
    """Logits and MLA prefill-path intermediates."""
    flops: float
    t_memory: float
    t_compute: float
    t_roofline: float
    t_allreduce: float
    t_launch: float
    t_fixed: float
    t_draft: float
    """Per-sequence speculative-step cost (the host profile's, x sequences; 0 without speculation)."""
    t_spec_fixed: float
    """Per-step speculative-step cost (the host profile's; 0 without speculation)."""
    t_mla_prefill: float
    """Part of the roofline caused by MLA's prefill-path fallback (included in t_roofline)."""
    t_moe_kernel: float = 0.0
    """The routed experts of every MoE layer at the fused-MoE kernel's measured cost (advisor.predict.moe_kernel;
    included in t_roofline, outside the max of t_memory and t_compute); 0 where no measured row applies."""
    moe_kernel_gpu: str | None = None
    """The GPU of the measured fused-MoE row used (None: the routed experts stream inside the dense roofline)."""
    t_host_floor: float = 0.0
    """The host profile's floor of a plain step (async scheduling overlaps the host's work with the GPU's, so
    the step costs the larger of the two); 0 for a speculative step, whose host work is serialised."""
    graph_mode: str
    total: float


def experts_touched(experts: int, top_k: int, tokens: float) -> float:
    """Distinct routed experts a step reads in one MoE layer: E·(1−(1−k/E)^t), uniform routing."""
    if experts <= 0 or top_k <= 0:
        return 0.0
    return experts * (1.0 - (1.0 - top_k / experts) ** max(tokens, 0.0))


def bytes_per_param(p: ModelProfile) -> float:
    """Mean stored bytes per parameter (FP8 checkpoints ~1, BF16 2)."""
    return p.weight_bytes / max(p.params_total_b * 1e9, 1.0)


def weight_bytes_read(p: ModelProfile, tokens: float, tp: int) -> float:
    """Weight bytes one GPU reads in a step of ``tokens`` tokens (input embedding is a gather: skipped)."""
    bpp = bytes_per_param(p)
    expert_total = p.expert_params_b * 1e9 * bpp
    dense = p.weight_bytes - expert_total - p.params_embedding_b * 1e9 * bpp
    moe = 0.0
    if p.arch == "moe" and p.experts and p.moe_layers:
        per_expert = expert_total / (p.moe_layers * p.experts)
        moe = p.moe_layers * experts_touched(p.experts, p.experts_per_token, tokens) * per_expert
    return (max(dense, 0.0) + moe) / tp


def expert_bytes_flops(p: ModelProfile, tokens: float, tp: int, bytes_per_param: float) -> tuple[float, float]:
    """(routed-expert weight bytes, routed-expert FLOPs) one GPU of a TP group reads and computes in a step of
    ``tokens`` tokens: the touched experts (uniform routing) sliced over TP, at ``bytes_per_param``."""
    if not (p.arch == "moe" and p.experts and p.moe_layers):
        return 0.0, 0.0
    per_expert = p.expert_params_b * 1e9 / (p.moe_layers * p.experts)
    touched = experts_touched(p.experts, p.experts_per_token, tokens)
    return (p.moe_layers * touched * per_expert * bytes_per_param / tp,
            2.0 * tokens * p.experts_per_token * per_expert * p.moe_layers / tp)


def kv_split(p: ModelProfile, tp: int) -> int:
    """How many ways the KV cache of one token is split over the TP group (MLA's latent is replicated)."""
    if p.attention == "mla":
        return 1
    return max(1, min(tp, p.num_kv_heads))


def kv_bytes_read(p: ModelProfile, seqs: int, context: float, tp: int) -> float:
    """KV-cache bytes one GPU reads: each sequence's cache once (decode kernels serve all its query tokens)."""
    window = p.sliding_window or 0
    swa = p.kv_bytes_per_token - p.kv_bytes_per_token_full
    per_seq = p.kv_bytes_per_token_full * context + swa * (min(context, window) if window else context)
    return seqs * per_seq / kv_split(p, tp)


def mla_latent(p: ModelProfile) -> float:
    """MLA latent width per token per layer (kv_lora_rank + rope dim), from kv_bytes_per_token at 16 bit."""
    return p.kv_bytes_per_token / (2 * max(p.num_layers, 1))


def linear_flops(p: ModelProfile, tokens: float, tp: int) -> float:
    """GEMM FLOPs of the active (non-embedding) parameters."""
    return 2.0 * p.params_active_b * 1e9 * tokens / tp


def attention_flops(p: ModelProfile, tokens: float, context: float, tp: int) -> float:
    """Score and value FLOPs of the decode-path attention kernels."""
    heads = p.num_attention_heads / tp
    layers = p.num_layers - p.linear_attention_layers
    if p.attention == "mla":  # absorbed MQA: QK over latent+rope, PV over the latent
        per_pos = 2.0 * heads * (2 * mla_latent(p) - mla_dims(p)["qk_rope"])
    else:
        per_pos = 4.0 * heads * p.head_dim
    return tokens * context * per_pos * layers


def mla_prefill_path(p: ModelProfile, seqs_on_path: float, context: float, q: float, tp: int) -> tuple[float, float]:
    """(bytes, FLOPs) on one GPU when ``seqs_on_path`` sequences take MLA's prefill path.

    Per sequence and layer: read the latent context, up-project it through kv_b_proj to K_nope and V
    for this GPU's heads (2·ctx·latent·heads·(nope+v) FLOPs), write and read those (bf16), and run
    MHA for the q query tokens. Source: mechanisms.mla_prefill_fraction.
    """
    if seqs_on_path <= 0 or p.attention != "mla":
        return 0.0, 0.0
    d = mla_dims(p)
    heads = p.num_attention_heads / tp
    lat = mla_latent(p) - d["qk_rope"]
    expand_w = heads * (d["qk_nope"] + d["v_head"])
    flops = 2.0 * context * lat * expand_w + 2.0 * q * context * heads * (d["qk_nope"] + d["qk_rope"] + d["v_head"])
    nbytes = context * mla_latent(p) * 2 + 2 * context * heads * (d["qk_nope"] + d["qk_rope"] + d["v_head"]) * 2
    return seqs_on_path * nbytes * p.num_layers, seqs_on_path * flops * p.num_layers


def peak_flops(p: ModelProfile, gpu: GpuSpec) -> float:
    """FLOP/s the GEMMs reach: FP8 for FP8 checkpoints on GPUs with FP8 units, else BF16 (measured shares of peak)."""
    if p.weights_dtype == "fp8" and gpu.fp8_tflops:
        return gpu.fp8_tflops * 1e12 * FP8_FLOP_EFFICIENCY
    return gpu.bf16_tflops * 1e12 * FLOP_EFFICIENCY


def allreduce_time(p: ModelProfile, gpu: GpuSpec, tokens: float, tp: int) -> float:
    """Two ring all-reduces of the hidden states per layer (attention out, MLP out)."""
    if tp <= 1:
        return 0.0
    msg = tokens * p.hidden_size * 2
    one_way = gpu.interconnect_gbs * 1e9 / 2
    each = ALLREDUCE_LATENCY_S + 2 * (tp - 1) / tp * msg / one_way
    return 2 * p.num_layers * each


def launch_time(p: ModelProfile, mode: str) -> float:
    """Per-layer launch and host cost for a graph mode (MoE layers launch more kernels)."""
    per = LAYER_LAUNCH_S[mode]
    moe = p.moe_layers if p.arch == "moe" else 0
    return per * ((p.num_layers - moe) + MOE_LAYER_LAUNCH_FACTOR * moe)


def gemm_floor(p: ModelProfile, moe_kernel_measured: bool = False) -> float:
    """Fixed GEMM latency of one step: the attention projections and dense MLPs of every layer,
    each MoE block and its shared experts, and the LM head. ``moe_kernel_measured``: the grouped expert GEMMs' fixed
    cost is the measured fused-MoE row's (advisor.predict.moe_kernel), so only the router's floor is counted here."""
    moe = p.moe_layers if p.arch == "moe" else 0
    gemms = ATTN_PROJ_GEMMS.get(p.attention, 2) * p.num_layers + 2 * (p.num_layers - moe) + 1
    gemms += moe * ((1 if moe_kernel_measured else MOE_BLOCK_GEMMS) + (2 if p.shared_experts else 0))
    return GEMM_FLOOR_S * gemms


def step_cost(p: ModelProfile, gpu: GpuSpec, tp: int, s: StepShape) -> StepCost:
    """Cost of one step on one GPU of the TP group."""
    tokens = s.seqs * s.tokens_per_seq
    support = mech.attention_graph_support(gpu.name, p.attention)
    if s.spec and s.tokens_per_seq > 1:
        # The release build's capture cap is the targeted vLLM's (1024 on sm_100 since 0.32); the seed
        # build's is not known and stays at the 512 its rows were fitted with.
        sm100 = _hp.get(s.build).id != _hp.get("seed").id and mech.gpu_arch(gpu.name) == "sm100"
        mode = mech.spec_step_graph_mode(tokens, support, k=s.k, sm100=sm100)
    else:
        mode = mech.plain_step_graph_mode(support, spec_enabled=s.spec)
    wb = weight_bytes_read(p, tokens, tp)
    kvb = kv_bytes_read(p, s.seqs, s.context, tp)
    logits = tokens * p.vocab_size * LOGIT_BYTES * 2
    fl = linear_flops(p, tokens, tp) + attention_flops(p, tokens, s.context, tp)
    pf_bytes = pf_flops = 0.0
    if s.spec and s.tokens_per_seq > 1 and p.attention == "mla":
        _, support_q = mech.mla_backend(gpu.name)
        share = mech.mla_prefill_fraction(support_q, s.draft_share)
        pf_bytes, pf_flops = mla_prefill_path(p, s.seqs * share, s.context, s.tokens_per_seq, tp)
    bw = gpu.bandwidth_tbs * 1e12
    peak = peak_flops(p, gpu)
    attn_peak = gpu.bf16_tflops * 1e12 * FLOP_EFFICIENCY
    # Routed experts at the fused-MoE kernel's measured cost where a row matches this GPU and dtype: out of the
    # dense roofline, added to it (the kernel streams the experts after the attention and dense GEMMs).
    kernel = _moe_kernel.lookup(gpu.name, _dtype_key(p.weights_dtype)) if p.arch == "moe" else None
    t_moe = 0.0
    if kernel is not None:
        bpp = bytes_per_param(p)
        eb, efl = expert_bytes_flops(p, tokens, tp, bpp)  # at the checkpoint's mean bytes, as weight_bytes_read counts
        fmt = _moe_kernel.FORMAT_BYTES.get(kernel.dtype, bpp)  # the kernel's own storage, as the row was fitted
        t_moe = kernel.seconds(p.moe_layers, eb * fmt / bpp, efl, bw, kernel.peak_flops(gpu))
        wb_dense, fl_dense = max(wb - eb, 0.0), max(fl - efl, 0.0)
    else:
        wb_dense, fl_dense = wb, fl
    t_mem = wb_dense / (bw * WEIGHT_MEM_EFFICIENCY) + (kvb + logits) / (bw * KV_MEM_EFFICIENCY)
    t_cmp = fl_dense / peak
    t_base = max(t_mem, t_cmp) + gemm_floor(p, kernel is not None) + t_moe
    # The prefill-path expansion is its own kernels (gather, kv_b_proj GEMM, MHA): a roofline of its own.
    t_pf = max(pf_bytes / (bw * KV_MEM_EFFICIENCY), pf_flops / attn_peak) if pf_bytes else 0.0
    t_ar = allreduce_time(p, gpu, tokens, tp)
    t_launch = launch_time(p, mode)
    host = _hp.get(s.build)
    per_step, per_seq = host.costs(s.method)
    t_draft = per_seq * s.seqs if s.spec else 0.0
    t_spec_fixed = per_step if s.spec else 0.0
    total = t_base + t_pf + t_ar + t_launch + STEP_FIXED_S + t_draft + t_spec_fixed
    floor = 0.0 if s.spec else host.plain_floor(s.seqs)
    total = max(total, floor)
    return StepCost(
        tokens=tokens, weight_bytes=wb, kv_bytes=kvb, other_bytes=logits + pf_bytes, flops=fl + pf_flops,
        t_memory=t_mem, t_compute=t_cmp, t_roofline=t_base + t_pf, t_allreduce=t_ar, t_launch=t_launch,
        t_fixed=STEP_FIXED_S, t_draft=t_draft, t_spec_fixed=t_spec_fixed, t_mla_prefill=t_pf, t_moe_kernel=t_moe,
        moe_kernel_gpu=kernel.gpu if kernel is not None else None, t_host_floor=floor, graph_mode=mode, total=total,
    )  # fmt: skip


class RBreakdown(BaseModel):
    """R and the two steps it compares."""

    model_config = ConfigDict(extra="forbid")

    r: float
    """Verification step cost / plain decode step cost."""
    plain: StepCost
    spec: StepCost
    draft_tokens: float
    """Mean drafted tokens per sequence verified in the speculative step."""


_R_CACHE: dict[tuple, RBreakdown] = {}
_PHYSICS_FIELDS = (
    "id", "arch", "attention", "num_layers", "hidden_size", "vocab_size", "num_attention_heads", "num_kv_heads",
    "head_dim", "experts", "experts_per_token", "moe_layers", "linear_attention_layers", "params_total_b",
    "params_active_b", "params_embedding_b", "expert_params_b", "weights_dtype", "weight_bytes",
    "kv_bytes_per_token", "kv_bytes_per_token_full", "sliding_window",
)  # fmt: skip


def _profile_key(p: ModelProfile) -> tuple:
    mla = tuple(p.mla.model_dump().values()) if p.mla else None
    return (*(getattr(p, f) for f in _PHYSICS_FIELDS), mla)


def r_ratio(
    p: ModelProfile, gpu: GpuSpec, tp: int, *, concurrency: int, draft_tokens: float, context: float,
    draft_share: float = 0.6, k: int | None = None, build: Build = "release", method: _hp.Method = "suffix",
) -> RBreakdown:  # fmt: skip
    """R for ``concurrency`` sequences verifying ``draft_tokens`` drafted tokens each on average (memoised) by an
    engine booted at K = ``k`` (None only where nothing is drafted: ``draft_tokens`` 0)."""
    key = (_profile_key(p), gpu.name, gpu.bandwidth_tbs, gpu.bf16_tflops, gpu.fp8_tflops, gpu.interconnect_gbs, tp,
           concurrency, round(draft_tokens, 4), round(context, 1), round(draft_share, 4), k, build, method)  # fmt: skip
    hit = _R_CACHE.get(key)
    if hit is None:
        hit = _R_CACHE[key] = _r_ratio(p, gpu, tp, concurrency, draft_tokens, context, draft_share, k, build, method)
    return hit


def _r_ratio(p: ModelProfile, gpu: GpuSpec, tp: int, concurrency: int, draft_tokens: float, context: float,
             draft_share: float, k: int | None, build: Build = "release", method: _hp.Method = "suffix") -> RBreakdown:  # fmt: skip
    plain = step_cost(p, gpu, tp, StepShape(seqs=concurrency, tokens_per_seq=1, context=context, k=k, build=build))
    spec = step_cost(
        p, gpu, tp,
        StepShape(seqs=concurrency, tokens_per_seq=1 + draft_tokens, context=context, spec=True, draft_share=draft_share, k=k,
                  build=build, method=method),
    )  # fmt: skip
    return RBreakdown(r=spec.total / plain.total, plain=plain, spec=spec, draft_tokens=draft_tokens)
