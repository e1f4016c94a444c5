"""What probe tests read back from outside the advisor: the SQLite store and /proc."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path


def stored_configs(db: Path) -> list[str]:
    """Configurations recorded in a probe store, in insertion order ([] before the store exists)."""
    if not db.exists():
        return []
    conn = sqlite3.connect(db)
    try:
        return [r[0] for r in conn.execute("SELECT config FROM probes ORDER BY id")]
    except sqlite3.OperationalError:
        return []
    finally:
        conn.close()


def pids_where(test: Callable[[Path], bool]) -> list[int]:
    """PIDs of live processes whose /proc/<pid> directory passes ``test`` (unreadable ones are skipped)."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if test(proc):
                    found.append(int(proc.name))
            except OSError:
                continue
    return found


def sigint_default() -> None:  # pragma: no cover - runs in the child between fork and exec
    """``preexec_fn`` of a child a test will Ctrl-C: SIGINT at its default, as in a terminal. A test run started as
    a background job (``cmd &`` in a script) inherits SIGINT ignored, and Python keeps an ignored SIGINT, so the
    child would never see the test's Ctrl-C."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)
