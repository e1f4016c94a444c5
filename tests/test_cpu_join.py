"""calibration/gpu_real/cpu_join.py on the committed sixth campaign: the committed loads.csv is what it writes, and
the spread figures the README and docs/CHANGELOG.md quote are what it prints (a published number from a command)."""

from __future__ import annotations

import csv
import importlib.util
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CAMPAIGN = ROOT / "calibration" / "gpu_real" / "h200-vllm0.26.0"


def _cpu_join():
    spec = importlib.util.spec_from_file_location("cpu_join", ROOT / "calibration" / "gpu_real" / "cpu_join.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_committed_loads_csv_and_the_quoted_spread_are_the_scripts_output(tmp_path, capsys):
    store = tmp_path / "store6"
    shutil.copytree(CAMPAIGN / "store6", store)
    (store / "loads.csv").unlink()
    folders = [str(CAMPAIGN / f"smol-j{i}") for i in range(1, 9)]
    assert _cpu_join().main([str(store), *folders]) == 0
    out = capsys.readouterr().out
    made = list(csv.DictReader((store / "loads.csv").open()))
    committed = list(csv.DictReader((CAMPAIGN / "store6" / "loads.csv").open()))
    assert made == committed and len(made) == 80
    # every load bound by one core (the EngineCore's CPU seconds over the load's seconds)
    assert all(0.95 <= float(r["engine_busy"]) <= 1.05 for r in made)
    # the figures docs quote: vanilla's spread mostly per boot and explained by the loop; suffix's less so
    assert "vanilla: 40 loads in 8 boots; sd ln(step) around each slice's median 0.197: per boot 0.175, within a boot 0.090" in out
    assert "ln(step) on ln(loop): slope 0.70, R^2 0.64" in out
    assert "suffix:32: 40 loads in 8 boots; sd ln(step) around each slice's median 0.196: per boot 0.120, within a boot 0.155" in out
    assert "suffix:32 humaneval:c32:40: gain median x0.90, range x0.60-1.32 over 8 passes" in out
