"""The speculative-method interface: what every method (plain, suffix, n-gram, MTP, EAGLE-3, a draft model)
tells the planner and the renderer, and nothing else.

A method is one module under ``advisor/methods/`` holding one object that satisfies :class:`SpecMethod`;
:mod:`advisor.methods` finds the modules (``pkgutil``), so adding a method touches its module, its entry in
each vLLM line's facts (``VllmFacts.spec_methods``: the ``method`` name that line's SpeculativeConfig accepts)
and its tests. The planner (advisor.plan.layout) asks a method only through this protocol:

- :meth:`SpecMethod.ks`: the K values worth searching for this model, drafter and query;
- :meth:`SpecMethod.needs`: why it cannot run here (no MTP layers, no drafter, a drafter for another model);
- :meth:`SpecMethod.estimate`: tokens per step from its own acceptance mechanism and the step it costs
  (drafting + verification) over a plain step, at ``n`` running sequences per replica;
- :meth:`SpecMethod.tokens_per_seq`: the tokens a verification step schedules per sequence (token budget);
- :meth:`SpecMethod.speculative_config`: the ``--speculative-config`` object for one vLLM line;
- :meth:`SpecMethod.extra_memory`: weights and KV bytes per token the method adds to a replica.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from advisor.domain.prediction import Band, KbarSourceKind
from advisor.hardware.gpus import GpuSpec
from advisor.model.schema import ModelProfile
from advisor.predict.absolute import ReplicaLayout


class GainEstimate(BaseModel):
    """What a method predicts at one load: throughput gain over plain decoding and the two terms it divides."""

    model_config = ConfigDict(extra="forbid")

    gain: Band
    """Output tokens per second with the method / without it, at the same running sequences (interval: ±z)."""
    k_bar: float | None = Field(default=None, ge=1.0)
    """Mean tokens a sequence emits per verification step (accepted drafts + the bonus token)."""
    r: float | None = Field(default=None, gt=0)
    """Speculative step (drafting + verification) / plain decode step."""
    p_win: float | None = Field(default=None, ge=0, le=1)
    """P(gain > 1) where the method's predictor gives one (suffix's calibrated K > R model); None elsewhere."""
    measured_gain: float | None = None
    """What probes on this host measured for exactly this deployment (suffix), None: not measured."""
    k_bar_source: str | None = None
    """Where K̄ came from (probe, published row, class prior), printed with the candidate."""
    k_bar_kind: KbarSourceKind | None = None
    """The kind of K̄'s source (typed, for logic; advisor.domain.prediction.Prediction.k_bar_kind): a drafter's
    acceptance kind, the traffic's K̄ source for suffix and for n-gram's own K̄; None: MTP, n-gram as a share of
    suffix's."""
    k_bar_published_source_id: str | None = None
    """The publication of a ``published`` / ``published_derived`` traffic K̄ (suffix, n-gram's own)."""
    k_bar_note: str | None = None
    """The one of ``notes`` that says where K̄ came from, for a method whose K̄ is a priced note rather than a source
    (n-gram, MTP: the first note of advisor.predict.absolute.ngram_gain / mtp_gain); the launched prediction's K̄ source."""
    notes: list[str] = Field(default_factory=list)
    """Labelled terms (MEASURED / FITTED / ASSUMED, with their files) behind the figures."""


@dataclass
class MethodContext:
    """What a method's estimate may read about one candidate layout (built by advisor.plan.layout)."""

    profile: ModelProfile
    """The target model (KV fp8 already applied where searched)."""
    gpu: GpuSpec
    layout: ReplicaLayout
    vf: Any
    """advisor.vllm_facts.VllmFacts of the targeted vLLM line."""
    suffix_at: Callable[[int, int, int], Any]
    """(TP, running sequences per replica, K) -> the calibrated suffix prediction there, or None (declined);
    cached, so methods priced on suffix's host profile or K̄ (n-gram, MTP) share one prediction."""
    ngram_k_ref: int
    """The suffix K whose prediction n-gram's K̄ is a share of (the rules' K, else the decider's)."""
    workload: Any = None
    """advisor.domain.workload.Workload (corpus, traffic file) or None."""
    drafter: Any = None
    """advisor.model.drafter.Drafter the user named (--draft) or the catalog pairs with the target; None: none."""
    probes: tuple = ()
    """This user's probe records (advisor.probe.record.ProbeRecord, from the store): a drafter's measured acceptance
    on the user's traffic comes first (advisor.methods._drafted.acceptance)."""
    memo: dict = field(default_factory=dict)
    """Per-candidate cache a method may use (keyed by its own tuples)."""


@runtime_checkable
class SpecMethod(Protocol):
    """One speculative method (or plain decoding, id ``none``)."""

    id: str
    """The advisor's id (``--spec``, ``--configs``, the JSON's ``speculative_method``); lower-case."""
    title: str
    """How the trace names it (``suffix decoding``)."""
    order: int
    """Where it sits among the candidates (plain 0 first); ties in the ranking go to the lower order."""
    uses_drafter: bool
    """Whether it runs a drafter model (``speculative_model``: an EAGLE head or a draft model)."""

    def vllm_name(self, vf) -> str:
        """The ``method`` value this vLLM line's SpeculativeConfig takes for it."""

    def needs(self, profile: ModelProfile, drafter, vf) -> str | None:
        """Why it cannot be a candidate here (None: it can)."""

    def ks(self, profile: ModelProfile, drafter, *, k_fixed: int | None, k_rules: int, policy, query, vf=None) -> list[int]:
        """The K values searched, preferred first (a lower one is tried where the first does not boot)."""

    def estimate(self, ctx: MethodContext, k: int, n: int, context: float) -> GainEstimate | None:
        """The gain at ``n`` running sequences per replica and mean context ``context`` (None: declined)."""

    def tokens_per_seq(self, k: int, vf) -> float:
        """Tokens per sequence a verification step schedules at most (1 + drafted)."""

    def speculative_config(self, decision, vf) -> dict:
        """``--speculative-config`` for ``decision`` on vLLM line ``vf`` (method named as that line names it)."""

    def extra_memory(self, profile: ModelProfile, drafter) -> tuple[int, int]:
        """(weight bytes, KV bytes per token) the method adds to the target's profile (the memory planner splits
        them over TP as it splits the target's)."""


def common_config(decision, name: str) -> dict:
    """The keys every method's ``--speculative-config`` carries: method, K and a per-batch-size K schedule."""
    cfg: dict = {"method": name, "num_speculative_tokens": decision.num_speculative_tokens}
    if decision.num_speculative_tokens_per_batch_size is not None:
        cfg["num_speculative_tokens_per_batch_size"] = [list(e) for e in decision.num_speculative_tokens_per_batch_size]
    return cfg


def vllm_method_name(vf, method_id: str, default: str) -> str:
    """The name line ``vf`` gives method ``method_id`` (``VllmFacts.spec_method_names``), else ``default``."""
    names = getattr(vf, "spec_method_names", None) or {}
    return names.get(method_id, default)
