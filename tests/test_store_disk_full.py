"""Issue 43 item 5: a full disk never loses a measurement behind a misleading exit 70. ProbeStore.insert no longer
rolls back a transaction SQLite already ended ("cannot rollback - no transaction is active"): it says "disk full",
exit 73, and hands the record back (StoreWriteError); the probe prints that record and keeps every earlier one."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from advisor.cli.app import main
from advisor.probe.record import ProbeRecord
from advisor.probe.store import ProbeStore, StoreWriteError

ROOT = Path(__file__).resolve().parents[1]
FAKE = ROOT / "tests" / "vllm_helpers" / "fake_vllm.py"


def _fill(store: ProbeStore) -> None:
    """The disk is full from now on: SQLite may not grow the file by one page (SQLITE_FULL, as ENOSPC gives)."""
    pages = store._conn.execute("PRAGMA page_count").fetchone()[0]
    store._conn.execute(f"PRAGMA max_page_count = {pages}")


def rec(config: str = "vanilla") -> ProbeRecord:
    return ProbeRecord(campaign_id="c", model="m", config=config, outcome="ok", corpus="x" * 50_000, concurrency=1,
                       started_at="2026-12-05T00:00:00Z")  # fmt: skip


def test_insert_on_a_full_disk_says_disk_full_and_returns_the_record(tmp_path):
    path = tmp_path / "s.sqlite"
    with ProbeStore(path) as store:
        store.insert(rec())
        _fill(store)
        with pytest.raises(StoreWriteError, match="disk full") as info:
            store.insert(rec("suffix:32"))
        assert info.value.exit_code == 73 and info.value.disk_full
        assert "no transaction is active" not in str(info.value)
        assert info.value.record.config == "suffix:32"
        assert not store._conn.in_transaction
    with ProbeStore(path) as store:  # the earlier record is whole; the store still opens and reads
        assert [r.config for r in store.list_records()] == ["vanilla"]


def test_probe_on_a_full_disk_exits_73_and_keeps_what_was_measured(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("FAKE_TOKEN_S", "0.001")
    corpus = tmp_path / "prompts.jsonl"
    corpus.write_text("".join(json.dumps({"prompt": f"prompt number {i}"}) + "\n" for i in range(20)))
    (tmp_path / "good").mkdir()
    real_insert = ProbeStore.insert

    def insert(self, record):  # the disk fills up after the first configuration
        if self.list_records():
            _fill(self)
        return real_insert(self, record)

    monkeypatch.setattr(ProbeStore, "insert", insert)
    rc = main(["--data-dir", str(tmp_path / "data"), "probe", str(tmp_path / "good"), "--corpus", str(corpus),
               "--configs", "vanilla,suffix:4", "--requests", "4", "--duration", "30", "--concurrency", "2",
               "--max-tokens", "8", "--max-model-len", "512", "--server-cmd", f"{sys.executable} {FAKE}", "--json"])  # fmt: skip
    _, err = capsys.readouterr()
    assert rc == 73, err
    assert "disk full" in err and "internal error" not in err and "no transaction is active" not in err
    line = next(x for x in err.splitlines() if x.startswith("the measurement, kept here as one JSON line"))
    kept = ProbeRecord.model_validate_json(line.split(": ", 1)[1])
    assert kept.config == "suffix:4" and kept.outcome == "ok" and kept.throughput_tok_s
    with ProbeStore(tmp_path / "data" / "probes.sqlite") as store:
        assert [r.config for r in store.list_records()] == ["vanilla"]


def test_a_server_printing_without_end_leaves_a_bounded_log(tmp_path, capsys, monkeypatch):
    from advisor.probe import server

    monkeypatch.setattr(server, "LOG_MAX_BYTES", 256 * 1024)
    monkeypatch.setenv("PYTHONPATH", str(ROOT))  # the guard the server runs under is this checkout's
    monkeypatch.setenv("FAKE_TOKEN_S", "0.001")
    monkeypatch.setenv("FAKE_LOG_SPAM_BYTES", str(4 * 2**20))  # 16 x the cap
    (tmp_path / "good").mkdir()
    corpus = tmp_path / "prompts.jsonl"
    corpus.write_text("".join(json.dumps({"prompt": f"prompt number {i}"}) + "\n" for i in range(8)))
    rc = main(["--data-dir", str(tmp_path / "data"), "probe", str(tmp_path / "good"), "--corpus", str(corpus),
               "--configs", "vanilla", "--requests", "4", "--duration", "30", "--concurrency", "2", "--max-tokens", "8",
               "--max-model-len", "512", "--server-cmd", f"{sys.executable} {FAKE}", "--json"])  # fmt: skip
    out, err = capsys.readouterr()
    assert rc == 0, err
    rec = json.loads(out)["records"][0]
    assert rec["outcome"] == "ok"
    log = Path(rec["log_path"])
    rotated = Path(str(log) + ".1")
    assert rotated.is_file() and "log rotated" in log.read_text()
    assert log.stat().st_size + rotated.stat().st_size <= 2 * 256 * 1024 + 65536  # not 4 MiB
    assert "ADVISOR_GUARD_LOG" not in log.read_text()  # the guard's settings never reach the server
