"""The probe store: a real SQLite file under tmp_path."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from advisor.errors import DataError
from advisor.probe.record import ProbeRecord
from advisor.probe.store import SCHEMA_VERSION, ProbeStore, open_store


def rec(config: str = "vanilla", outcome: str = "ok", campaign: str = "c-1", model: str = "m", **kw) -> ProbeRecord:
    return ProbeRecord(
        campaign_id=campaign, model=model, config=config, outcome=outcome, corpus="humaneval", concurrency=4,
        started_at="2026-11-29T00:00:00+00:00", throughput_tok_s=100.0 if outcome == "ok" else None, **kw,
    )  # fmt: skip


def test_roundtrip_filters_and_layout(tmp_path: Path) -> None:
    path = tmp_path / "data" / "probes.sqlite"
    with ProbeStore(path) as store:
        a = rec(acceptance_per_position=[0.5, 0.25], host={"gpus": []}, command=["vllm", "serve", "m"])
        store.insert(a)
        store.insert(rec("suffix:32", model="other"))
        store.insert(rec("ngram:4", outcome="boot_failed", failure="no_kv_blocks: x"))
        assert store.list_records()[0] == a
        assert [r.config for r in store.list_records(model="m")] == ["vanilla", "ngram:4"]
        assert [r.config for r in store.list_records(outcome="boot_failed")] == ["ngram:4"]
        assert store.list_records(model="m", config="suffix:32") == []
        with pytest.raises(ValueError, match="unknown filter"):
            store.list_records(nonsense="x")
        assert store.schema_version == SCHEMA_VERSION
    # A real SQLite file in WAL mode with the indexed columns and the whole record as JSON.
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    row = conn.execute("SELECT model, config, outcome, throughput_tok_s, record_json FROM probes WHERE id = 1").fetchone()
    assert row[:4] == ("m", "vanilla", "ok", 100.0)
    assert json.loads(row[4])["acceptance_per_position"] == [0.5, 0.25]
    conn.close()


def test_open_store_uses_data_dir(tmp_path: Path) -> None:
    from advisor.settings import load_settings

    with open_store(load_settings(data_dir=tmp_path / "d")) as store:
        store.insert(rec())
    assert (tmp_path / "d" / "probes.sqlite").is_file()
    with open_store(load_settings(data_dir=tmp_path / "d")) as store:
        assert len(store.list_records()) == 1


def test_what_a_resumed_campaign_probes(tmp_path: Path) -> None:
    """campaign._todo over the store's records: a configuration is done by an ok record per pass; one whose latest
    record failed is not booted again unless --retry-failed; --repeat N adds passes, vanilla first in each."""
    from advisor.probe.campaign import CampaignSpec, _todo
    from advisor.probe.configs import parse_configs
    from advisor.probe.load import LoadSpec

    def todo(store, passes=1, retry=False):
        spec = CampaignSpec(model="m", corpus="humaneval", configs=parse_configs("suffix:32,vanilla,ngram:4"),
                            load=LoadSpec(), passes=passes, retry_failed=retry)  # fmt: skip
        steps, finished = _todo(spec, store.list_records(campaign_id="c-1"))
        return [(n, c.label) for n, c in steps], set(finished)

    with ProbeStore(tmp_path / "s.sqlite") as store:
        assert todo(store) == ([(1, "vanilla"), (1, "suffix:32"), (1, "ngram:4")], set())
        store.insert(rec("vanilla"))
        store.insert(rec("suffix:32", outcome="boot_failed"))
        store.insert(rec("ngram:4", campaign="c-other"))
        assert todo(store) == ([(1, "ngram:4")], {"vanilla", "suffix:32"})
        assert todo(store, retry=True) == ([(1, "suffix:32"), (1, "ngram:4")], {"vanilla"})
        # three passes: the failed configuration is still not repeated; the others get passes 2 and 3
        assert todo(store, passes=3) == ([(1, "ngram:4"), (2, "vanilla"), (2, "ngram:4"), (3, "vanilla"), (3, "ngram:4")],
                                         {"suffix:32"})  # fmt: skip
        store.insert(rec("suffix:32"))
        assert todo(store, passes=2) == ([(1, "ngram:4"), (2, "vanilla"), (2, "suffix:32"), (2, "ngram:4")], set())
        store.insert(rec("vanilla"))
        store.insert(rec("suffix:32"))
        assert todo(store, passes=2) == ([(1, "ngram:4"), (2, "ngram:4")], {"vanilla", "suffix:32"})


class _Exploding:
    """Looks like a record until it is serialised, half-way through the insert."""

    def __init__(self, good: ProbeRecord) -> None:
        self._good = good

    def __getattr__(self, name: str):
        return getattr(self._good, name)

    def model_dump_json(self) -> str:
        raise RuntimeError("disk on fire")


def test_failed_insert_rolls_back_and_store_stays_usable(tmp_path: Path) -> None:
    with ProbeStore(tmp_path / "s.sqlite") as store:
        store.insert(rec("vanilla"))
        with pytest.raises(RuntimeError):
            store.insert(_Exploding(rec("suffix:32")))  # type: ignore[arg-type]
        assert [r.config for r in store.list_records()] == ["vanilla"]
        store.insert(rec("ngram:4"))
        assert [r.config for r in store.list_records()] == ["vanilla", "ngram:4"]


def test_reader_sees_only_committed_records_while_a_writer_holds_a_transaction(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    with ProbeStore(path) as writer, ProbeStore(path) as reader:
        writer.insert(rec("vanilla"))
        writer._conn.execute("BEGIN IMMEDIATE")
        writer._conn.execute(
            "INSERT INTO probes (campaign_id, model, config, outcome, corpus, concurrency, started_at, record_json)"
            " VALUES ('c-1', 'm', 'half', 'ok', 'x', 1, 'now', '{}')"
        )
        assert [r.config for r in reader.list_records()] == ["vanilla"]  # WAL: not blocked, not dirty
        writer._conn.execute("ROLLBACK")


_WRITER = """
import sys
from advisor.probe.store import ProbeStore
from advisor.probe.record import ProbeRecord
store = ProbeStore(sys.argv[1])
i = 0
while True:
    store.insert(ProbeRecord(campaign_id="c-kill", model="m", config=f"suffix:{i % 64 + 1}@n={i}", outcome="ok",
                             corpus="x" * 2000, concurrency=1, started_at="t", acceptance_per_position=[0.5] * 64))
    i += 1
    if i == 20:
        print("ready", flush=True)
