"""calibration/kbar_own_*.csv (their rebuild: tests/test_tables.py): the claims calibration/KBAR_PRIORS.md makes of them hold."""

from __future__ import annotations

import csv
import statistics
from pathlib import Path


ROOT = Path(__file__).resolve().parents[1]


def test_own_outputs_predict_and_reference_responses_under_predict():
    rows = list(csv.DictReader((ROOT / "calibration" / "kbar_own_evidence.csv").open()))
    assert {r["vllm"] for r in rows} >= {"0.32.0"} and len(rows) >= 4
    # suffix up to 0.11: smol-k's boots were warmed by a discarded load whose responses (in vLLM's global suffix
    # tree, not in the replay) raised vLLM's acceptance at ShareGPT c1 (3.40 measured, 3.05 replayed); n-gram up to
    # 0.11: campaign 7's smol-m1 humaneval c16 (48 prompts) replays 1.56 on the vanilla boot's outputs where vLLM
    # measured 1.41, and 1.41 on the n-gram boot's own: the two boots' greedy outputs differ, not the replay
    for method, limit in (("suffix", 0.11), ("ngram", 0.11)):
        own = [abs(float(r["ln_own"])) for r in rows if r["method"] == method]
        ref = [float(r["ln_reference"]) for r in rows if r["method"] == method]
        assert max(own) <= limit and statistics.median(own) <= 0.03, method
        assert max(ref) < -0.1, method  # every setting: the reference replay is low by more than 10%
    priors = list(csv.DictReader((ROOT / "calibration" / "kbar_own_priors.csv").open()))
    for p in priors:
        assert float(p["k_bar_low"]) < float(p["k_bar"]) < float(p["k_bar_high"])
        assert float(p["own_over_reference_low"]) > 1.0
