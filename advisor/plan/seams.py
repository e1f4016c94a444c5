"""The typed seams :func:`advisor.plan.recommend.recommend` is given: the predictor and the memory
planner. The real ones are :class:`advisor.cli.wiring.StorePredictor` (over
:func:`advisor.plan.predictor.predictor`) and :func:`advisor.plan.planner.planner`; tests pass fakes."""

from __future__ import annotations

from typing import Protocol

from advisor.domain.decision import Decision
from advisor.domain.host import HostContext
from advisor.domain.memory import MemoryVerdict
from advisor.domain.prediction import RecommendedPrediction
from advisor.domain.workload import Workload
from advisor.model.schema import ModelProfile


class Predictor(Protocol):
    """The K > R prediction for suffix decoding at K drafted tokens and tensor-parallel size ``tp``,
    with what probes on this host measured, or None when the predictor declines (e.g. no data)."""

    def __call__(self, profile: ModelProfile, host: HostContext, workload: Workload, k: int, tp: int, /,
                 ) -> RecommendedPrediction | None: ...  # fmt: skip


class MemoryPlanner(Protocol):
    """Boot feasibility of ``decision``: (the decision to launch: the same, or the nearest one that
    boots without changing a field in ``fixed``; its memory verdict; trace lines; warnings)."""

    def __call__(self, profile: ModelProfile, host: HostContext, decision: Decision, fixed: frozenset[str], /,
                 ) -> tuple[Decision, MemoryVerdict | None, list[str], list[str]]: ...  # fmt: skip
