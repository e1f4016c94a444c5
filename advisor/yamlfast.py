"""``safe_load`` through libyaml's C loader when PyYAML has it (about 5x faster on the bundled rules
and GPU table, which every ``recommend`` reads), else the pure-Python SafeLoader. Same results."""

from __future__ import annotations

import yaml

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def safe_load(text: str):
    """``yaml.safe_load`` with the fastest safe loader available."""
    return yaml.load(text, Loader=_LOADER)  # noqa: S506 - a SafeLoader (C or Python), never the full loader
