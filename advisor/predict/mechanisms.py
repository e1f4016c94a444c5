"""What vLLM does with a suffix-decoding verification step, read from its source.

Each function here encodes one code path of vLLM V1 (read at vllm-project/vllm main, 2026) that
changes what a speculative step costs compared with a plain decode step. The step-cost model
(``stepcost.py``) only charges a mechanism through these functions, so every charge has a source
line. Versions differ: these are the paths of current main; older releases (e.g. CUTLASS_MLA
without ``query_len_support``) only route *more* verification work to the slow paths.
"""

from __future__ import annotations

from typing import Literal

from advisor.vllm_facts import facts as _vllm

QueryLenSupport = Literal["single_only", "uniform", "varlen"]
GraphMode = Literal["full", "piecewise", "none"]

DEFAULT_MAX_NUM_SEQS = _vllm().batch_tiers[-1].max_num_seqs
"""vLLM's smallest default ``max_num_seqs`` for the OpenAI server (get_batch_defaults' last tier,
advisor.vllm_facts; larger GPUs default higher). At K >= 1 every tier gives the same capture cap."""

_GPU_ARCH = {"B200": "sm100", "H200": "sm90", "H100": "sm90", "A100": "sm80", "L40S": "sm89", "MI300X": "rocm"}
"""Compute family of the GPUs in catalog/gpus.yaml (B200 = sm_100, H100/H200 = sm_90 …)."""


def gpu_arch(gpu_name: str) -> str:
    """``sm100``, ``sm90``, ``sm89``, ``sm80``, ``rocm`` or ``unknown`` for a catalog GPU name."""
    return _GPU_ARCH.get(gpu_name.upper(), "unknown")


def mla_backend(gpu_name: str) -> tuple[str, QueryLenSupport]:
    """The MLA attention backend vLLM picks by default and how its decode path takes multi-token queries.

    Source: vllm/platforms/cuda.py:_get_backend_priorities — on compute capability 10.x the MLA
    priority list is [FLASHINFER_MLA, CUTLASS_MLA, FLASH_ATTN_MLA, FLASHMLA, TRITON_MLA]; on other
    CUDA GPUs [FLASH_ATTN_MLA, FLASHMLA, FLASHINFER_MLA, TRITON_MLA].
    - vllm/v1/attention/backends/mla/flashinfer_mla.py:FlashInferMLAMetadataBuilder
      ``query_len_support = QueryLenSupport.UNIFORM``.
    - vllm/v1/attention/backends/mla/cutlass_mla.py:CutlassMLAMetadataBuilder sets none, so it
      inherits ``SINGLE_ONLY`` (mla_attention.py:MLACommonMetadataBuilder.query_len_support).
    - vllm/v1/attention/backends/mla/flashattn_mla.py:FlashAttnMLAMetadataBuilder
      ``query_len_support = QueryLenSupport.VARLEN`` (FA3: Hopper only, fa_utils.flash_attn_supports_mla).
    - vllm/v1/attention/backends/mla/triton_mla.py: no override → ``SINGLE_ONLY`` (A100, L40S).
    - ROCm AITER MLA (rocm_aiter_mla.py) is UNIFORM_SINGLE_TOKEN_DECODE for graphs; treated as uniform.
    """
    arch = gpu_arch(gpu_name)
    if arch == "sm100":
        return "FLASHINFER_MLA", "uniform"
    if arch == "sm90":
        return "FLASH_ATTN_MLA", "varlen"
    if arch == "rocm":
        return "ROCM_AITER_MLA", "uniform"
    return "TRITON_MLA", "single_only"


def mla_prefill_fraction(support: QueryLenSupport, draft_share: float) -> float:
    """Share of sequences a verification step sends down MLA's *prefill* (compute-friendly) path.

    Source: vllm/model_executor/layers/attention/mla_attention.py:MLACommonMetadataBuilder.build
    calls ``split_decodes_and_prefills(..., require_uniform=(query_len_support != VARLEN))``, and
    vllm/v1/attention/backends/utils.py:split_decodes_and_prefills, when ``require_uniform``, marks
    every request whose query length differs from the first one's as a prefill
    (``is_prefill = query_lens != query_lens[0]``). Suffix decoding drafts a different number of
    tokens for each request (0 when the tree has no match), so with a UNIFORM backend every request
    that drafted (≈ ``draft_share``) goes to the prefill path; with SINGLE_ONLY every request with
    query length > 1 does. That path re-expands the whole cached context through ``kv_b_proj``
    (the "Chunked Prefill" section of mla_attention.py's module docstring: ``cache_k_nope_chunk =
    cache_kv_c_chunk @ W_UK`` and ``cache_v_chunk = cache_kv_c_chunk @ W_UV`` per chunk), i.e. a
    cost proportional to context length × heads instead of the latent-only decode read.
    """
    if support == "varlen":
        return 0.0
    return max(0.0, min(1.0, draft_share))


