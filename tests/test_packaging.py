"""The top-level data folders ship inside the wheel and are found from an installed wheel."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from conftest import REPO


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(REPO)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    return next(out.glob("*.whl"))


@pytest.mark.slow
def test_wheel_contains_data_folders(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    for folder in ("rules", "templates", "calibration", "catalog"):
        assert any(n.startswith(f"advisor/_data/{folder}/") for n in names), folder
    assert "advisor/_data/catalog/models/meta-llama/Llama-3.1-70B/config.json" in names
    assert "advisor/_data/templates/vllm/launch.sh.j2" in names
    assert "advisor/_data/templates/report/report.html.j2" in names  # advisor report's page


@pytest.mark.slow
def test_installed_wheel_finds_its_data(wheel, tmp_path):
    target = tmp_path / "site"
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(wheel)],
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    env = {**os.environ, "PYTHONPATH": str(target), "HF_HUB_OFFLINE": "1"}
    code = "import advisor.paths as p; print(p.data_path('rules'))"
    where = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, check=True)
    assert where.stdout.strip().startswith(str(target))
    run = subprocess.run([sys.executable, "-m", "advisor", "inspect", "meta-llama/Llama-3.1-8B", "--json"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["params_total_b"] > 8
