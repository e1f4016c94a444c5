"""The committed campaigns each fit and evaluation reads, by set name (``calibration/manifests.yaml``): the lab's
modules name a set, never a folder, so adding a campaign to a fit is one reviewed edit of that file."""

from __future__ import annotations

from functools import lru_cache

from advisor.errors import DataError


@lru_cache(maxsize=1)
def _table() -> dict:
    from advisor.paths import data_path
    from advisor.yamlfast import safe_load

    path = data_path("calibration") / "manifests.yaml"
    data = safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise DataError(f"{path}: expected a mapping of set names")
    return data


def _entry(name: str, kind: str):
    entry = _table().get(name)
    if not isinstance(entry, dict) or kind not in entry:
        raise DataError(f"calibration/manifests.yaml has no {kind!r} set {name!r}")
    return entry[kind]


def folders(name: str) -> tuple[str, ...]:
    """The entries of set ``name`` under its root (sub-folders, or result files where the set says so), in the file's order."""
    return tuple(str(f) for f in _entry(name, "folders"))


def root(name: str) -> str:
    """The folder (relative to calibration/) of set ``name``."""
    return str(_entry(name, "root"))


def labels(name: str) -> dict[str, str]:
    """Set ``name``'s label map (a GPU machine's directory names -> bundled catalog ids)."""
    return {str(k): str(v) for k, v in _entry(name, "labels").items()}
