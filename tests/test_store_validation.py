"""The probe store validates on write, skips (and names) bad rows on read, and reads without a write
lock; the calibrated-fit cache is checked against its content hash."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

import pytest

from advisor.errors import DataError
from advisor.probe.record import ProbeRecord
from advisor.probe.store import ProbeStore

MODEL = "meta-llama/Llama-3.1-8B-Instruct"


def rec(config="vanilla", **kw) -> ProbeRecord:
    base = dict(campaign_id="c1", model=MODEL, config=config, outcome="ok", corpus="sharegpt", concurrency=32,
                started_at="2026-11-29T10:00:00Z", throughput_tok_s=4000.0)  # fmt: skip
    return ProbeRecord(**(base | kw))


@pytest.mark.parametrize("field, value", [("throughput_tok_s", 1e300), ("throughput_tok_s", -5.0),
                                          ("tokens_per_step", -1.0), ("tokens_per_step", float("nan")),
                                          ("mean_acceptance_length", 0.5)])
def test_absurd_values_are_refused_on_write(tmp_path, field, value):
    with pytest.raises(ValueError):
        rec(**{field: value})
    with ProbeStore(tmp_path / "s.sqlite") as store:
        with pytest.raises(DataError, match=field):
            store.insert(rec().model_copy(update={field: value}))  # model_copy skips validation
        assert store.list_records() == []


def _corrupt(path: Path, row_json: str) -> None:
    conn = sqlite3.connect(path)
    conn.execute("INSERT INTO probes (campaign_id, model, config, outcome, corpus, concurrency, started_at, record_json)"
                 " VALUES ('c1', ?, 'bad', 'ok', 'sharegpt', 32, 'now', ?)", (MODEL, row_json))  # fmt: skip
    conn.commit()
    conn.close()


def test_a_bad_row_is_skipped_and_named(tmp_path):
    path = tmp_path / "s.sqlite"
    with ProbeStore(path) as store:
        store.insert(rec())
    _corrupt(path, json.dumps(rec("suffix:32").model_dump() | {"throughput_tok_s": 1e300}))
    _corrupt(path, "{not json")
    with ProbeStore(path) as store:
        assert [r.config for r in store.list_records()] == ["vanilla"]
        assert len(store.skipped) == 2 and "row 2" in store.skipped[0] and "throughput_tok_s" in store.skipped[0]
        assert "row 3" in store.skipped[1]


def test_recommend_and_calibrate_survive_a_bad_row(run_cli, tmp_path):
    data = tmp_path / "data"
    with ProbeStore(data / "probes.sqlite") as store:
        store.insert(rec())
    _corrupt(data / "probes.sqlite", json.dumps({"campaign_id": "c1"}))
    code, out, err = run_cli("--data-dir", str(data), "recommend", MODEL, "--gpu", "H100", "--gpus", "1", "--json")
    assert code == 0, err
    assert any("row 2 skipped" in w for w in json.loads(out)["warnings"])
    code, _, err = run_cli("--data-dir", str(data), "calibrate")
    assert code == 0 and "row 2 skipped" in err


def test_reads_do_not_wait_for_a_writer(run_cli, tmp_path):
    data = tmp_path / "data"
    with ProbeStore(data / "probes.sqlite") as store:
        store.insert(rec())
    writer = sqlite3.connect(data / "probes.sqlite", isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")  # another process mid-campaign holds the write lock
    try:
        t0 = time.monotonic()
        code, _, err = run_cli("--data-dir", str(data), "recommend", MODEL, "--gpu", "H100", "--gpus", "1", "--json")
        assert code == 0, err
        assert time.monotonic() - t0 < 10  # was 30 s: opening took BEGIN IMMEDIATE
    finally:
        writer.execute("ROLLBACK")
        writer.close()


def test_tampered_fit_cache_is_refitted(tmp_path):
    from advisor.predict import api

    api._CACHE.clear()
    first = api.calibrated_model(cache_dir=tmp_path)
    (path,) = tmp_path.glob("calibrated-*.json")
    doc = json.loads(path.read_text())
    body = json.loads(doc["model"])
    body["intercept"] = -3.0  # would turn suffix off everywhere
    doc["model"] = json.dumps(body)
    path.write_text(json.dumps(doc))
    api._CACHE.clear()
    again = api.calibrated_model(cache_dir=tmp_path)
    assert again.intercept == pytest.approx(first.intercept) and again.intercept != -3.0
    api._CACHE.clear()
    assert api._read_cache(path) is not None  # rewritten with a matching hash
