"""scripts/install_arctic.sh builds Arctic Inference from an activated virtualenv (issue 13).

CMake's FindPython prefers $VIRTUAL_ENV over PATH; the build venv has nanobind, the activated one
does not ("No module named nanobind"). This builds the wheel for real (pip cache off, an empty wheel
cache) into a fresh target venv while another venv without nanobind is "activated".
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.slow
@pytest.mark.e2e
def test_builds_from_an_activated_venv(tmp_path):
    target, active = tmp_path / "target", tmp_path / "active"
    for venv in (target, active):
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "CMAKE"))}
    env.update(VIRTUAL_ENV=str(active), PATH=f"{active / 'bin'}:{env['PATH']}", PYTHON=str(target / "bin" / "python"),
               PIP_NO_CACHE_DIR="1", ADVISOR_WHEEL_CACHE=str(tmp_path / "wheels"), TMPDIR=str(tmp_path))  # fmt: skip
    run = subprocess.run([str(REPO / "scripts" / "install_arctic.sh")], env=env, capture_output=True, text=True, timeout=1800)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-4000:]
    assert "ready: arctic-inference" in run.stdout
    check = subprocess.run([str(target / "bin" / "python"), "-c", "from arctic_inference.suffix_decoding import SuffixDecodingCache"],
                           capture_output=True, text=True)  # fmt: skip
    assert check.returncode == 0, check.stderr
