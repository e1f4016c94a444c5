"""Write rendered files atomically (I/O edge of rendering)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from advisor.errors import UsageError


def write_files(out: Path, files: dict[str, str], *, force: bool = False) -> list[Path]:
    """Write every file or none: refuse to overwrite without ``force``; each file lands via rename."""
    out = Path(out)
    existing = [out / name for name in files if (out / name).exists()]
    if existing and not force:
        raise UsageError(f"{', '.join(str(p) for p in existing)} already exist; pass --force to overwrite")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create {out}: {exc.strerror}") from None
    written = []
    for name, text in files.items():
        fd, tmp = tempfile.mkstemp(dir=out, prefix=f".{name}.")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(text)
            os.chmod(tmp, 0o755 if name.endswith(".sh") else 0o644)
            os.replace(tmp, out / name)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        written.append(out / name)
    return written
