"""Where the shipped data folders live.

In an installed wheel they are inside the package at ``advisor/_data/<name>`` (hatch
``force-include`` in pyproject.toml); in a source checkout or editable install they are the
top-level folders beside the package. Both layouts are tried, wheel first.
"""

from __future__ import annotations

from pathlib import Path

from advisor.errors import DataError

_PKG = Path(__file__).resolve().parent
DATA_FOLDERS = ("rules", "templates", "calibration", "catalog")


def data_path(name: str) -> Path:
    """Return the directory of the shipped data folder ``name`` (one of DATA_FOLDERS)."""
    if name not in DATA_FOLDERS:
        raise ValueError(f"unknown data folder {name!r}; expected one of {DATA_FOLDERS}")
    for candidate in (_PKG / "_data" / name, _PKG.parent / name):
        if candidate.is_dir():
            return candidate
    raise DataError(
        f"shipped data folder {name!r} not found under {_PKG / '_data'} or {_PKG.parent}; "
        "reinstall the package (pip install -e . or the wheel)"
    )


def user_path(text: str, what: str) -> Path:
    """``text`` as a path with ``~``/``~user`` expanded; a UsageError naming ``what`` (e.g. ``--corpus``) when the
    user has no home directory (``~nosuchuser/x``), never Path.expanduser's bare RuntimeError."""
    from advisor.errors import UsageError

    try:
        return Path(text).expanduser()
    except RuntimeError:
        raise UsageError(f"{what} {text[:200]!r}: no such user's home directory") from None
