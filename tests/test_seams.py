"""The real predictor and memory planner fit the typed seams recommend() is given (advisor.plan.seams)."""

from __future__ import annotations

import inspect

from advisor.cli.wiring import StorePredictor
from advisor.plan.planner import planner
from advisor.plan.seams import MemoryPlanner, Predictor


def _positional(fn) -> list[str]:
    return [p.name for p in inspect.signature(fn).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.name != "self"]  # fmt: skip


def test_the_planner_takes_what_the_seam_passes():
    assert len(_positional(planner)) == len(_positional(MemoryPlanner.__call__)) == 4


def test_the_store_predictor_takes_what_the_seam_passes():
    assert len(_positional(StorePredictor.__call__)) == len(_positional(Predictor.__call__)) == 5


def test_recommend_receives_the_seams():
    from typing import get_type_hints

    from advisor.plan.recommend import recommend

    hints = get_type_hints(recommend)
    assert hints["predictor"] == Predictor | None and hints["planner"] == MemoryPlanner | None