"""


def test_records_survive_a_killed_writer(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    proc = subprocess.Popen([sys.executable, "-c", _WRITER, str(path)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    time.sleep(0.3)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    with ProbeStore(path) as store:
        records = store.list_records(campaign_id="c-kill")
        n = store._conn.execute("SELECT COUNT(*) FROM probes").fetchone()[0]
    assert len(records) == n >= 20  # every row that is there is a whole, valid record
    assert all(len(r.acceptance_per_position) == 64 for r in records)


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    ProbeStore(path).close()
    conn = sqlite3.connect(path)
    conn.execute("UPDATE schema_version SET version = ?", (SCHEMA_VERSION + 1,))
    conn.commit()
    conn.close()
    with pytest.raises(DataError, match="newer"):
        ProbeStore(path)


def test_not_a_database(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    path.write_text("this is not sqlite " * 100)
    with pytest.raises(DataError, match="not usable"):
        ProbeStore(path)


def test_reading_committed_stores_changes_nothing_beside_them(tmp_path):
    """``calibrate`` reads the committed stores with ``read_only=True``: a WAL-mode store is opened immutable, so no
    ``-shm``/``-wal`` file appears beside it and its bytes stay as committed; a store asked for read-only that does
    not exist is an error, not a new file."""
    import shutil
    import sqlite3

    from advisor.calibrate.records import calibration_records
    from advisor.errors import DataError
    from advisor.probe.store import ProbeStore

    src = Path(__file__).resolve().parents[1] / "calibration" / "gpu_real" / "h200-vllm0.26.0" / "store2" / "probes.sqlite"
    cal = tmp_path / "calibration" / "gpu_real" / "h200-vllm0.26.0" / "store2"
    cal.mkdir(parents=True)
    shutil.copy(src, cal / "probes.sqlite")
    conn = sqlite3.connect(cal / "probes.sqlite")
    assert conn.execute("PRAGMA journal_mode=WAL").fetchone()[0] == "wal"  # as most committed stores are
    conn.close()
    assert sorted(p.name for p in cal.iterdir()) == ["probes.sqlite"]
    before = (cal / "probes.sqlite").read_bytes()
    records = calibration_records(tmp_path / "calibration")
    assert records and all(r.campaign_id for r in records)
    assert sorted(p.name for p in cal.iterdir()) == ["probes.sqlite"]
    assert (cal / "probes.sqlite").read_bytes() == before
    with pytest.raises(DataError, match="does not exist"):
        ProbeStore(tmp_path / "absent.sqlite", read_only=True)
    assert not (tmp_path / "absent.sqlite").exists()
