"""How well the step model is measured, per GPU and architecture class (pure; a small shipped table).

``calibration/class_accuracy.csv`` is rebuilt from the shipped real-vLLM step grids by
``advisor calibrate rebuild class_accuracy`` (the lab: advisor.calibrate.gpu_steps.evaluate); nothing here is
typed in. Two things read it at run time:

- the printed plain-step band note (advisor.report.text.band_note): the median and largest |ln(pred/meas)| of
  the plain decode step for this class on this GPU, or "not measured" where the grid has no such row;
- the speculative prediction (advisor.plan.predictor): a class whose verification-step cost R is biased
  beyond the policy's ``class_bias_goal`` out of sample (held out by model) has its gain interval widened by
  that bias on the side it points to, and a class whose R was never checked out of sample, or is biased,
  has P(win) capped at ``p_win_cap_unchecked`` (rules/policy/decider.yaml).
"""

from __future__ import annotations

import csv
import math
from functools import lru_cache
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from advisor.errors import DataError
from advisor.model.schema import ModelProfile

ArchClass = Literal["dense", "gqa-moe", "mla-moe"]
TABLE = "class_accuracy.csv"
COLUMNS = ("gpu", "arch_class", "models", "plain_points", "plain_median_abs_log", "plain_max_abs_log", "r_points",
           "r_models", "r_bias_lomo", "source")  # fmt: skip


def arch_class(p: ModelProfile) -> ArchClass:
    """dense, gqa-moe (MoE with grouped-query or multi-head attention) or mla-moe (MoE with MLA)."""
    if p.arch != "moe":
        return "dense"
    return "mla-moe" if p.attention == "mla" else "gqa-moe"


class ClassAccuracy(BaseModel):
    """One GPU x architecture class of the shipped grids."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    gpu: str
    arch_class: ArchClass
    models: str
    """The measured models of this class on this GPU, ';'-separated."""
    plain_points: int = Field(ge=0)
    """Plain decode steps measured (model x concurrency)."""
    plain_median_abs_log: float | None = Field(default=None, ge=0)
    """Median |ln(predicted / measured)| of the plain step (None: no plain point)."""
    plain_max_abs_log: float | None = Field(default=None, ge=0)
    """Largest |ln(predicted / measured)| of the plain step."""
    r_points: int = Field(ge=0)
    """Verification steps with a plain step to divide by (R points) scored held out by model."""
    r_models: int = Field(ge=0)
    """Models behind ``r_points``: each was held out from the fit that scored it."""
    r_bias_lomo: float | None = None
    """Median ln(R predicted / R measured), each model held out of the fit (None: R never checked here)."""
    source: str
    """The grid files the row was computed from."""


@lru_cache(maxsize=1)
def rows() -> tuple[ClassAccuracy, ...]:
    """calibration/class_accuracy.csv."""
    from advisor.paths import data_path

    path = data_path("calibration") / TABLE
    try:
        with path.open(newline="") as fh:
            return tuple(ClassAccuracy(**{k: (v if v != "" else None) for k, v in row.items()}) for row in csv.DictReader(fh))
    except OSError as exc:
        raise DataError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except (TypeError, ValueError) as exc:
        raise DataError(f"{path}: invalid row: {exc}") from None


def lookup(gpu: str, cls: str) -> ClassAccuracy | None:
    return next((r for r in rows() if r.gpu.upper() == gpu.upper() and r.arch_class == cls), None)


def r_check(cls: str) -> ClassAccuracy | None:
    """The row that checked this class's R out of sample (the GPU with the most R points), or None."""
    checked = [r for r in rows() if r.arch_class == cls and r.r_bias_lomo is not None and r.r_points]
    return max(checked, key=lambda r: r.r_points, default=None)


def plain_note(gpu: str, cls: str) -> str:
    """The plain step's measured accuracy for this GPU and class, in words (computed from the table)."""
    r = lookup(gpu, cls)
    if r is None or r.plain_median_abs_log is None:
        measured = sorted({f"{x.gpu} {x.arch_class}" for x in rows() if x.plain_points})
        return f"plain step not measured for {cls} on {gpu} (measured: {', '.join(measured) or 'none'})"
    med, top = math.expm1(r.plain_median_abs_log) * 100, math.expm1(r.plain_max_abs_log or 0.0) * 100
    n = len(r.models.split(";"))
    return (f"plain step MEASURED for {cls} on {gpu} TP 1: median {med:.0f}%, largest {top:.0f}% off over {r.plain_points} "
            f"points of {n} model(s) (calibration/{TABLE})")


def table_text(table: list[ClassAccuracy]) -> str:
    """The CSV text of ``table`` (what the rebuild script writes)."""
    import io

    out = io.StringIO()
    w = csv.DictWriter(out, fieldnames=COLUMNS, lineterminator="\n")
    w.writeheader()
    for r in table:
        w.writerow({k: ("" if v is None else v) for k, v in r.model_dump().items()})
    return out.getvalue()
