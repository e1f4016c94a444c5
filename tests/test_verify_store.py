"""Issue 40, item 3: ``advisor verify`` stores each run it compares (predicted vs measured per figure, the host
fingerprint) in the probe store's ``verify_runs`` table, refuses to store what it cannot compare (another model,
malformed JSON, a server that is down, a timeout: one-line error, exit 5 / 7, nothing written), and ``--list`` shows
the stored runs. The result file is the hand-written fixture of tests/test_bench.py (vllm bench serve's shape)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

FIXTURE = Path(__file__).parent / "fixtures" / "bench" / "closed_c192_llama8b.json"
M = "meta-llama/Llama-3.1-8B-Instruct"
SLA = ("--gpu", "H100", "--gpus", "1", "--max-tpot-ms", "30", "--max-ttft-ms", "1000", "--spec", "none")


@pytest.fixture
def answer(run_cli, tmp_path) -> Path:
    code, out, err = run_cli("recommend", M, *SLA, "--json")
    assert code == 0, err
    path = tmp_path / "answer.json"
    path.write_text(out)
    return path


@pytest.fixture
def data_dir(isolated_home) -> Path:
    return isolated_home / ".local" / "share" / "advisor"


def _result(tmp_path: Path, **changes) -> Path:
    data = json.loads(FIXTURE.read_text())
    data.update(changes)
    path = tmp_path / "result.json"
    path.write_text(json.dumps(data))
    return path


def _verify_rows(data_dir: Path) -> list:
    db = data_dir / "probes.sqlite"
    if not db.exists():
        return []
    with sqlite3.connect(db) as conn:
        if not conn.execute("SELECT name FROM sqlite_master WHERE name = 'verify_runs'").fetchone():
            return []
        return conn.execute("SELECT id, model, sla_missed, record_json FROM verify_runs").fetchall()


def test_verify_stores_the_run_with_the_host_fingerprint_and_lists_it(run_cli, answer, data_dir):
    code, out, err = run_cli("verify", "--result", str(FIXTURE), "--prediction", str(answer))
    assert code == 9, err  # the exit code is the SLA's, as before
    assert "verify: stored as run #1 in" in err and "advisor calibrate leaves it out" in err  # this test host has no H100
    (row,) = _verify_rows(data_dir)
    rec = json.loads(row[3])
    assert row[1] == M and row[2] == 1
    assert rec["schema_version"] == 1 and rec["model_id"] == M and rec["host_fingerprint"] and rec["host"]["schema_version"] == 1
    assert rec["arch_class"] == "dense" and rec["weights_dtype"] == "bf16" and rec["method"] == "none" and rec["gpu"] == "H100"
    assert rec["pattern"] == "closed" and rec["max_concurrency"] == 192 and rec["load_matched"] is True
    rows = {r["figure"]: r for r in rec["rows"]}
    assert set(rows) == {"TPOT ms", "TTFT ms", "output tok/s", "decode step ms"}
    assert rows["TPOT ms"]["measured"] == 26.71 and rows["TPOT ms"]["predicted"]["value"] > 0 and rows["TTFT ms"]["passed"] is False
    assert rows["decode step ms"]["statistic"] == "median ITL" and rows["decode step ms"]["measured"] == 24.1

    code, out, err = run_cli("verify", "--list")
    assert code == 0, err
    assert out.startswith("1 verify run(s) in") and "#1 " in out and M in out and "SLA MISSED" in out and "TPOT 26.71 vs" in out
    code, out, err = run_cli("verify", "--list", "--json")
    listed = json.loads(out)
    assert code == 0 and [r["id"] for r in listed["runs"]] == [1] and listed["runs"][0]["rows"] == rec["rows"]

    code, out, _ = run_cli("verify", "--result", str(_result(answer.parent, mean_ttft_ms=612.0)), "--prediction", str(answer), "--json")
    v = json.loads(out)
    assert code == 0 and v["stored"]["id"] == 2 and v["stored"]["not_for_correction"].startswith("stored on a host without a GPU")
    assert [r[0] for r in _verify_rows(data_dir)] == [1, 2]


def test_verify_no_store_and_list_usage(run_cli, answer, data_dir):
    code, out, err = run_cli("verify", "--result", str(FIXTURE), "--prediction", str(answer), "--no-store", "--json")
    assert code == 9 and json.loads(out)["stored"] is None and "stored" not in err
    assert _verify_rows(data_dir) == []
    code, out, _ = run_cli("verify", "--list")
    assert code == 0 and out.startswith("no verify runs stored in")
    code, _, err = run_cli("verify", "--list", "--result", str(FIXTURE))
    assert code == 2 and "--list shows the stored verify runs" in err


@pytest.mark.parametrize(("changes", "text", "msg"), [
    ({"model_id": "Qwen/Qwen3-30B-A3B-FP8"}, None, "the run is of model Qwen/Qwen3-30B-A3B-FP8, the prediction is for"),
    ({}, "{not json", "not JSON"),
    ({"completed": 0, "failed": 1920}, None, "completed is 0"),
])  # fmt: skip
def test_verify_refuses_to_store_what_it_cannot_compare(run_cli, answer, data_dir, tmp_path, changes, text, msg):
    r = _result(tmp_path, **changes)
    if text is not None:
        r.write_text(text)
    code, out, err = run_cli("verify", "--result", str(r), "--prediction", str(answer))
    assert code == 5 and out == "" and msg in err and len(err.strip().splitlines()) == 1, err
    assert _verify_rows(data_dir) == []


@pytest.mark.parametrize(("body", "extra", "msg"), [
    ("echo 'RuntimeError: Failed to fetch models from server at http://127.0.0.1:9/v1/models.' >&2; exit 1", (),
     "Failed to fetch models from server"),  # server down
    ("exec sleep 5", ("--timeout", "1"), "ran past --timeout 1 s"),
])  # fmt: skip
def test_verify_url_failures_store_nothing(run_cli, answer, data_dir, tmp_path, body, extra, msg):
    prog = tmp_path / "fakebench"
    prog.write_text("#!/bin/sh\n" + body + "\n")
    prog.chmod(0o755)
    code, out, err = run_cli("verify", "--url", "http://127.0.0.1:9", "--vllm-bin", str(prog), "--prediction", str(answer),
                             "--result-dir", str(tmp_path / "r"), *extra)  # fmt: skip
    assert code == 7 and msg in err and out == ""
    assert _verify_rows(data_dir) == []


def test_a_run_on_the_answers_gpu_is_kept_for_the_step_correction(run_cli, answer, data_dir, monkeypatch):
    """Stored on an H100 host (host_info stood in for): the record carries that host's GPU, CPU and vLLM, and
    --dummy-weights; calibrate's filter takes it."""
    from advisor.probe import campaign
    from advisor.probe.store import ProbeStore
    from advisor.probe.verify_record import used_for_correction

    host = {"schema_version": 1, "gpus": [{"name": "NVIDIA H100 80GB HBM3", "memory_mib": 81559}],
            "cpu": {"model": "Intel(R) Xeon(R) Processor"}, "versions": {"vllm": "0.26.0"}}
    monkeypatch.setattr(campaign, "host_info", lambda s: {"fingerprint": "ab" * 32, "host": host, "gpu": "H100", "gpus": 1})
    code, out, err = run_cli("verify", "--result", str(FIXTURE), "--prediction", str(answer), "--dummy-weights")
    assert code == 9, err
    assert "leaves it out" not in err
    with ProbeStore(data_dir / "probes.sqlite") as store:
        ((_, rec),) = store.list_verify()
    assert rec.weights == "dummy" and rec.host_gpu == "H100" and rec.vllm_version == "0.26.0" and rec.vllm_version_source == "host"
    assert rec.cpu_model == "Intel(R) Xeon(R) Processor" and used_for_correction(rec) is None
    assert rec.step_point() == (18.438, 24.1)


