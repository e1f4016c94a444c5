"""Shared fixtures: every test runs with an isolated home, no ADVISOR_* settings and the hub offline."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
CATALOG = REPO / "catalog" / "models"


def _isolate(home: Path, monkeypatch) -> None:
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


@pytest.fixture(autouse=True)
def isolated_home(tmp_path_factory, monkeypatch):
    """A fresh HOME/XDG tree per test; the HF hub is never contacted."""
    home = tmp_path_factory.mktemp("home")
    _isolate(home, monkeypatch)
    from advisor.predict import host_profile

    # profiles a test registers for this process (host_profile.register) end with the test, not in a later one's notes
    monkeypatch.setattr(host_profile, "_REGISTERED", dict(host_profile._REGISTERED))
    return home


@pytest.fixture(scope="session")
def calibrate_evaluate_json(tmp_path_factory) -> dict:
    """The output of ``advisor calibrate --evaluate --json`` through the real entry point, run once per session (it
    takes ~45 s on 2 cores) in an isolated home like every test's; the tests that read it each assert their part."""
    import contextlib
    import io
    import json

    from advisor.cli.app import main

    buf = io.StringIO()
    with pytest.MonkeyPatch.context() as mp:
        _isolate(tmp_path_factory.mktemp("home-evaluate"), mp)
        with contextlib.redirect_stdout(buf):
            code = main(["calibrate", "--evaluate", "--json"])
    assert code == 0, buf.getvalue()[-2000:]
    return json.loads(buf.getvalue())


@pytest.fixture
def run_cli(capsys):
    """Run ``advisor ARGS`` in-process through the real entry point; returns (code, stdout, stderr)."""
    from advisor.cli.app import main

    def _run(*args: str) -> tuple[int, str, str]:
        code = main(list(args))
        out = capsys.readouterr()
        return code, out.out, out.err

    return _run
