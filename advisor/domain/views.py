"""The layout search's typed views in a Recommendation (advisor.plan.layout_wiring builds them): every searched
candidate (``Recommendation.candidates``) and the operating-point frontier (``Recommendation.pareto``). Their dumps
are what ``advisor recommend --json`` prints under those keys, key for key."""

from __future__ import annotations

from typing import ClassVar, Literal

from advisor.domain.prediction import LayoutFigures, SparseView

WhyKind = Literal["boot", "span", "pp", "declined", "rule", "measured", "load", "loses", "forced", "sla", "no_point"]
"""Why a candidate is not launched: does not boot; DP replicas span nodes; a speculative method with PP; the
predictor declined; the rules forbid or require a method; a probe on this host decided elsewhere; suffix above the
load it was measured at; predicted to lose to plain decoding at its layout; the user forced another method;
a limit (--max-tpot-ms, --max-ttft-ms, --request-rate) is missed; no operating point to predict."""


class CandidateView(SparseView):
    """One searched candidate (layout x speculative method x K x operating point), as launched: ``prediction`` and
    ``why_lost`` are present only where the candidate has figures (``why_lost`` not for the chosen one)."""

    CONDITIONAL: ClassVar[tuple[str, ...]] = ("prediction", "why_lost")

    label: str
    """The candidate in words (layout, method, K, operating point)."""
    tensor_parallel_size: int
    """TP as launched (per node for a replica that spans nodes)."""
    pipeline_parallel_size: int
    """PP as launched (the nodes a replica spans; 1 on one node)."""
    data_parallel_size: int
    """DP replicas."""
    enable_expert_parallel: bool
    """Whether experts are spread over the replicas (EP)."""
    speculative_method: str | None
    """The speculative method id (None: plain decoding)."""
    num_speculative_tokens: int | None
    """K (None: plain decoding)."""
    max_num_seqs: int | None
    """max_num_seqs (None: vLLM's default)."""
    max_num_batched_tokens: int | None
    """max_num_batched_tokens (None: vLLM's default)."""
    concurrency: int | None
    """Requests in flight offered to the host at the chosen operating point (None: the user's, or an open loop)."""
    kv_cache_dtype: Literal["auto", "fp8"]
    """KV cache dtype."""
    spec_schedule: list[list[int]] | None
    """num_speculative_tokens_per_batch_size ([[lo, hi, K], …]); None: a fixed K."""
    schedule_reason: str | None
    """Why the K follows (or cannot follow) the batch size (None: nothing to say)."""
    boots: bool
    """Whether the memory plan says it boots."""
    kv_cache_tokens: int
    """KV cache tokens the memory plan leaves (0: does not boot)."""
    eligible: bool
    """Whether it may be launched (boots, the rules and the limits leave it in)."""
    why_not: str | None
    """Why it may not be launched, in words (None: eligible)."""
    why_kind: WhyKind | None
    """The kind of ``why_not`` (typed, for logic)."""
    p_win: float | None
    """P(suffix wins) of a suffix candidate (None: other methods)."""
    chosen: bool
    """Whether this is the launched candidate."""
    k_bar: float | None
    """Tokens per verification step the method's gain uses (None: plain decoding)."""
    r: float | None
    """Verification step / plain step (None: plain decoding)."""
    measured_gain: float | None
    """The gain probes on this host measured for it (None: not probed)."""
    k_bar_source: str | None
    """Where ``k_bar`` came from, in words."""
    speculative_model: str | None
    """The drafter (EAGLE / EAGLE-3 head, draft model; None: no drafter)."""
    prediction: LayoutFigures | None = None
    """Its predicted figures; present only where it has figures."""
    why_lost: str | None = None
    """How it compares with the launched one; present only for a candidate with figures that is not launched."""


class ParetoPoint(SparseView):
    """One point of the operating-point frontier (advisor.plan.operating_point.pareto), or the launched candidate
    appended off the frontier (``off_frontier``, without ``kv_cache_dtype``)."""

    CONDITIONAL: ClassVar[tuple[str, ...]] = ("kv_cache_dtype", "off_frontier")

    label: str
    """The point in words."""
    tok_s_per_gpu: float
    """Output tokens per second per GPU."""
    tok_s_per_user: float
    """Output tokens per second one user sees."""
    tpot_ms: float
    """Time per output token (ms)."""
    ttft_ms: float | None
    """Time to first token under the load (ms; None: the queue grows without bound)."""
    max_num_seqs: int | None
    """max_num_seqs."""
    max_num_batched_tokens: int | None
    """max_num_batched_tokens."""
    concurrency: int | None
    """Requests in flight offered to the host (closed loop); None for an open loop."""
    tensor_parallel_size: int
    """TP of one replica."""
    data_parallel_size: int
    """DP replicas."""
    method: str
    """The speculative method id (``none``: plain decoding)."""
    k: int | None
    """K (None: plain decoding)."""
    kv_cache_dtype: Literal["auto", "fp8"] | None = None
    """KV cache dtype; present on frontier points only."""
    feasible: bool
    """Whether the point meets the limits."""
    why_not: str | None
    """Which limit it misses, in words (None: feasible)."""
    chosen: bool
    """Whether this is the launched configuration."""
    off_frontier: bool = False
    """The launched configuration is not on the frontier (appended); present on that point only."""
