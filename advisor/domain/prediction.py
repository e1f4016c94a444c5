"""What the K > R predictor says about one deployment (advisor.predict.api.predict returns it)."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, model_serializer

HostState = Literal["OFF", "ON"]
"""Host DSA work-queue state a prediction is for."""


KbarKind = Literal["measured", "own_output", "published", "published_derived", "seed", "fallback"]
"""Where the traffic's K̄ (suffix decoding's, and n-gram's own) came from: one kind per source of
:data:`KBAR_SOURCE_ORDER`. Typed, for logic; the ``k_bar_source`` beside it is the prose for people."""

KBAR_SOURCE_ORDER: tuple[KbarKind, ...] = ("measured", "own_output", "published", "published_derived", "seed", "fallback")
"""The one ordered list of K̄ sources (issue 42): the first that has a K̄ for the traffic and model is taken, the same
on every host (advisor.predict.calibrated.CalibratedModel.kbar_choice walks it).

1. ``measured``: measured on the user's traffic (``advisor kbar`` replaying a trace file; a probe);
2. ``own_output``: the own-output prior of the corpus (calibration/kbar_own_priors.csv: real-weight outputs replayed;
   instruct models);
3. ``published``: a published acceptance figure of the corpus (calibration/kbar_published.csv; instruct models);
4. ``published_derived``: suffix decoding's K̄ DERIVED from a published n-gram figure of the corpus x the suffix/n-gram
   ratio of the corpora where both are known (kbar_prior.suffix_from_ngram);
