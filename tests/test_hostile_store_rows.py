"""Issue 43 item 1: one bad probe-store row never stops every answer. Each row below (the audit's exact inputs) is
skipped with its reason by the store, or left out of the fit with its reason, and recommend / calibrate still answer."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest

from advisor.probe.record import ProbeRecord
from advisor.probe.store import ProbeStore

MODEL = "meta-llama/Llama-3.1-8B-Instruct"


def rec(config="vanilla", **kw) -> ProbeRecord:
    base = dict(campaign_id="c1", model=MODEL, config=config, outcome="ok", corpus="sharegpt", concurrency=32,
                started_at="2026-11-29T10:00:00Z", throughput_tok_s=4000.0, gpu="H100", gpus=1, host_fingerprint="fp")
    if config != "vanilla":
        base |= dict(started_at="2026-11-29T10:05:00Z", throughput_tok_s=6000.0, tokens_per_step=2.5)
    return ProbeRecord(**(base | kw))


def _raw(path: Path, doc: dict) -> None:
    """A row written past the store's own validation (an older advisor, an edit, a corrupted file)."""
    conn = sqlite3.connect(path)
    conn.execute("INSERT INTO probes (campaign_id, model, config, outcome, corpus, concurrency, started_at, record_json)"
                 " VALUES (?, ?, ?, 'ok', 'sharegpt', 32, 'now', ?)",
                 (doc["campaign_id"], str(doc["model"])[:100], str(doc["config"])[:100], json.dumps(doc)))  # fmt: skip
    conn.commit()
    conn.close()


SPEC = rec("suffix:32").model_dump()
HOSTILE_ROWS = {  # name: the row's record_json (the audit's inputs)
    "suffix:x": SPEC | {"config": "suffix:x"},
    "ngram:x": SPEC | {"config": "ngram:x"},
    "mtp:x": SPEC | {"config": "mtp:x"},
    "suffix:0": SPEC | {"config": "suffix:0"},
    "suffix:-5": SPEC | {"config": "suffix:-5"},
    "spec_drafts -100": SPEC | {"spec_drafts": -100, "spec_draft_tokens": 100, "mean_acceptance_length": 2.0},
    "model of 100,000 characters": SPEC | {"model": "a" * 100_000},
    "concurrency 10^12": SPEC | {"concurrency": 10**12},  # made calibrate's host profile fit exit 70
}


@pytest.mark.parametrize("name", list(HOSTILE_ROWS))
def test_store_skips_a_row_the_fit_cannot_parse(tmp_path, name):
    path = tmp_path / "s.sqlite"
    with ProbeStore(path) as store:
        store.insert(rec())
        with pytest.raises(Exception):  # refused on write too
            store.insert(rec().model_copy(update={k: v for k, v in HOSTILE_ROWS[name].items()
                                                  if k in ("config", "model", "spec_drafts", "concurrency")}))  # fmt: skip
    _raw(path, HOSTILE_ROWS[name])
    with ProbeStore(path) as store:
        assert [r.config for r in store.list_records()] == ["vanilla"]
        assert len(store.skipped) == 1 and "row 2 skipped" in store.skipped[0]
        assert len(store.skipped[0]) < 1000  # the reason, not the row echoed back


def _hostile_store(tmp_path: Path) -> Path:
    """A store with a good campaign (c1) and, each in its own campaign, every hostile row plus rows of models whose
    path is /dev/zero, a FIFO and a removed directory (valid records: the fit must leave them out, not read them)."""
    data = tmp_path / "data"
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    gone = tmp_path / "probed-model"
    gone.mkdir()
    (gone / "config.json").write_text("{}")
    with ProbeStore(data / "probes.sqlite") as store:
        store.insert(rec())
        store.insert(rec("suffix:32"))
        for i, model in enumerate(("/dev/zero", str(fifo), str(gone))):
            store.insert(rec(campaign_id=f"p{i}", model=model))
            store.insert(rec("suffix:32", campaign_id=f"p{i}", model=model))
    (gone / "config.json").unlink()
    gone.rmdir()
    for i, doc in enumerate(HOSTILE_ROWS.values()):
        _raw(data / "probes.sqlite", rec(campaign_id=f"h{i}").model_dump())
        _raw(data / "probes.sqlite", doc | {"campaign_id": f"h{i}"})
    return data


def test_recommend_and_calibrate_answer_despite_every_hostile_row(run_cli, tmp_path):
    data = _hostile_store(tmp_path)
    code, out, err = run_cli("--data-dir", str(data), "recommend", MODEL, "--gpu", "H100", "--gpus", "1", "--json")
    assert code == 0, err
    warnings = json.loads(out)["warnings"]
    assert sum("skipped" in w for w in warnings) == len(HOSTILE_ROWS)
    for what in ("/dev/zero", "fifo", "probed-model"):
        assert any(what in w and "left out of the fit" in w for w in warnings), what
    code, out, err = run_cli("--data-dir", str(data), "calibrate")
    assert code == 0, err
    assert err.count("skipped") >= len(HOSTILE_ROWS)
    for what in ("/dev/zero", "fifo", "probed-model"):
        assert what in err or what in out, what
    assert "host profile probe-fp" in out  # the good campaign still fits this host's profile


