"""What ``advisor recommend`` returns (advisor.plan.recommend.recommend assembles it)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from advisor.domain.decision import Decision
from advisor.domain.host import HostContext
from advisor.domain.memory import MemoryVerdict
from advisor.domain.prediction import RecommendedPrediction
from advisor.domain.probe_plan import ProbePlan
from advisor.domain.views import CandidateView, ParetoPoint
from advisor.domain.workload import Workload


class Recommendation(BaseModel):
    """What ``advisor recommend --json`` prints. Top-level names are a stable contract."""

    model_config = ConfigDict(extra="forbid")

    model: dict
    """The ``advisor inspect --json`` object."""
    host: HostContext
    workload: Workload
    decision: Decision
    rules_fired: list[dict]
    """[{id, rationale, severity, source, set}] in the order applied."""
    warnings: list[str]
    prediction: RecommendedPrediction | None = None
    """What the launched method is predicted to do at the decision's layout and K: {method, gain,
    gain_low, gain_high, p_win (suffix only), k_bar, r, …}, ``measured`` ({gain, k_bar, runs, campaigns} or None): what probes on this host found for
    this exact deployment (model, traffic, K, GPU, TP, concurrency, no overrides), and
    ``measured_near`` ([{campaign, gain, k_bar, fitted, differs}]): probes of this model, traffic and
    K that differ in something else (not used to decide); after the layout search also the chosen
    candidate's figures (advisor.domain.prediction.LAYOUT_FIGURES)."""
    memory: MemoryVerdict | None = None
    """Boot feasibility of the chosen decision (kv_cache_tokens, boots, …; advisor.plan.memory)."""
    trace: list[str] = Field(default_factory=list)
    """How the speculation choice was reached, step by step."""
    host_dsa_queues: str | None = None
    """Host DSA work-queue state the evidence was measured at: enabled / disabled / either."""
    probe_plan: ProbePlan | None = None
    """When the prediction is unsure: the ``advisor probe`` campaign that settles it (advisor.plan.probe_plan)."""
    sla_met: bool | None = None
    """None: no --max-tpot-ms / --max-ttft-ms given; False: no configuration meets them (the best
    one that boots is recommended and the first warning says by how much it misses)."""
    limits_missed: str | None = None
    """Which limit the launched configuration misses and by how much (None: met, or none given); the first warning
    says the same with "SLA not met: " before it."""
    servers: int = Field(default=1, ge=1)
    """--request-rate beyond one host: identical servers (each the ``decision``, behind a load balancer) that
    together serve the rate; the prediction's figures are one server's, at its share of the rate."""
    candidates: list[CandidateView] = Field(default_factory=list)
    """Layout search (issue 15, advisor.plan.layout_wiring.candidate_view): every searched layout x speculative
    method, best first, with predicted figures and why each lost."""
    pareto: list[ParetoPoint] = Field(default_factory=list)
    """The operating-point search's frontier (advisor.plan.operating_point.pareto): tok/s per user against
    tok/s per GPU over every searched point, best per user first, the chosen one marked; empty without
    --max-tpot-ms / --max-ttft-ms / --request-rate."""
