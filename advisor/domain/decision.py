"""The serving decision: every vLLM setting the advisor chooses, typed and bounded."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from advisor.vllm_facts import facts as _vllm

CudagraphMode = Literal["NONE", "PIECEWISE", "FULL", "FULL_DECODE_ONLY", "FULL_AND_PIECEWISE"]
"""Values of vLLM's ``CompilationConfig.cudagraph_mode`` (vllm/config/compilation.py, CUDAGraphMode)."""

MAX_GPUS = 4096
"""The most GPUs one server spans (``--gpus`` and ProbeRecord.gpus/tensor_parallel_size share it)."""
DSA_ENV = {"VLLM_LHC_DSA": "1", "VLLM_LEVER_N9": "1", "VLLM_LHC_DSA_MIN": "65536"}
"""The write-up build's DSA env block (seed README, table 'The six configurations', column dsa_on).
Upstream vLLM does not read these; they are rendered only when a rule turns ``dsa_env`` on."""


class SuffixParams(BaseModel):
    """Suffix-decoding knobs of vLLM's SpeculativeConfig; defaults are vLLM's
    (vllm/config/speculative.py suffix_decoding_*, read from advisor.vllm_facts)."""

    model_config = ConfigDict(extra="forbid")

    max_tree_depth: int = Field(default=_vllm().suffix_max_tree_depth, ge=1)
    """Longest prompt+output suffix the tree indexes (also caps the draft)."""
    max_cached_requests: int = Field(default=_vllm().suffix_max_cached_requests, ge=0)
    """Finished requests kept in the global tree (FIFO eviction)."""
    max_spec_factor: float = Field(default=_vllm().suffix_max_spec_factor, gt=0)
    """Draft length cap as a multiple of the matched prefix length."""
    min_token_prob: float = Field(default=_vllm().suffix_min_token_prob, ge=0, le=1)
    """Minimum estimated probability of a drafted token."""


class NgramParams(BaseModel):
    """n-gram prompt-lookup window of vLLM's SpeculativeConfig (``prompt_lookup_min`` / ``_max``);
    defaults are vLLM's (both 5 when neither is given, advisor.vllm_facts ``ngram_prompt_lookup``)."""

    model_config = ConfigDict(extra="forbid")

    prompt_lookup_min: int = Field(default=_vllm().ngram_prompt_lookup, ge=1)
    """Shortest n-gram matched against the prompt and output so far."""
    prompt_lookup_max: int = Field(default=_vllm().ngram_prompt_lookup, ge=1)
    """Longest n-gram matched (tried first)."""

    @model_validator(mode="after")
    def _check_window(self) -> NgramParams:
        if self.prompt_lookup_min > self.prompt_lookup_max:
            raise ValueError(f"prompt_lookup_min={self.prompt_lookup_min} must be <= prompt_lookup_max={self.prompt_lookup_max}")
        return self


