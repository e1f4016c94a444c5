"""Write rendered files atomically (I/O edge of rendering): all of them or none."""

from __future__ import annotations

from pathlib import Path

from advisor.atomic import write_all

DEFAULT_MODE = 0o644
MODES = {".sh": 0o755, ".env": 0o600, "secret.yaml": 0o600, "compose.yaml": 0o600}
"""By name ending: scripts executable; env files, Kubernetes Secrets and Compose files (their
environment) owner-only, as they may hold tokens."""


def mode_for(name: str) -> int:
    for suffix, mode in MODES.items():
        if name.endswith(suffix):
            return mode
    return DEFAULT_MODE


def write_files(out: Path, files: dict[str, str], *, force: bool = False) -> list[Path]:
    """Write every file or none: refuse to overwrite without ``force``, refuse non-regular targets."""
    return write_all(Path(out), {name: (text, mode_for(name)) for name, text in files.items()}, force=force)
