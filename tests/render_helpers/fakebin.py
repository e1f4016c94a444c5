"""A recording fake ``vllm``: writes the argv and environment it was started with to $FAKE_OUT."""

from __future__ import annotations

import stat
import sys
from pathlib import Path

RECORDER = (
    "import json, os, sys\n"
    "json.dump({'argv': sys.argv[1:], 'env': dict(os.environ)}, open(os.environ['FAKE_OUT'], 'w'))\n"
)


def make_fake(folder: Path, name: str = "vllm") -> Path:
    """An executable ``folder/name`` run by this test's Python (so its #! line names a real interpreter)."""
    folder.mkdir(parents=True, exist_ok=True)
    fake = folder / name
    fake.write_text(f"#!{sys.executable}\n{RECORDER}")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC | stat.S_IXGRP | stat.S_IXOTH)
    return fake


def which_in(folder: Path):
    """A ``shutil.which`` that looks only in ``folder`` (what the render-time resolution sees)."""

    def which(name: str) -> str | None:
        path = folder / name
        return str(path) if "/" not in name and len(name.encode()) <= 255 and path.is_file() else None

    return which