class Decision(BaseModel):
    """What to launch. Field names are part of the ``--json`` contract."""

    model_config = ConfigDict(extra="forbid")

    speculative_method: str | None = Field(default=None, pattern=r"^[a-z][a-z0-9_]{0,31}$")
    """The advisor's id of the speculative method (advisor.methods: ``suffix``, ``ngram``, ``mtp``, ``eagle3``,
    ``eagle``, ``draft_model``; each line's vLLM name comes from its facts at render), None for plain decoding.
    Checked against advisor.methods where it is rendered (this floor cannot import the registry)."""
    speculative_model: str | None = Field(default=None, min_length=1, max_length=4096)
    """The drafter (an EAGLE head or a draft model: HF id or local directory) for the methods that need one."""
    num_speculative_tokens: int | None = Field(default=None, ge=1, le=64)
    """K: the most tokens drafted per step (only with a speculative method)."""
    gpu_memory_utilization: float = Field(default=_vllm().gpu_memory_utilization, gt=0.0, le=0.99)
    """Fraction of each GPU's memory vLLM may use (weights + activations + KV cache)."""
    tensor_parallel_size: int = Field(default=1, ge=1, le=MAX_GPUS)
    """GPUs one replica is split over."""
    data_parallel_size: int = Field(default=1, ge=1, le=MAX_GPUS)
    """Replicas in one server (``--data-parallel-size``); the server uses TP x DP GPUs."""
    pipeline_parallel_size: int = Field(default=1, ge=1)
    """Pipeline stages (``--pipeline-parallel-size``): a replica larger than one node runs TP inside each node x PP
    across nodes (advisor.render.multinode); the server then uses TP x PP GPUs over ``nodes`` nodes."""
    nodes: int = Field(default=1, ge=1)
    """Nodes one server spans (PP stages, one per node; 1: a single-node server)."""
    distributed_executor_backend: Literal["ray"] | None = None
    """``--distributed-executor-backend``: ``ray`` across nodes (vLLM's multi-node backend); None: vLLM's default."""
    enable_expert_parallel: bool = False
    """MoE only: experts spread over the TP x DP GPUs whole (``--enable-expert-parallel``) instead of
    every expert split by tensor parallelism."""
    max_model_len: int = Field(default=16384, ge=16)
    """Longest prompt + output a request may have."""
    max_num_seqs: int | None = Field(default=None, ge=1)
    """Most sequences in one batch; None leaves vLLM's default."""
    max_num_batched_tokens: int | None = Field(default=None, ge=1)
    """Token budget of one engine step (chunked prefill fills what decode leaves); None leaves vLLM's default."""
    num_speculative_tokens_per_batch_size: list[tuple[int, int, int]] | None = None
    """K by batch size, ``[(lo, hi, K), …]`` with inclusive ranges from 1 and K 0 for no drafts
    (vLLM SpeculativeConfig.num_speculative_tokens_per_batch_size; advisor.vllm_facts spec_schedule)."""
    kv_cache_dtype: Literal["auto", "fp8"] = "auto"
    """``--kv-cache-dtype``: ``auto`` stores the KV cache in the model's dtype (vLLM's default), ``fp8`` in
    8 bits (vllm/config/cache.py CacheDType), half the bytes per token in memory and in decode reads."""
    cudagraph_mode: CudagraphMode = "FULL_AND_PIECEWISE"
    """CUDA graph capture mode passed through ``--compilation-config``."""
    dsa_env: bool = False
    """Whether the write-up build's DSA env (VLLM_LHC_DSA…) is set; off by default (finding 7)."""
    env: dict[str, str] = Field(default_factory=dict)
    """Environment variables for the server process."""
    suffix: SuffixParams = Field(default_factory=SuffixParams)
    """Suffix-decoding parameters (rendered only where they differ from vLLM's defaults)."""
    ngram: NgramParams = Field(default_factory=NgramParams)
    """n-gram lookup window (rendered only with ``speculative_method="ngram"`` and where it differs from vLLM's default)."""

    @model_validator(mode="after")
    def _check_spec(self) -> "Decision":
        if self.speculative_method is None and self.num_speculative_tokens is not None:
            raise ValueError(
                f"num_speculative_tokens={self.num_speculative_tokens} needs a speculative_method; "
                "set speculative_method='suffix' or drop K"
            )
        if self.speculative_method is not None and self.num_speculative_tokens is None:
            raise ValueError(f"speculative_method={self.speculative_method!r} needs num_speculative_tokens (K, 1..64)")
        if self.speculative_model is not None and self.speculative_method is None:
            raise ValueError(f"speculative_model={self.speculative_model!r} needs a speculative_method (e.g. 'eagle3'); drop it for plain decoding")
        sched = self.num_speculative_tokens_per_batch_size
        if sched is not None:
            if self.speculative_method is None:
                raise ValueError("num_speculative_tokens_per_batch_size needs a speculative_method")
            # vllm/v1/spec_decode/dynamic/utils.py validate: sorted, non-overlapping ranges from 1, K >= 0
            prev = 0
            for lo, hi, k in sched:
                if lo != prev + 1 or hi < lo or k < 0:
                    raise ValueError(f"num_speculative_tokens_per_batch_size {sched}: ranges must run 1..N without gaps, K >= 0")
                prev = hi
        if self.pipeline_parallel_size > 1 and self.data_parallel_size > 1:
            raise ValueError("pipeline_parallel_size > 1 with data_parallel_size > 1 is not rendered: one replica spans the nodes")
        if self.max_num_batched_tokens is not None and self.max_num_seqs is not None and self.max_num_batched_tokens < self.max_num_seqs:
            # vllm/config/scheduler.py:328-333 (0.32.0)
            raise ValueError(f"max_num_batched_tokens {self.max_num_batched_tokens} must be >= max_num_seqs {self.max_num_seqs}")
        return self

    @property
    def gpus(self) -> int:
        """GPUs the server uses: TP x PP x DP."""
        return self.tensor_parallel_size * self.pipeline_parallel_size * self.data_parallel_size
