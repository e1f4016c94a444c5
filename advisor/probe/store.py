"""The probe store: ProbeRecords in SQLite (``<data_dir>/probes.sqlite``).

Each record is kept whole as JSON (the ProbeRecord schema) plus indexed columns to filter on.
One record is one transaction, committed before the next configuration starts, so Ctrl-C or a
crash loses at most the configuration in progress. WAL journal: readers (``advisor calibrate``)
never block a running campaign. ``schema_version`` holds the layout version; a store written by a
newer advisor is refused rather than misread.

    from advisor.probe.store import open_store
    with open_store(settings) as store:
        records = store.list_records(model="meta-llama/Llama-3.1-8B-Instruct", outcome="ok")
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from urllib.parse import quote
from typing import TYPE_CHECKING

from advisor.errors import DataError, OutputError
from advisor.probe.record import ProbeRecord

if TYPE_CHECKING:
    from advisor.probe.verify_record import VerifyRecord
    from advisor.settings import Settings

SCHEMA_VERSION = 1
FILENAME = "probes.sqlite"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS probes (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    campaign_id TEXT NOT NULL,
    model TEXT NOT NULL,
    config TEXT NOT NULL,
    outcome TEXT NOT NULL,
    gpu TEXT,
    corpus TEXT NOT NULL,
    concurrency INTEGER NOT NULL,
    throughput_tok_s REAL,
    host_fingerprint TEXT,
    vllm_version TEXT,
    started_at TEXT NOT NULL,
    record_json TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS probes_campaign ON probes (campaign_id, config);
CREATE INDEX IF NOT EXISTS probes_model ON probes (model, outcome);
CREATE INDEX IF NOT EXISTS probes_host ON probes (host_fingerprint);
"""

_VERIFY_SCHEMA = """
CREATE TABLE IF NOT EXISTS verify_runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    schema_version INTEGER NOT NULL,
    created_at TEXT NOT NULL,
    model TEXT NOT NULL,
    gpu TEXT,
    host_fingerprint TEXT NOT NULL,
    sla_missed INTEGER NOT NULL,
    record_json TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS verify_runs_model ON verify_runs (model);
"""
"""``advisor verify``'s runs (advisor.probe.verify_record.VerifyRecord, each row carrying its own schema_version).
Created by the first stored run, in that run's transaction: a store without it is read as holding none, and the
probes table's layout (``schema_version``) is unchanged, so an older advisor still reads the store's probes."""

_COLUMNS = ("id", "campaign_id", "model", "config", "outcome", "gpu", "corpus", "concurrency", "throughput_tok_s",
            "host_fingerprint", "vllm_version", "started_at", "record_json")
_FILTERS = ("model", "campaign_id", "config", "outcome", "gpu", "corpus", "host_fingerprint", "vllm_version")


class StoreWriteError(OutputError):
    """A record could not be written (a full disk, an I/O error, a lock never released): exit 73. ``record`` is the
    measurement that was not stored (a ProbeRecord or a VerifyRecord), for the caller to keep; ``disk_full`` says
    whether SQLite reported SQLITE_FULL."""

    def __init__(self, message: str, record: "ProbeRecord | VerifyRecord", *, disk_full: bool) -> None:
        super().__init__(message)
        self.record, self.disk_full = record, disk_full


