"""Published EAGLE / EAGLE-3 / draft-model results (calibration/published/eagle_draft_results.csv, issue 41 item 4):
the schema basics of a frozen, sourced table. Every row has its URL and the text its number was read from, a known
method and metric, a numeric value, and the figure is the text quoted (or, where a source writes a slowdown or a
percentage, the note says how it was turned into the value). The gain-row loader of advisor.calibrate.published skips
this file (its own columns)."""

from __future__ import annotations

import csv
import re
from pathlib import Path

from advisor.calibrate import published

CSV = Path(__file__).resolve().parent.parent / "calibration" / published.FOLDER / published.EAGLE_DRAFT_FILE
COLUMNS = ["source_id", "url", "quote", "engine", "engine_version", "target_model", "drafter", "method", "k", "dataset", "gpu",
           "gpus", "tp", "concurrency", "temperature", "metric", "stat", "value", "baseline_value", "notes"]  # fmt: skip
METHODS = {"eagle", "eagle3", "draft_model"}
ENGINES = {"vllm", "sglang", "tensorrt-llm"}
METRICS = {"acceptance_length", "acceptance_rate", "speedup_throughput", "speedup_tpot", "speedup_per_user_tok_s", "speedup_latency",
           "throughput_tok_s", "tpot_ms"}  # fmt: skip
POSITION = re.compile(r"acceptance_rate_pos[1-9][0-9]?")


def _rows() -> list[dict[str, str]]:
    with CSV.open(newline="") as fh:
        reader = csv.DictReader(fh)
        assert reader.fieldnames == COLUMNS
        return list(reader)


def test_every_row_is_sourced_quoted_and_well_formed():
    rows = _rows()
    assert len(rows) >= 50
    for r in rows:
        assert r["source_id"] and r["url"].startswith("https://") and r["quote"].strip(), r
        assert r["method"] in METHODS and r["engine"] in ENGINES, r
        assert r["metric"] in METRICS or POSITION.fullmatch(r["metric"]), r
        assert r["stat"] in ("value", "min", "max"), r
        value = float(r["value"])
        assert value > 0, r
        for col in ("k", "gpus", "tp", "concurrency"):
            assert r[col] == "" or int(r[col]) >= 1, (col, r)
        if r["temperature"]:
            assert float(r["temperature"]) >= 0, r
        if r["baseline_value"]:
            assert float(r["baseline_value"]) > 0, r
        if r["metric"] == "acceptance_length":
            assert 1.0 <= value <= 1 + int(r["k"] or 64), r  # tokens per step incl. the bonus token
        if r["metric"].startswith("acceptance_rate"):
            assert 0 < value <= 1, r


def test_the_figure_is_the_text_quoted():
    for r in _rows():
        v = float(r["value"])
        quoted = r["value"] in r["quote"] or f"{v * 100:g}%" in r["quote"]
        assert quoted or "1/" in r["notes"], (r["value"], r["quote"])  # a slowdown 'Nx' is recorded as 1/N and says so


def test_per_position_rates_fall_and_sum_to_the_acceptance_length():
    """Where a source gives both (vLLM's CI reference values), 1 + the per-position rates is its acceptance length."""
    rows = _rows()
    groups: dict[tuple, dict[str, float]] = {}
    for r in rows:
        key = (r["source_id"], r["target_model"], r["drafter"], r["dataset"], r["k"], r["gpu"], r["quote"] if POSITION.fullmatch(r["metric"]) else "")
        groups.setdefault(key[:6], {})[r["metric"] + "|" + key[6]] = float(r["value"])
    checked = 0
    for metrics in groups.values():
        per_quote: dict[str, dict[int, float]] = {}
        for name, v in metrics.items():
            metric, quote = name.split("|", 1)
            if POSITION.fullmatch(metric):
                per_quote.setdefault(quote, {})[int(metric.removeprefix("acceptance_rate_pos"))] = v
        for pos in per_quote.values():
            rates = [pos[i] for i in sorted(pos)]
            assert rates == sorted(rates, reverse=True), rates
            if "acceptance_length|" in metrics and len(pos) == 3:
                checked += 1
                assert abs(1 + sum(rates) - metrics["acceptance_length|"]) < 0.02, (rates, metrics)
    assert checked >= 3


def test_the_gain_loader_skips_this_file():
    rows = published.load(CSV.parent.parent)
    assert rows and all(r.method in ("suffix", "ngram", "suffix_over_ngram") for r in rows)
