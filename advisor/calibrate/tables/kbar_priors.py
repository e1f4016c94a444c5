"""calibration/kbar_priors.csv: per corpus and family group, the K̄ the seed sweep implies through the step-cost model
(K̄ = gain × R, solved per row by advisor.predict.kbar_prior.implied_kbar; geometric mean over rows; both host
states), then per group over single corpora (``*``) and over everything (``*``/``*``)."""

from __future__ import annotations

from pathlib import Path

OUTPUTS = ("kbar_priors.csv",)
INPUTS = "calibration/sweep_b200.csv (the seed sweep, every replicate row), the step-cost model's R"
SOURCE = "seed sweep calibration/sweep_b200.csv: K̄ = gain × R(stepcost) per row, both host states"


def build(cal: Path) -> dict[str, str]:
    """{file name: text} of the table advisor.predict.kbar_prior reads."""
    from advisor.predict.dataset import seed_observations
    from advisor.predict.kbar_prior import KbarPrior, derive, implied_kbar_rows

    priors = derive(implied_kbar_rows(seed_observations()), SOURCE)
    from advisor.calibrate.tables import csv_text

    return {OUTPUTS[0]: csv_text([p.model_dump() for p in priors], list(KbarPrior.model_fields))}