def test_store_validates_verify_rows_on_write_and_read(tmp_path):
    from advisor.errors import DataError
    from advisor.probe.store import ProbeStore
    from advisor.probe.verify_record import VerifyRecord

    good = {"created_at": "2026-12-05T12:00:00Z", "source": "r.json", "model": M, "model_id": M, "host_fingerprint": "f" * 64,
            "pattern": "closed", "max_concurrency": 8, "compared_with": "closed", "load_matched": True,
            "mean_prompt_len": 1024, "mean_output_len": 512, "completed": 80, "duration_s": 10.0, "statistic": "mean",
            "rows": [{"figure": "TPOT ms", "statistic": "mean", "measured": 12.0, "limit": 15.0, "passed": True}],
            "sla_claimed": True, "sla_met": True, "sla_missed": False}  # fmt: skip
    rec = VerifyRecord(**good)
    for bad, why in (({"sla_missed": True}, "sla_missed"), ({"completed": 0}, "completed"),
                     ({"rows": [{**good["rows"][0], "passed": False}]}, "passed is False"),
                     ({"model": "a\x1bb"}, "not a model id"), ({"created_at": "yesterday"}, "ISO")):  # fmt: skip
        with pytest.raises(ValueError, match=why):
            VerifyRecord(**{**good, **bad})
    db = tmp_path / "probes.sqlite"
    with ProbeStore(db) as store:
        assert store.list_verify() == []  # no table yet: none stored
        with pytest.raises(DataError, match="not stored: completed"):
            store.insert_verify(rec.model_copy(update={"completed": -1}))  # model_copy skips validation; insert does not
        assert store.insert_verify(rec) == 1
        assert store.list_records() == []
    with sqlite3.connect(db) as conn:  # a row of a newer advisor, and a damaged one
        conn.execute("INSERT INTO verify_runs (schema_version, created_at, model, host_fingerprint, sla_missed, record_json)"
                     " VALUES (2, 'x', 'm', 'f', 0, '{}')")
        conn.execute("INSERT INTO verify_runs (schema_version, created_at, model, host_fingerprint, sla_missed, record_json)"
                     " VALUES (1, 'x', 'm', 'f', 0, '{\"schema_version\": 1}')")
    with ProbeStore(db, read_only=True) as store:
        runs = store.list_verify()
        assert [i for i, _ in runs] == [1] and runs[0][1] == rec
        assert "newer than this advisor's 1" in store.skipped[0] and "verify run 3 skipped" in store.skipped[1]
        with pytest.raises(DataError, match="read-only"):
            store.insert_verify(rec)