def attention_graph_support(gpu_name: str, attention: str) -> str:
    """CUDA-graph support class (vllm/v1/attention/backend.py:AttentionCGSupport) of the default backend.

    docs/design/cuda_graphs.md table and the builders' ``_cudagraph_support``: FlashAttention v3
    ALWAYS (Hopper), FlashInfer UNIFORM_BATCH on Blackwell with TRTLLM attention, FlashInfer-MLA and
    FlashMLA UNIFORM_BATCH, FlashAttn-MLA UNIFORM_BATCH, Triton attention ALWAYS, Triton MLA and
    AITER MLA UNIFORM_SINGLE_TOKEN_DECODE.
    """
    arch = gpu_arch(gpu_name)
    if attention == "mla":
        return "uniform_single_token_decode" if arch in ("rocm", "sm80", "sm89", "unknown") else "uniform_batch"
    if arch == "sm90":
        return "always"
    return "uniform_batch" if arch == "sm100" else "always"


def spec_step_graph_mode(
    tokens_in_step: float, graph_support: str, *, k: int, max_num_seqs: int = DEFAULT_MAX_NUM_SEQS, sm100: bool = False
) -> GraphMode:
    """How a suffix verification step runs under the default ``FULL_AND_PIECEWISE`` mode.

    - vllm/v1/worker/gpu_model_runner.py:GPUModelRunner.execute_model (``_determine_batch_execution_and_padding``
      in newer code): ``uniform_decode = (max_query_len == uniform_decode_query_len) and
      (num_scheduled_tokens == num_reqs * max_query_len)`` with ``uniform_decode_query_len = 1 + K``.
      Suffix drafts are of varying length, so verification batches are not uniform and the
      dispatcher (vllm/v1/cudagraph_dispatcher.py:CudagraphDispatcher.dispatch) picks a PIECEWISE
      graph: attention runs eagerly, layer by layer.
    - vllm/config/compilation.py:CompilationConfig.resolve_cudagraph_mode_and_sizes: with spec decode
      and a backend below UNIFORM_BATCH, FULL_AND_PIECEWISE is downgraded to PIECEWISE for the whole
      run (plain decode steps too).
    - vllm/config/vllm.py:VllmConfig._set_cudagraph_sizes: ``max_cudagraph_capture_size =
      min(max_num_seqs * (1 + K) * 2, cap)`` (advisor.vllm_facts graph_cap_for: ``sm100`` for compute capability 10.x); a batch with more tokens than that gets no graph
      (the dispatcher returns CUDAGraphMode.NONE) and runs fully eager.
    """
    qlen = 1 + k
    # vllm/config/compilation.py CompilationConfig.adjust_cudagraph_sizes_for_spec_decode (0.26.0 and
    # 0.32.0, model runner V1, FULL decode mode): every capture size is rounded up to a multiple of
    # 1 + K and those above the cap dropped, so the largest graph is the last multiple of 1 + K under
    # it (measured: K=32 captures 33, 66, ..., 495 on an H200, calibration/gpu_steps/.../boots.jsonl).
    cap = min(max_num_seqs * qlen * 2, _vllm().graph_cap_for(sm100)) // qlen * qlen
    if tokens_in_step > cap:
        return "none"
    del graph_support  # non-uniform batches are piecewise whatever the backend supports
    return "piecewise"


def plain_step_graph_mode(graph_support: str, *, spec_enabled: bool) -> GraphMode:
    """Graph mode of a plain decode step (query length 1 for every sequence).

    Without speculation the decode batch is uniform and FULL_AND_PIECEWISE replays a FULL graph.
    With speculation enabled and a backend below UNIFORM_BATCH, resolve_cudagraph_mode_and_sizes
    (vllm/config/compilation.py) has already downgraded the run to PIECEWISE.
    """
    if spec_enabled and graph_support == "uniform_single_token_decode":
        return "piecewise"
    return "full"
