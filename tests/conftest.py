"""Shared fixtures: every test runs with an isolated home, no ADVISOR_* settings and the hub offline."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
CATALOG = REPO / "catalog" / "models"


@pytest.fixture(autouse=True)
def isolated_home(tmp_path_factory, monkeypatch):
    """A fresh HOME/XDG tree per test; the HF hub is never contacted."""
    home = tmp_path_factory.mktemp("home")
    for name in list(os.environ):
        if name.startswith("ADVISOR_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / ".local" / "share"))
    monkeypatch.setenv("HF_HOME", str(home / ".hf"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(home)
    from advisor.cli import common

    common.set_global_overrides()
    return home


@pytest.fixture
def run_cli(capsys):
    """Run ``advisor ARGS`` in-process through the real entry point; returns (code, stdout, stderr)."""
    from advisor.cli.app import main

    def _run(*args: str) -> tuple[int, str, str]:
        code = main(list(args))
        out = capsys.readouterr()
        return code, out.out, out.err

    return _run