class ProbeStore:
    """A handle on one store file. Use as a context manager, or call :meth:`close`."""

    def __init__(self, path: Path, *, busy_timeout_s: float = 30.0, read_only: bool = False) -> None:
        self.path = Path(path)
        self.skipped: list[str] = []
        """Rows the last :meth:`list_records` left out, each named by row id with the reason."""
        if read_only and not self.path.is_file():
            raise DataError(f"probe store {self.path} does not exist (asked to read it, not to create it)")
        self._snapshot = read_only and not Path(str(self.path) + "-wal").exists()
        """Asked to read a file nobody writes meanwhile (a committed store) with no WAL beside it: opened
        ``immutable``, so no ``-shm``/``-wal`` files appear next to it (``mode=ro`` makes them for a WAL store)."""
        self.read_only = read_only or (
            self.path.is_file() and not (os.access(self.path, os.W_OK) and os.access(self.path.parent, os.W_OK)))
        """A store the user may read but not write (a shared, read-only copy), or one the caller only reads
        (``read_only``: a committed store is never switched to WAL or written): opened read-only;
        :meth:`insert` then refuses."""
        if not self.read_only:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise DataError(f"cannot create the data directory {self.path.parent}: {exc.strerror or exc}; "
                                "pass --data-dir (or ADVISOR_DATA_DIR) a writable directory") from None  # fmt: skip
        try:
            self._conn = self._connect(busy_timeout_s)
        except sqlite3.Error as exc:
            raise DataError(f"probe store {self.path} cannot be opened: {exc}") from None
        try:
            if self.read_only:
                if not self._schema_ready():
                    raise DataError(f"probe store {self.path} is read-only and holds no probe table at this advisor's schema")
            else:
                if self._conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                    self._conn.execute("PRAGMA journal_mode=WAL")
                if not self._schema_ready():
                    self._init_schema()
            self._check_columns()
        except sqlite3.DatabaseError as exc:
            self._conn.close()
            raise DataError(f"probe store {self.path} is not usable: {exc}") from None
        except DataError:
            self._conn.close()
            raise

    def _connect(self, busy_timeout_s: float) -> sqlite3.Connection:
        if not self.read_only:
            return sqlite3.connect(self.path, timeout=busy_timeout_s, isolation_level=None)
        uri = "file:" + quote(str(self.path.resolve()))
        if self._snapshot:
            return sqlite3.connect(uri + "?immutable=1", timeout=busy_timeout_s, isolation_level=None, uri=True)
        conn = sqlite3.connect(uri + "?mode=ro", timeout=busy_timeout_s, isolation_level=None, uri=True)
        try:
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
            return conn
        except sqlite3.OperationalError:  # a WAL store in a read-only folder: no -shm can be made
            conn.close()
            return sqlite3.connect(uri + "?immutable=1", timeout=busy_timeout_s, isolation_level=None, uri=True)

    def _version(self) -> int | None:
        """The stored layout version; DataError when the table holds something else than one integer."""
        row = self._conn.execute("SELECT version FROM schema_version").fetchone()
        if row is None:
            return None
        if not isinstance(row[0], int) or isinstance(row[0], bool):
            raise DataError(f"probe store {self.path}: schema_version holds {row[0]!r}, not a version number: the file is "
                            "damaged or not an advisor store; move it aside (a new store is created) or pass another --data-dir")  # fmt: skip
        return row[0]

    def _check_columns(self) -> None:
        cols = {r[1] for r in self._conn.execute("PRAGMA table_info(probes)")}
        lacking = [c for c in _COLUMNS if c not in cols]
        if lacking:
            raise DataError(f"probe store {self.path}: the probes table lacks {', '.join(lacking)}: the file is damaged or "
                            "not an advisor store; move it aside (a new store is created) or pass another --data-dir")  # fmt: skip

    def _schema_ready(self) -> bool:
        """True when the schema is there at this advisor's version: no write lock is taken (a plain
        read in autocommit mode), so opening a store another process is writing does not wait."""
        try:
            version = self._version()
        except sqlite3.OperationalError:
            return False
        if version is not None and version > SCHEMA_VERSION:
            raise DataError(f"probe store {self.path} has schema version {version}, newer than this advisor's "
                            f"{SCHEMA_VERSION}: upgrade vllm-advisor")  # fmt: skip
        if version is None:
            return False
        tables = {r[0] for r in self._conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        return "probes" in tables

    def _init_schema(self) -> None:
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            for statement in filter(None, (s.strip() for s in _SCHEMA.split(";"))):
                conn.execute(statement)
            version = self._version()
            if version is None:
                conn.execute("INSERT INTO schema_version (version) VALUES (?)", (SCHEMA_VERSION,))
            elif version > SCHEMA_VERSION:
                raise DataError(
                    f"probe store {self.path} has schema version {version}, newer than this advisor's "
                    f"{SCHEMA_VERSION}: upgrade vllm-advisor"
                )
            conn.execute("COMMIT")
        except BaseException:
            self._rollback()
            raise

    @property
    def schema_version(self) -> int:
        return int(self._version() or 0)

    def insert(self, record: ProbeRecord) -> int:
        """Validate ``record`` again (a model_copy(update=…) skips validation) and add it in its own
        transaction; returns its row id. An invalid record is a DataError and nothing is written."""
        from pydantic import ValidationError

        try:
            ProbeRecord.model_validate(record.model_dump())  # checked; the record itself is written
        except ValidationError as exc:
            first = exc.errors()[0]
            raise DataError(f"probe record {record.campaign_id}/{record.config} not stored: "
                            f"{'.'.join(map(str, first['loc']))}: {first['msg']} (got {first.get('input')!r})") from None
        if self.read_only:
            raise DataError(f"probe store {self.path} is read-only here: the probe record {record.campaign_id}/{record.config} "
                            "cannot be stored; pass --data-dir a writable directory")  # fmt: skip
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            cur = conn.execute(
                "INSERT INTO probes (campaign_id, model, config, outcome, gpu, corpus, concurrency,"
                " throughput_tok_s, host_fingerprint, vllm_version, started_at, record_json)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    record.campaign_id, record.model, record.config, record.outcome, record.gpu,
                    record.corpus, record.concurrency, record.throughput_tok_s, record.host_fingerprint,
                    record.vllm_version, record.started_at, record.model_dump_json(),
                ),
            )  # fmt: skip
            conn.execute("COMMIT")
        except BaseException as exc:
            self._rollback()  # SQLite has already rolled back after SQLITE_FULL/IOERR: never mask the cause
            if isinstance(exc, sqlite3.Error):
                raise self._write_error(exc, record) from None
            raise
        return int(cur.lastrowid)

    def _rollback(self) -> None:
        """ROLLBACK when a transaction is still open (SQLite ends it by itself on a full disk or an I/O error)."""
        if self._conn.in_transaction:
            try:
                self._conn.execute("ROLLBACK")
            except sqlite3.Error:
                pass

    def _write_error(self, exc: sqlite3.Error, record, what: str | None = None, rerun: str | None = None) -> StoreWriteError:
        """The domain error for a failed write, by SQLite's error code: "disk full" for SQLITE_FULL, else the cause;
        it carries the record, which the caller keeps (advisor.probe.campaign prints it)."""
        code = getattr(exc, "sqlite_errorcode", None)  # Python 3.11+; on 3.10 the cause is only in the message
        full = isinstance(code, int) and code & 0xFF == getattr(sqlite3, "SQLITE_FULL", 13)
        what = what or f"probe record {record.campaign_id}/{record.config} not stored in {self.path}"
        if full:
            return StoreWriteError(f"disk full: {what} (SQLite: {exc}); free space or pass --data-dir another disk, "
                                   + (rerun or "then rerun the same command: finished configurations are kept and skipped"),
                                   record, disk_full=True)  # fmt: skip
        return StoreWriteError(f"{what}: cannot write ({type(exc).__name__}: {exc}); " + (rerun or "rerun the same command to resume"),
                               record, disk_full=False)  # fmt: skip

    # --- verify runs -------------------------------------------------------------------------------------------

    def insert_verify(self, record: "VerifyRecord") -> int:
        """Validate ``record`` again and add it in its own transaction (the table is made by the first one); returns
        its row id. An invalid record is a DataError and nothing is written; a failed write is a StoreWriteError."""
        from pydantic import ValidationError

        from advisor.probe.verify_record import VerifyRecord

        try:
            VerifyRecord.model_validate(record.model_dump())
        except ValidationError as exc:
            first = exc.errors()[0]
            raise DataError(f"verify run of {record.model} not stored: {'.'.join(map(str, first['loc']))}: "
                            f"{first['msg']}") from None  # fmt: skip
        if self.read_only:
            raise DataError(f"probe store {self.path} is read-only here: the verify run cannot be stored; pass --data-dir "
                            "a writable directory, or --no-store")  # fmt: skip
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            for statement in filter(None, (x.strip() for x in _VERIFY_SCHEMA.split(";"))):
                conn.execute(statement)
            cur = conn.execute(
                "INSERT INTO verify_runs (schema_version, created_at, model, gpu, host_fingerprint, sla_missed, record_json)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (record.schema_version, record.created_at, record.model, record.gpu, record.host_fingerprint,
                 int(record.sla_missed), record.model_dump_json()),
            )  # fmt: skip
            conn.execute("COMMIT")
        except BaseException as exc:
            self._rollback()
            if isinstance(exc, sqlite3.Error):
                raise self._write_error(exc, record, f"verify run of {record.model} not stored in {self.path}",
                                        "then run verify again on the same result file") from None  # fmt: skip
            raise
        return int(cur.lastrowid)

    def list_verify(self, model: str | None = None) -> list[tuple[int, "VerifyRecord"]]:
        """(row id, record) of the stored verify runs in insertion order (optionally of one model); a row this advisor
        cannot read (newer schema, damaged JSON, a value no run has) is left out and named in :attr:`skipped`."""
        from pydantic import ValidationError

        from advisor.probe.verify_record import SCHEMA_VERSION as VERIFY_VERSION
        from advisor.probe.verify_record import VerifyRecord

        self.skipped = []
        tables = {r[0] for r in self._conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if "verify_runs" not in tables:
            return []
        sql = "SELECT id, schema_version, record_json FROM verify_runs"
        rows = self._conn.execute(sql + (" WHERE model = ? ORDER BY id" if model else " ORDER BY id"), (model,) if model else ()).fetchall()
        out = []
        for row_id, version, text in rows:
            where = f"probe store {self.path} verify run {row_id} skipped"
            if not isinstance(version, int) or version > VERIFY_VERSION:
                self.skipped.append(f"{where}: schema version {version!r}, newer than this advisor's {VERIFY_VERSION}: upgrade vllm-advisor")
                continue
            if not isinstance(text, (str, bytes)):
                self.skipped.append(f"{where}: record_json is {type(text).__name__}, not JSON text")
                continue
            try:
                out.append((int(row_id), VerifyRecord.model_validate_json(text)))
            except RecursionError:
                self.skipped.append(f"{where}: record_json nests too deeply")
            except ValidationError as exc:
                first = exc.errors()[0]
                self.skipped.append(f"{where}: {'.'.join(map(str, first['loc'])) or 'record_json'}: {first['msg']}")
        return out

    def list_records(self, model: str | None = None, **filters: str | None) -> list[ProbeRecord]:
        """Records in insertion order, optionally filtered by exact column values
        (``model``, ``campaign_id``, ``config``, ``outcome``, ``gpu``, ``corpus``, ``host_fingerprint``,
        ``vllm_version``)."""
        filters["model"] = model
        unknown = set(filters) - set(_FILTERS)
        if unknown:
            raise ValueError(f"unknown filter(s) {sorted(unknown)}; use {_FILTERS}")
        where = [(k, v) for k, v in filters.items() if v is not None]
        sql = "SELECT id, record_json FROM probes"
        if where:
            sql += " WHERE " + " AND ".join(f"{k} = ?" for k, _ in where)
        rows = self._conn.execute(sql + " ORDER BY id", [v for _, v in where]).fetchall()
        from pydantic import ValidationError

        out, self.skipped = [], []
        for row_id, text in rows:
            if not isinstance(text, (str, bytes)):
                self.skipped.append(f"probe store {self.path} row {row_id} skipped: record_json is {type(text).__name__}, not JSON text")
                continue
            try:
                out.append(ProbeRecord.model_validate_json(text))
            except RecursionError:
                self.skipped.append(f"probe store {self.path} row {row_id} skipped: record_json nests too deeply")
            except ValidationError as exc:
                first = exc.errors()[0]
                where_ = ".".join(map(str, first["loc"])) or "record_json"
                self.skipped.append(f"probe store {self.path} row {row_id} skipped: {where_}: {first['msg']}")
        return out

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> "ProbeStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def store_path(settings: "Settings") -> Path:
    return Path(settings.data_dir) / FILENAME


def open_store(settings: "Settings", *, busy_timeout_s: float = 30.0) -> ProbeStore:
    """The user's probe store (created on first use). Readers that must not stall (recommend) pass a
    short ``busy_timeout_s``."""
    return ProbeStore(store_path(settings), busy_timeout_s=busy_timeout_s)
