"""``advisor host`` and ``advisor host diff`` through the real CLI entry point."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from importlib.util import find_spec
from pathlib import Path

import pytest

import advisor
from advisor.cli.app import main

REPO = Path(advisor.__file__).resolve().parents[1]
NO_GPU_TOOLS = shutil.which("nvidia-smi") is None and find_spec("pynvml") is None


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No user config, no stray data dir; the real /sys and /etc unless a test says otherwise."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "none.toml").write_text("")  # an empty settings file: no ./advisor.toml or ~/.config one is read
    monkeypatch.setenv("ADVISOR_CONFIG", str(tmp_path / "none.toml"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    for var in ("ADVISOR_SYSFS_ROOT", "ADVISOR_ETC_ROOT"):
        monkeypatch.delenv(var, raising=False)


def make_writeup_dsa(sysfs: Path, state: str = "enabled") -> None:
    bus = sysfs / "bus" / "dsa" / "devices"
    for d in (0, 1):
        (bus / f"dsa{d}").mkdir(parents=True)
        (bus / f"dsa{d}" / "state").write_text("enabled\n")
        for q in range(4):
            wq = bus / f"wq{d}.{q}"
            wq.mkdir()
            for attr, value in {
                "state": state,
                "mode": "shared",
                "size": "16",
                "type": "user",
                "clients": "0",
                "name": "",
            }.items():
                (wq / attr).write_text(value + "\n")


def run_json(capsys, argv: list[str]) -> tuple[int, dict]:
    code = main(argv)
    out = capsys.readouterr().out
    return code, json.loads(out)


def test_this_machine_json_report(capsys):
    code, data = run_json(capsys, ["host", "--json"])
    assert code == 0
    assert len(data["fingerprint"]) == 64
    assert data["gpu_count"] == len(data["gpus"])
    assert isinstance(data["missing"], list)
    if NO_GPU_TOOLS:
        assert data["gpus"] == []
        assert "GPUs: none detected" in data["missing"]
        assert "nvidia-smi: not on PATH" in data["missing"]
    if not Path("/sys/bus/dsa/devices").is_dir():
        assert data["dsa"]["work_queues"] == {} and data["dsa"]["persisted"] is None
        assert any(m.startswith("Intel DSA") for m in data["missing"])


def test_this_machine_table_via_subprocess():
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run(
        [sys.executable, "-m", "advisor", "host"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "fingerprint" in proc.stdout and "Intel DSA" in proc.stdout
    assert "Traceback" not in proc.stderr
    if NO_GPU_TOOLS:
        assert re.search(r"GPUs\s+none detected", proc.stdout)
        assert "missing: GPUs: none detected" in proc.stdout
        assert "warning: no GPUs detected" in proc.stdout


def test_fake_tree_json_names_queues_and_persistence(capsys, tmp_path, monkeypatch):
    sysfs, etc = tmp_path / "sys", tmp_path / "etc"
    make_writeup_dsa(sysfs)
    etc.mkdir()
    monkeypatch.setenv("ADVISOR_SYSFS_ROOT", str(sysfs))
    monkeypatch.setenv("ADVISOR_ETC_ROOT", str(etc))
    code, data = run_json(capsys, ["host", "--json", "--cudagraph-mode", "full_and_piecewise"])
    assert code == 0
    wq = data["dsa"]["work_queues"]["wq1.3"]
    assert wq == {
        "device": "dsa1",
        "state": "enabled",
        "mode": "shared",
        "size": 16,
        "type": "user",
        "clients": 0,
        "name": None,
    }
    assert data["dsa"]["persisted"] is False and len(data["dsa"]["unsaved_queues"]) == 8
    assert data["cudagraph_mode"] == "FULL_AND_PIECEWISE"
    # the readable table says the same, and warns
    assert main(["host", "--sysfs-root", str(sysfs), "--etc-root", str(etc)]) == 0
    text = capsys.readouterr().out
    assert "DSA work queues" in text and "wq0.0" in text
    assert "enabled set persists: NO" in text
    assert "lost at reboot; run accel-config save-config" in text


def test_bad_cudagraph_mode_is_a_usage_error(capsys):
    assert main(["host", "--cudagraph-mode", "SOMETIMES"]) == 2
    assert "FULL_AND_PIECEWISE" in capsys.readouterr().err


def test_save_then_diff_exit_codes(capsys, tmp_path, monkeypatch):
    sysfs, etc = tmp_path / "sys", tmp_path / "etc"
    make_writeup_dsa(sysfs, state="disabled")
    etc.mkdir()
    monkeypatch.setenv("ADVISOR_ETC_ROOT", str(etc))
    monkeypatch.setenv("ADVISOR_SYSFS_ROOT", str(sysfs))
    off, off2, on = tmp_path / "out" / "off.json", tmp_path / "off2.json", tmp_path / "on.json"
    assert main(["host", "--json", "--save", str(off)]) == 0
    capsys.readouterr()
    assert main(["host", "--save", str(off2)]) == 0
    assert f"saved: {off2}" in capsys.readouterr().out
    assert not list(off.parent.glob(".*.tmp"))  # atomic write left no temporary behind
    for wq in (sysfs / "bus/dsa/devices").glob("wq*"):
        (wq / "state").write_text("enabled\n")
    assert main(["host", "--json", "--save", str(on)]) == 0
    capsys.readouterr()

    assert main(["host", "diff", str(off), str(off2)]) == 0
    assert "comparable: same fingerprint" in capsys.readouterr().out

    code, data = run_json(capsys, ["host", "diff", str(off), str(on), "--json"])
    assert code == 1 and data["comparable"] is False
    blocking = {d["field"] for d in data["differences"] if not d["comparable"]}
    assert "dsa.wq.wq0.0.state" in blocking

    assert main(["host", "diff", str(off), str(on)]) == 1
    assert "NOT comparable" in capsys.readouterr().out


def test_diff_bad_files(capsys, tmp_path):
    good = tmp_path / "good.json"
    assert main(["host", "--json", "--save", str(good)]) == 0
    capsys.readouterr()
    assert main(["host", "diff", str(good), str(tmp_path / "absent.json")]) == 2
    assert capsys.readouterr().err.startswith("error: cannot read")
    bad = tmp_path / "bad.json"
    bad.write_text('{"gpus": "many"}')
    assert main(["host", "diff", str(good), str(bad)]) == 5
    assert "not a host fingerprint" in capsys.readouterr().err
    notjson = tmp_path / "x.json"
    notjson.write_text("nope")
    assert main(["host", "diff", str(notjson), str(good)]) == 5


def test_diff_reads_probe_record_with_host(capsys, tmp_path):
    good = tmp_path / "good.json"
    assert main(["host", "--json", "--save", str(good)]) == 0
    capsys.readouterr()
    record = tmp_path / "record.json"
    record.write_text(json.dumps({"config": "vanilla", "host": json.loads(good.read_text())}))
    assert main(["host", "diff", str(good), str(record)]) == 0


def test_help_documents_exit_codes(capsys):
    assert main(["host", "diff", "--help"]) == 0
    out = capsys.readouterr().out
    assert "0  comparable" in out and "1  not comparable" in out
