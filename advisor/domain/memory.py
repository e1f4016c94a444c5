"""Predicted start-up memory of one vLLM replica (advisor.plan.memory.plan_memory computes it)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from advisor.domain.decision import Decision


class PlanSummary(BaseModel):
    """The headline numbers of a plan (what an alternative is judged by)."""

    model_config = ConfigDict(extra="forbid")

    boots: bool
    """Whether the engine is predicted to start."""
    kv_cache_tokens: int
    """Tokens the KV cache holds (num_gpu_blocks x block_size)."""
    num_gpu_blocks: int
    """KV blocks per GPU."""
    max_concurrency_at_max_len: float
    """How many requests of max_model_len tokens fit at once."""


class Alternative(BaseModel):
    """The nearest configuration that boots, when the asked one does not."""

    model_config = ConfigDict(extra="forbid")

    decision: Decision
    """The changed decision (everything else as asked)."""
    field: str
    """The Decision field the change touches (``gpu_memory_utilization``, ``num_speculative_tokens`` …)."""
    plan_summary: PlanSummary
    """Its predicted outcome."""
    change: str
    """What changed, e.g. ``num_speculative_tokens 32 -> 16``."""
    reason: str
    """Why this change, in words."""


class MemoryVerdict(BaseModel):
    """Predicted start-up memory of one vLLM replica, per GPU: what a Recommendation carries as
    ``memory`` (a :class:`MemoryPlan` without its alternative)."""

    model_config = ConfigDict(extra="forbid")

    boots: bool
    """Whether the engine is predicted to start (weights fit, at least one block, one full-length request fits)."""
    kv_cache_tokens: int
    """Tokens of KV cache (num_gpu_blocks x block_size); 0 when it does not boot."""
    num_gpu_blocks: int
    """KV blocks per GPU, as vLLM would log it (0 when the budget is exhausted)."""
    max_concurrency_at_max_len: float
    """Requests of max_model_len tokens the cache holds at once."""
    dominant_term: str
    """The term (key of terms_gib) that eats the most memory."""
    terms_gib: dict[str, float]
    """Per GPU, GiB: budget (gmu x total) = weights + activation_peak + spec_decode_extra +
    cudagraph + non_torch + kv_cache - deficit; spec_decode_fitted is the fitted part of spec_decode_extra."""
    reason: str
    """The verdict in words."""
    fits_weights: bool
    """False: the weights alone do not fit in the budget on these GPUs."""
    min_gpus_for_weights: int | None
    """Smallest TP at which this model boots without speculation at this gmu and max_model_len
    (None: not within the largest of the policy table's tp_ladder, 64)."""
    inputs: dict[str, int] = Field(default_factory=dict)
    """Resolved settings the arithmetic used: max_num_batched_tokens, max_num_seqs, block_size,
    tensor_parallel_size, cudagraph graphs, block bytes."""
    notes: list[str] = Field(default_factory=list)
    """Assumptions and warnings (e.g. a TP size vLLM would reject for this head count)."""


class MemoryPlan(MemoryVerdict):
    """A :class:`MemoryVerdict` with the nearest configuration that boots when this one does not."""

    alternative: Alternative | None = None
    """Nearest configuration that boots, when this one does not."""

    def verdict(self) -> MemoryVerdict:
        """The plan without its alternative: what a Recommendation carries as ``memory``."""
        return MemoryVerdict.model_validate(self.model_dump(exclude={"alternative"}))

    def summary(self) -> PlanSummary:
        """The headline numbers."""
        return PlanSummary(
            boots=self.boots,
            kv_cache_tokens=self.kv_cache_tokens,
            num_gpu_blocks=self.num_gpu_blocks,
            max_concurrency_at_max_len=self.max_concurrency_at_max_len,
        )