5. ``seed``: the K̄ the seed sweep's gains imply for the corpus and family group (calibration/kbar_priors.csv);
6. ``fallback``: the seed-implied K̄ over the single corpora of the family group, for traffic no source covers
   (a named corpus: with the known corpora's spread as its band)."""

AcceptanceKind = Literal["probe", "published", "same_target", "prior"]
"""Where a drafter's K̄ came from (EAGLE / EAGLE-3 / draft model: advisor.methods._drafted.acceptance): the user's probe,
its own published acceptance, another head's for the same target, or the class prior (ASSUMED)."""

KbarSourceKind = KbarKind | AcceptanceKind
"""The kind of any prediction's ``k_bar_source``: the traffic's (suffix, n-gram's own K̄) or a drafter's acceptance."""


INTERVAL_Z = 1.6449
"""z of the 90 % central interval of a predicted log gain (gain_low, gain_high; the n-gram band's run-to-run part)."""

class Band(BaseModel):
    """A figure with its interval."""

    model_config = ConfigDict(extra="forbid")

    value: float
    low: float
    high: float


class Decomposition(BaseModel):
    """gain = k_bar / r x fitted_factor (to rounding): what the mechanism says and what is fitted."""

    model_config = ConfigDict(extra="forbid")

    k_bar: float
    """Tokens emitted per verification step (measured or prior)."""
    r: float
    """Verification step / plain step from the step-cost model and the host profile (geometric mean
    over the profiles used when the host is not known)."""
    fitted_factor: float
    """exp(δ): the fitted terms (only on the host class they were fitted on; 1 elsewhere)."""
    sources: dict[str, str]
    """Where each of the three numbers comes from."""


class Prediction(BaseModel):
    """What suffix decoding (K) is predicted to do against plain decoding for one deployment."""

    model_config = ConfigDict(extra="forbid")

    gain: float
    """Predicted suffix throughput / vanilla throughput (median)."""
    gain_low: float
    """Lower end of the 90 % interval."""
    gain_high: float
    """Upper end of the 90 % interval."""
    p_win: float = Field(ge=0, le=1)
    """Probability that suffix beats vanilla."""
    k_bar: float
    """Tokens emitted per verification step used (measured or prior)."""
    k_bar_source: str
    """``measured (…)`` or which prior row."""
    k_bar_kind: KbarSourceKind | None = None
    """The kind of ``k_bar_source`` (typed, for logic): for suffix decoding the source of :data:`KBAR_SOURCE_ORDER`
    it came from; for n-gram with its own K̄ that K̄'s; for a drafter method its :data:`AcceptanceKind`. None: plain
    decoding, MTP (one published acceptance constant, advisor.predict.absolute.MTP_ACCEPT) and n-gram priced as an
    ASSUMED share of suffix decoding's K̄."""
    k_bar_published_source_id: str | None = None
    """The publication (calibration/kbar_published.csv ``source``) of a ``published`` or ``published_derived`` K̄;
    None otherwise."""
    k_bar_sigma: float = Field(default=0.0, ge=0)
    """σ of ln K̄ its source carries in the interval (0: measured or a seed prior); a method priced as a share of
    this K̄ (n-gram without its own) inherits it."""
    k_bar_host: float | None = None
    """The K̄ the host's fit prices suffix at: on the seed host the one its gains imply (the ``seed_host_kbar``
    term's), elsewhere ``k_bar``. A method priced as a share of suffix's extra tokens (n-gram without its own K̄)
    takes this one, so it moves with what the host measured, not with a prior the host contradicts."""
    r: float
    """Step-cost ratio: verification step / plain decode step, from the physics model."""
    host_state: HostState | None
    """Host state predicted for; None = unknown (both states averaged, interval widened)."""
    draft_tokens: float
    """Mean drafted tokens per sequence per step assumed for R."""
    context_tokens: float
    """Mean KV context per sequence assumed for R."""
    spec_graph_mode: str
    """CUDA-graph mode vLLM runs the verification step in (piecewise / none)."""
    mla_prefill_ms: float
    """Milliseconds of the verification step spent on MLA's prefill-path fallback (0 if none)."""
    calibration_shift: float
    """Multiplicative correction the calibrated model applies to K̄ / R (exp δ)."""
    model_seen: bool
    """The model was measured in the calibration data (its own effect is used)."""
    decomposition: Decomposition
    """gain = k_bar / r x fitted_factor, with sources."""
    host_profile: str
    """Host cost profile(s) used (calibration/host_profiles.csv ids, comma-separated when the host is unknown)."""
    host_match: str
    """How the host was matched to a profile: exact, gpu+vllm, gpu, none (unknown host) or given."""
    r_profiles: dict[str, float] = Field(default_factory=dict)
    """R under every known host profile (the spread an unverified host carries)."""
    host_spread: float = 0.0
    """Half the log-gain range over the known host profiles, added to the interval unless the host
    matched a profile exactly (or one was given)."""
    explanation: list[str]
    """Which mechanisms drive R, where K̄ came from, and what is left to calibration."""


class Measured(BaseModel):
    """What probes on this host measured for exactly the recommended deployment (pooled campaigns)."""

    model_config = ConfigDict(extra="forbid")

    gain: float
    """Suffix throughput / vanilla throughput (geometric mean over the campaigns)."""
    k_bar: float | None = None
    """Mean tokens per step the probes saw (None: not recorded)."""
    runs: int
    campaigns: list[str]


class MeasuredNear(BaseModel):
    """A probe campaign of this model, traffic and K that differs in something else (not used to decide)."""

    model_config = ConfigDict(extra="forbid")

    campaign: str
    gain: float
    k_bar: float | None = None
    fitted: bool
    """Whether the calibrated fit uses it (a run on a GPU with real weights)."""
    differs: list[str]
    """What differs from the recommended deployment, in words."""


class StepCorrectionApplied(BaseModel):
    """A measured step correction the launched configuration's decode step carries (advisor.predict.step_correction):
    only where ``advisor verify`` measured the host profile and the model's class."""

    model_config = ConfigDict(extra="forbid")

    factor: float = Field(gt=0)
    host_profile: str
    arch_class: str
    dtype: str
    tp: str
    campaigns: str
    note: str


Objective = Literal["throughput", "latency"]
"""What the layout search optimises (--objective): host output tok/s, or the shortest request (TTFT + output x TPOT)."""


class SparseView(BaseModel):
    """A view whose :attr:`CONDITIONAL` keys are in its dump only where its builder set them (a set None included):
    the JSON keeps a key that applies to some candidates only absent, not null, from the others."""

    model_config = ConfigDict(extra="forbid")

    CONDITIONAL: ClassVar[tuple[str, ...]] = ()
    """The fields dumped only when set."""

    def present(self) -> dict[str, Any]:
        """The fields the dump carries, as their values (not dumped): every field but an unset conditional one."""
        return {name: getattr(self, name) for name in type(self).model_fields
                if name not in self.CONDITIONAL or name in self.model_fields_set}  # fmt: skip

    @model_serializer(mode="wrap")
    def _conditional_keys_only_when_set(self, handler):
        data = handler(self)
        for name in self.CONDITIONAL:
            if name not in self.model_fields_set:
                data.pop(name, None)
        return data


class LayoutFigures(SparseView):
    """One candidate's predicted figures on the whole host (advisor.plan.layout_wiring.layout_figures): a candidate's
    ``prediction`` in ``--json``, and the launched one's merged into ``Recommendation.prediction``. ``gpus_used`` is
    present only where an operating point was searched, the loaded model's keys (``offered_concurrency`` …
    ``ttft_slot_wait_ms``) only where the figures are the loaded model's (advisor.predict.serving.LoadedFigures)."""

    CONDITIONAL: ClassVar[tuple[str, ...]] = ("gpus_used", "offered_concurrency", "request_rate", "ttft_unloaded_ms",
                                              "ttft_prefill_wait_ms", "ttft_slot_wait_ms")  # fmt: skip

    throughput_tok_s: Band
    """Output tokens per second over every replica."""
    tpot_ms: Band
    """Time per output token one user sees (ms)."""
    ttft_ms: Band | None
    """Time to first token under the load (ms); None where the queue grows without bound (``ttft_unbounded``)."""
    ttft_unbounded: str | None
    """Why ``ttft_ms`` is None (an offered rate above capacity); None when TTFT is a figure."""
    busy_replicas: float | None
    """Replicas' worth of the host that has requests at this load (None: every replica)."""
    step_ms: Band
    """One plain decode step of a replica at its running sequences (ms)."""
    prefill_ms: Band
    """Prefill of one prompt on one replica (ms)."""
    speculative_gain: Band | None
    """Speculative tokens-per-time gain over plain decoding (None: plain decoding)."""
    running_per_replica: int
    """Sequences a replica runs at once."""
    waiting_per_replica: float | None
    """Requests per replica waiting for a slot (None: a queue growing without bound)."""
    layout: str
    """The candidate's layout in words (TP x DP, + EP)."""
    method: str
    """The candidate's speculative method id (``none``: plain decoding)."""
    objective: Objective
    """What the search optimised (--objective)."""
    prompt_len: int
    """Prompt tokens per request the figures are for."""
    output_len: int
    """Output tokens per request the figures are for."""
    figure_notes: list[str]
    """Labelled terms (ASSUMED / MEASURED / FITTED) behind the figures."""
    tok_s_per_gpu: float
    """Output tokens per second per GPU the candidate uses (throughput_tok_s / TP x DP, one decimal)."""
    tok_s_per_user: float
    """Output tokens per second one user sees (1000 / TPOT ms, one decimal)."""
    max_num_seqs: int | None
    """The candidate's max_num_seqs (None: vLLM's default)."""
    max_num_batched_tokens: int | None
    """The candidate's max_num_batched_tokens (None: vLLM's default)."""
    spec_schedule: list[list[int]] | None
    """num_speculative_tokens_per_batch_size ([[lo, hi, K], …]); None: a fixed K."""
    schedule_reason: str | None
    """Why the K follows (or cannot follow) the batch size (None: nothing to say)."""
    judged_on: Literal["closed", "poisson"] | None
    """The arrival pattern --max-tpot-ms / --max-ttft-ms were judged on (None: no limit given)."""
    gpus_used: int | None = None
    """GPUs the candidate uses (TP x DP); only where an operating point was searched."""
    offered_concurrency: int | None = None
    """Requests in flight over the host the figures are at (None: not known); loaded figures only."""
    request_rate: float | None = None
    """Requests per second over the host the figures are at; loaded figures only."""
    ttft_unloaded_ms: float | None = None
    """Lower bound of TTFT: one prompt prefilled alone and one decode step (ms); loaded figures only."""
    ttft_prefill_wait_ms: float | None = None
    """TTFT's wait for the prefill budget (ms); loaded figures only."""
    ttft_slot_wait_ms: float | None = None
    """TTFT's wait for a free slot (ms; None: no steady state); loaded figures only."""


LAYOUT_FIGURES = (*LayoutFigures.model_fields, "closed_loop")
"""The layout search's figures of the chosen candidate (:class:`LayoutFigures`, and the closed loop's); present in
``--json`` only once the search has run."""


class RecommendedPrediction(Prediction):
    """``Recommendation.prediction``: what the launched configuration is predicted to do (method,
    layout and K of the decision): gain over plain decoding with its interval, K̄ and R, the
    absolute figures, and what probes on this host measured. For suffix decoding the K > R
    predictor's fields; for MTP and n-gram their gain, K̄ and R (``p_win`` None: no probability is
    modelled for them); for plain decoding gain, K̄ and R are 1. The other methods are candidates
    (``Recommendation.candidates``) with their own figures."""

    p_win: float | None = Field(default=None, ge=0, le=1)
    """P(suffix wins) from the K > R predictor (suffix decoding only)."""
    spec_graph_mode: str | None = None
    mla_prefill_ms: float | None = None
    calibration_shift: float | None = None
    model_seen: bool | None = None
    host_profile: str | None = None
    """The host cost profile(s) of the suffix prediction (None for MTP, n-gram and plain decoding)."""
    host_match: str | None = None

    measured: Measured | None = None
    """Probes on this host for this exact deployment (model, traffic, K, GPU, TP, concurrency, no overrides)."""
    measured_near: list[MeasuredNear] = Field(default_factory=list)
    """Probes of this model, traffic and K that differ in something else."""
    throughput_tok_s: Band | None = None
    """Output tokens per second over every replica."""
    tpot_ms: Band | None = None
    ttft_ms: Band | None = None
    """Time to first token under the load; None where the queue grows without bound (``ttft_unbounded``)."""
    ttft_unbounded: str | None = None
    """Why ``ttft_ms`` is None (an offered rate above capacity); None when TTFT is a figure."""
    busy_replicas: float | None = None
    """Replicas' worth of the host that has requests at this load (host tok/s counts only those)."""
    judged_on: str | None = None
    """The arrival pattern --max-tpot-ms / --max-ttft-ms were judged on: ``closed`` (the emitted benchmark's closed
    loop, simulated: ``closed_loop``) or ``poisson`` (the operating-point model's figures above)."""
    closed_loop: dict | None = None
    """What the emitted closed-loop benchmark (``vllm bench serve --max-concurrency C``, fixed lengths, or spread
    with --length-spread: then ``lengths`` says how) is predicted to report: mean / median / p99 TTFT, mean TPOT,
    output tok/s, each with its band (advisor.predict.closed_loop); None for an open loop (--request-rate) or a
    multi-node replica."""
    step_ms: Band | None = None
    prefill_ms: Band | None = None
    speculative_gain: Band | None = None
    running_per_replica: int | None = None
    waiting_per_replica: float | None = None
    layout: str | None = None
    method: str | None = None
    objective: str | None = None
    prompt_len: int | None = None
    output_len: int | None = None
    figure_notes: list[str] | None = None
    tok_s_per_gpu: float | None = None
    """Output tokens per second per GPU the chosen configuration uses (throughput_tok_s / TP x DP)."""
    tok_s_per_user: float | None = None
    """Output tokens per second one user sees (1000 / TPOT ms)."""
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    offered_concurrency: int | None = None
    """Requests in flight over the host the figures are at (the user's --concurrency, or the chosen load)."""
    request_rate: float | None = None
    """Requests per second over the host the figures are at (--request-rate), or the closed loop's rate."""
    ttft_unloaded_ms: float | None = None
    """Lower bound of TTFT: one prompt prefilled alone and one decode step (ttft_ms is under the load)."""
    ttft_prefill_wait_ms: float | None = None
    ttft_slot_wait_ms: float | None = None
    gpus_used: int | None = None
    spec_schedule: list[list[int]] | None = None
    schedule_reason: str | None = None
    step_correction: StepCorrectionApplied | None = None
    """The measured step correction the decode step carries (None, and absent from ``--json``: the physics alone)."""

    @model_serializer(mode="wrap")
    def _figures_once_searched(self, handler):
        data = handler(self)
        for name in LAYOUT_FIGURES:
            if name not in self.model_fields_set:
                data.pop(name, None)
        if self.step_correction is None:
            data.pop("step_correction", None)
        return data