def test_a_model_path_that_is_a_device_or_fifo_is_never_read(run_cli, tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for model in ("/dev/zero", str(fifo)):
        code, _, err = run_cli("inspect", model)
        assert code == 3 and "not a directory or a regular file" in err
    d = tmp_path / "m"
    d.mkdir()
    os.mkfifo(d / "config.json")  # a model directory whose config.json is a FIFO
    code, _, err = run_cli("inspect", str(d))
    assert code == 3 and "no config.json" in err  # refused by stat, not opened (a FIFO would block)


SPEC8 = rec("suffix:8", num_speculative_tokens=8, speculative_method="suffix").model_dump()
IMPOSSIBLE_ROWS = {  # issue 43 item 6: rows no server can have measured, each with the field the reason names
    "K̄ 60 at K=8": (SPEC8 | {"tokens_per_step": 60.0}, "tokens_per_step"),
    "K̄ below 1": (SPEC8 | {"tokens_per_step": 0.5}, "tokens_per_step"),
    "acceptance length above K+1": (SPEC8 | {"mean_acceptance_length": 12.0}, "mean_acceptance_length"),
    "accepted > drafted": (SPEC8 | {"spec_drafts": 100, "spec_draft_tokens": 500, "spec_accepted_tokens": 900}, "spec_accepted_tokens"),
    "draft longer than K": (SPEC8 | {"spec_drafts": 10, "spec_draft_tokens": 500, "spec_accepted_tokens": 50}, "spec_draft_tokens"),
    "K label vs K field": (SPEC8 | {"num_speculative_tokens": 32}, "num_speculative_tokens"),
    "counter x100": (SPEC8 | {"throughput_tok_s": 35_883.0, "duration_s": 60.0, "output_tokens": 21_000, "requests": 100,
                              "max_tokens": 256}, "throughput_tok_s"),  # fmt: skip
    "more tokens than the requests asked for": (SPEC8 | {"throughput_tok_s": 35_883.0, "duration_s": 60.0,
                                                         "output_tokens": 2_152_980, "requests": 100, "max_tokens": 256},
                                                "output_tokens"),  # fmt: skip
    "acceptance per position above 1": (SPEC8 | {"acceptance_per_position": [1.5, 0.2]}, "acceptance_per_position"),
}


@pytest.mark.parametrize("name", list(IMPOSSIBLE_ROWS))
def test_impossible_rows_are_skipped_with_the_bound_they_break(tmp_path, name):
    doc, field = IMPOSSIBLE_ROWS[name]
    path = tmp_path / "s.sqlite"
    with ProbeStore(path) as store:
        store.insert(rec())
    _raw(path, doc)
    with ProbeStore(path) as store:
        assert [r.config for r in store.list_records()] == ["vanilla"]
        assert len(store.skipped) == 1 and field in store.skipped[0], store.skipped


def test_calibrate_rejects_impossible_rows(run_cli, tmp_path):
    data = tmp_path / "data"
    with ProbeStore(data / "probes.sqlite") as store:
        store.insert(rec())
        store.insert(rec("suffix:32"))
    for i, (doc, _) in enumerate(IMPOSSIBLE_ROWS.values()):
        _raw(data / "probes.sqlite", rec(campaign_id=f"x{i}").model_dump())
        _raw(data / "probes.sqlite", doc | {"campaign_id": f"x{i}"})
    code, out, err = run_cli("--data-dir", str(data), "calibrate", "--json")
    assert code == 0, err
    assert err.count("skipped") == len(IMPOSSIBLE_ROWS)
    assert json.loads(out)["probe_rows"] == 1  # only the good campaign's suffix:32 is fitted


@pytest.mark.parametrize("upd", [{"gpu": "NOPE"}, {"throughput_tok_s": 0.0001}, {"concurrency": 1_000_000}],
                         ids=["unknown GPU", "1e-4 tok/s", "concurrency 10^6"])
def test_valid_but_unusable_rows_never_stop_an_answer(run_cli, tmp_path, upd):
    """Rows the store keeps (they are possible) but the fits cannot use: an unknown GPU was exit 2 for every
    recommend and calibrate; absurd step costs made calibrate's host profile exit 70."""
    data = tmp_path / "data"
    with ProbeStore(data / "probes.sqlite") as store:
        store.insert(rec())
        store.insert(rec("suffix:32"))
        store.insert(rec(campaign_id="c2", **upd))
        store.insert(rec("suffix:32", campaign_id="c2", **upd))
    code, _, err = run_cli("--data-dir", str(data), "recommend", MODEL, "--gpu", "H100", "--gpus", "1", "--json")
    assert code == 0, err
    code, _, err = run_cli("--data-dir", str(data), "calibrate")
    assert code == 0, err
    if "gpu" in upd:
        assert "unknown GPU 'NOPE'" in err
