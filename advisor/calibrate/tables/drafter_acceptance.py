"""Rebuild calibration/drafter_acceptance.csv from the frozen published rows
(calibration/published/eagle_draft_results.csv): one row per (source, drafter, dataset) with the drafter's
unconditional acceptance per draft position, as advisor.methods._acceptance_table reads it.

Two kinds of published figure give per-position rates, and nothing else is used:
- ``acceptance_rate_pos1..N`` rows of one run (vLLM's accepted-at-position / drafts): taken as they are;
- ``acceptance_length`` at every K = 1..N for one drafter and dataset: rate_i = AL(K=i) - AL(K=i-1) with AL(0) = 1
  (the chain's position i is drafted only when K >= i; ASSUMED independent of K, as a chain drafter's position i is).
No value is chosen, fitted or filtered by any prediction error.

    advisor calibrate rebuild drafter_acceptance [--check]
"""

from __future__ import annotations

import csv
from collections import defaultdict
from pathlib import Path

OUTPUTS = ("drafter_acceptance.csv",)
INPUTS = "calibration/published/eagle_draft_results.csv (frozen at 2a55cf5)"
FIELDS = ["drafter", "target", "method", "dataset", "dataset_class", "rates", "derived_from", "source_id", "url"]


def dataset_class(name: str) -> str:
    """chat / code / math for a published dataset name (advisor.methods._drafted.CORPUS_CLASS's classes)."""
    n = name.lower()
    if any(x in n for x in ("humaneval", "mbpp", "code", "swe")):
        return "code"
    if any(x in n for x in ("gsm8k", "math", "gpqa", "aime")):
        return "math"
    return "chat"


def rows(cal: Path) -> list[dict]:
    rows = list(csv.DictReader((cal / "published" / "eagle_draft_results.csv").open(newline="")))
    out: list[dict] = []
    pos: dict[tuple, dict[int, float]] = defaultdict(dict)
    meta: dict[tuple, dict] = {}
    for r in rows:
        if r["engine"] != "vllm" or r["stat"] != "value":
            continue
        if r["metric"].startswith("acceptance_rate_pos"):
            key = (r["source_id"], r["drafter"], r["dataset"], r["target_model"], r["quote"])
            pos[key][int(r["metric"].removeprefix("acceptance_rate_pos"))] = float(r["value"])
            meta[key] = r
    seen = set()
    for key, by_pos in pos.items():
        r = meta[key]
        rates = [by_pos[i] for i in sorted(by_pos)]
        ident = (r["drafter"], r["dataset"], tuple(rates))
        if ident in seen or sorted(by_pos) != list(range(1, len(by_pos) + 1)):
            continue
        seen.add(ident)
        out.append({"drafter": r["drafter"], "target": r["target_model"], "method": r["method"], "dataset": r["dataset"],
                    "dataset_class": dataset_class(r["dataset"]), "rates": ";".join(f"{x:.4f}" for x in rates),
                    "derived_from": "acceptance_rate_pos", "source_id": r["source_id"], "url": r["url"]})
    curves: dict[tuple, dict[int, float]] = defaultdict(dict)
    cmeta: dict[tuple, dict] = {}
    for r in rows:
        if r["engine"] == "vllm" and r["metric"] == "acceptance_length" and r["stat"] == "value" and r["k"].isdigit():
            key = (r["source_id"], r["drafter"], r["dataset"], r["target_model"])
            curves[key][int(r["k"])] = float(r["value"])
            cmeta[key] = r
    for key, by_k in curves.items():
        ks = sorted(by_k)
        if ks[0] != 1 or ks != list(range(1, ks[-1] + 1)) or len(ks) < 2:
            continue  # needs K = 1, 2, … without gaps
        r = cmeta[key]
        prev, rates = 1.0, []
        for k in ks:
            rates.append(max(0.0, by_k[k] - prev))
            prev = by_k[k]
        out.append({"drafter": r["drafter"], "target": r["target_model"], "method": r["method"], "dataset": r["dataset"],
                    "dataset_class": dataset_class(r["dataset"]), "rates": ";".join(f"{x:.4f}" for x in rates),
                    "derived_from": "acceptance_length at K=1..N", "source_id": r["source_id"], "url": r["url"]})
    return sorted(out, key=lambda x: (x["drafter"], x["dataset"], x["source_id"]))


def build(cal: Path) -> dict[str, str]:
    """{file name: text} of the table advisor.methods._acceptance_table reads."""
    from advisor.calibrate.tables import csv_text

    return {OUTPUTS[0]: csv_text(rows(cal), FIELDS)}
