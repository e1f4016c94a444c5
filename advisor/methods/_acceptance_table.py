"""Published per-position acceptance of drafters (calibration/drafter_acceptance.csv, rebuilt from
calibration/published/eagle_draft_results.csv by advisor calibrate rebuild drafter_acceptance)."""

from __future__ import annotations

import csv
import functools

from pydantic import BaseModel, ConfigDict, Field

from advisor.paths import data_path

FILE = "drafter_acceptance.csv"


class AcceptanceRow(BaseModel):
    """One drafter's published acceptance per draft position on one dataset."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    drafter: str
    """HF id of the head or draft model."""
    target: str
    """HF id of the model it drafted for in that run."""
    method: str
    """eagle3, eagle or draft_model."""
    dataset: str
    """The dataset the source measured on (e.g. MT-bench)."""
    dataset_class: str
    """chat, code or math (advisor.methods._drafted.CORPUS_CLASS maps corpora onto these)."""
    rates: tuple[float, ...] = Field(min_length=1)
    """Unconditional acceptance rate of draft position 1, 2, … (vLLM's per-position metric)."""
    source: str
    """source_id of the published rows (calibration/published/eagle_draft_results.csv)."""


@functools.cache
def rows() -> tuple[AcceptanceRow, ...]:
    path = data_path("calibration") / FILE
    if not path.is_file():
        return ()
    out = []
    with path.open(newline="") as f:
        for r in csv.DictReader(f):
            rates = tuple(float(x) for x in r["rates"].split(";") if x.strip())
            out.append(AcceptanceRow(drafter=r["drafter"], target=r["target"], method=r["method"], dataset=r["dataset"],
                                     dataset_class=r["dataset_class"], rates=rates, source=r["source_id"]))  # fmt: skip
    return tuple(out)


def lookup(drafter_id: str, dataset_class: str | None) -> AcceptanceRow | None:
    """The drafter's row on ``dataset_class`` (the most positions first), or its median dataset when the class is
    unknown or unpublished; None when the drafter has no published acceptance."""
    return _pick([r for r in rows() if r.drafter.lower() == drafter_id.lower()], dataset_class)


def lookup_same_target(target_id: str, method: str, dataset_class: str | None) -> AcceptanceRow | None:
    """Another drafter's row of the same method for the same target (a different head or checkpoint): the nearest
    published evidence when the drafter itself has none."""
    return _pick([r for r in rows() if r.target.lower() == target_id.lower() and r.method == method], dataset_class)


def _pick(mine: list[AcceptanceRow], dataset_class: str | None) -> AcceptanceRow | None:
    if not mine:
        return None
    same = [r for r in mine if r.dataset_class == dataset_class]
    if same:
        return max(same, key=lambda r: (len(r.rates), sum(r.rates)))
    ranked = sorted(mine, key=lambda r: sum(r.rates[:3]))
    return ranked[len(ranked) // 2] if ranked else None


@functools.cache
def drafter_costs() -> tuple[dict, ...]:
    """calibration/drafter_costs.csv (advisor calibrate rebuild drafter_costs): per host profile, the host seconds of one drafter
    forward, fixed and per sequence."""
    path = data_path("calibration") / "drafter_costs.csv"
    if not path.is_file():
        return ()
    with path.open(newline="") as f:
        return tuple({"host_profile": r["host_profile"], "fixed": float(r["forward_fixed_s"]),
                      "per_seq": float(r["forward_per_seq_s"]), "source": r["source"]} for r in csv.DictReader(f))  # fmt: skip
