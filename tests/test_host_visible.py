"""CUDA_VISIBLE_DEVICES: which detected GPUs a server started here would see, and recommend using it."""

from __future__ import annotations

import json
import stat
import sys
from pathlib import Path

import pytest

from advisor.hardware.gpu_detect import GpuInfo, visible_gpus

EIGHT = [GpuInfo(index=i, name="NVIDIA H200") for i in range(8)]


@pytest.mark.parametrize(
    ("value", "indices"),
    [
        (None, list(range(8))),
        ("0,1,2,3", [0, 1, 2, 3]),
        ("6, 7", [6, 7]),
        ("", []),
        ("-1", []),
        ("1,9,2", [1]),  # CUDA stops at the first entry that names no device
        ("2,2", [2]),  # a repeated device ends the list too
        ("3,x,4", [3]),
        ("GPU-8f3c,GPU-11aa", [0, 1]),  # UUIDs: the count is taken as given
    ],
)
def test_visible_gpus(value, indices):
    chosen, note = visible_gpus(EIGHT, value)
    assert [g.index for g in chosen] == indices
    assert (note is None) == (value is None)
    if note:
        assert f"{len(indices)} of 8 GPUs visible" in note


@pytest.fixture
def fake_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    rows = "".join(f"{i}, NVIDIA H200, 143771, 580.159.04, 9.0\n" for i in range(8))
    script = bindir / "nvidia-smi"
    script.write_text(f"#!/bin/sh\ncase \"$1\" in\n  --query-gpu=*) printf '%s' '{rows}' ;;\n  *) echo 'CUDA Version: 13.0' ;;\nesac\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bindir}:{Path(sys.executable).parent}")
    monkeypatch.setitem(sys.modules, "pynvml", None)
    return bindir


def test_recommend_sizes_for_the_visible_gpus(fake_smi, run_cli, monkeypatch):
    code, out, err = run_cli("recommend", "meta-llama/Llama-3.1-70B-Instruct", "--json")
    assert code == 0, err
    rec = json.loads(out)
    d = rec["decision"]
    # the layout uses every visible GPU (TP x DP: the search may replicate)
    assert rec["host"]["gpu"] == "H200" and rec["host"]["gpus"] == 8 and d["tensor_parallel_size"] * d["data_parallel_size"] == 8
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5,6,7")
    code, out, err = run_cli("recommend", "meta-llama/Llama-3.1-70B-Instruct", "--json")
    rec = json.loads(out)
    d = rec["decision"]
    assert rec["host"]["gpus"] == 4 and d["tensor_parallel_size"] * d["data_parallel_size"] == 4
    assert any("CUDA_VISIBLE_DEVICES='4,5,6,7': 4 of 8 GPUs visible" in w for w in rec["warnings"])
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    code, out, err = run_cli("recommend", "meta-llama/Llama-3.1-70B-Instruct", "--json")
    rec = json.loads(out)
    assert rec["host"]["origin"].startswith("default") and any("no GPU detected" in w for w in rec["warnings"])
