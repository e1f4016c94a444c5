"""How good a suffix-or-vanilla choice is on measured rows (pure): the evaluation and its ceilings share it."""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict

from advisor.predict.dataset import Observation


class Score(BaseModel):
    """Scores of one policy in one host state."""

    model_config = ConfigDict(extra="forbid")

    geo_frac: float
    min_frac: float
    accuracy: float
    rows: int


def score(rows: list[tuple[Observation, bool]]) -> Score:
    """Geometric-mean fraction, minimum fraction and winner accuracy of (observation, chose_suffix) pairs."""
    fracs, right = [], 0
    for o, suffix in rows:
        chosen = o.suffix_tps if suffix else o.vanilla_tps
        fracs.append(chosen / max(o.suffix_tps, o.vanilla_tps))
        right += suffix == (o.suffix_tps > o.vanilla_tps)
    n = len(fracs)
    return Score(geo_frac=round(math.exp(sum(map(math.log, fracs)) / n), 4), min_frac=round(min(fracs), 4),
                 accuracy=round(right / n, 4), rows=n)  # fmt: skip
