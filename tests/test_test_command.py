"""scripts/test.sh minds its host (issue 43, 'The test command minds its host'): it prints its plan (what it
installs, where, the disk and the time) before anything, and it leaves an interpreter that is not an active
virtual environment as it was (the test dependencies go into a project venv made from it)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "test.sh"


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX", "PYTHONPATH")}
    return {**env, **extra}


def _freeze(python: Path | str) -> list[str]:
    out = subprocess.run([str(python), "-m", "pip", "freeze", "--all"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return sorted(out.stdout.splitlines())


def test_plan_comes_first_and_names_installs_disk_and_time(tmp_path):
    proc = subprocess.run(["bash", str(SCRIPT), "--plan"], capture_output=True, text=True, timeout=120,
                          env=_env(PYTHON=sys.executable, ADVISOR_TEST_VENV=str(tmp_path / "venv")))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout + proc.stderr
    assert text.lstrip().startswith("== plan"), text[:300]
    for words in ("project venv", str(tmp_path / "venv"), "not changed", "vLLM CPU venv", "Arctic Inference", "GB",
                  "disk", "min"):  # fmt: skip
        assert words in text, (words, text)
    assert not (tmp_path / "venv").exists()  # --plan installs nothing


@pytest.mark.slow
def test_a_system_interpreters_packages_stay_as_they_were(tmp_path):
    """A scratch interpreter (not an active venv) stands for the system's: test.sh's install step leaves its
    `pip freeze` as it was, and the machine's own interpreter's too (it upgraded packages there before)."""
    scratch = tmp_path / "scratch"
    subprocess.run([sys.executable, "-m", "venv", str(scratch)], check=True, timeout=300)
    py = scratch / "bin" / "python"
    before, before_host = _freeze(py), _freeze(sys.executable)
    project = tmp_path / "project-venv"
    proc = subprocess.run(["bash", str(SCRIPT), "--install-only"], capture_output=True, text=True, timeout=900,
                          env=_env(PYTHON=str(py), ADVISOR_TEST_VENV=str(project)))  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert _freeze(py) == before
    assert _freeze(sys.executable) == before_host
    got = subprocess.run([str(project / "bin" / "python"), "-c", "import advisor, pytest; print(advisor.__file__)"],
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert got.returncode == 0 and got.stdout.strip().startswith(str(ROOT)), got
