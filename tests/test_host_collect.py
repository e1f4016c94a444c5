"""collect_host on fake sysfs / etc / proc trees and a fake nvidia-smi; parsers of captured output."""

from __future__ import annotations

import json
import stat
import sys
from pathlib import Path

import pytest

from advisor.hardware.dsa import parse_accel_config
from advisor.hardware.gpu_detect import gpu_name_for_specs, parse_cuda_version, parse_query_gpu
from advisor.hardware.host import (
    HostFingerprint,
    collect_host,
    host_warnings,
    parse_cpuinfo,
    parse_lscpu,
)
from advisor.settings import load_settings

WRITEUP_QUEUES = [f"wq{d}.{q}" for d in (0, 1) for q in range(4)]

H200_QUERY = "0, NVIDIA H200, 143771, 580.159.04, 9.0\n"
"""Captured from a real H200 host: --query-gpu=index,name,memory.total,driver_version,compute_cap
--format=csv,noheader,nounits."""

BANNER = (
    "+-----------------------------------------------------------------------------------------+\n"
    "| NVIDIA-SMI 580.159.04             Driver Version: 580.159.04     CUDA Version: 13.0     |\n"
)

CPUINFO = "".join(
    f"processor\t: {i}\nvendor_id\t: GenuineIntel\nmodel name\t: INTEL(R) XEON(R) PLATINUM 8570\n"
    f"physical id\t: {i // 4}\n\n"
    for i in range(8)
)


# --- fake trees ---------------------------------------------------------------------------------


def make_dsa(
    sysfs: Path,
    *,
    devices: tuple[str, ...] = ("dsa0", "dsa1"),
    queues: int = 4,
    wq_state: str = "enabled",
    dev_state: str = "enabled",
) -> list[str]:
    """Build <sysfs>/bus/dsa/devices like the write-up's host; returns the queue names."""
    bus = sysfs / "bus" / "dsa" / "devices"
    names = []
    for dev in devices:
        number = dev[3:]
        (bus / dev).mkdir(parents=True)
        (bus / dev / "state").write_text(dev_state + "\n")
        for q in range(queues):
            wq = bus / f"wq{number}.{q}"
            wq.mkdir()
            values = {
                "state": wq_state,
                "mode": "shared",
                "size": "16",
                "type": "user",
                "clients": "0",
                "name": f"app{q}",
            }
            for attr, value in values.items():
                (wq / attr).write_text(value + "\n")
            names.append(wq.name)
    return names


def save_config(etc: Path, queues: list[str]) -> Path:
    """Write an accel-config.conf in save-config's format (no state key, enabled queues only)."""
    devices: dict[str, list[dict]] = {}
    for wq in queues:
        devices.setdefault("dsa" + wq[2:].split(".")[0], []).append(
            {
                "dev": wq,
                "mode": "shared",
                "size": 16,
                "group_id": 0,
                "priority": 10,
                "block_on_fault": 1,
                "type": "user",
                "driver_name": "user",
                "name": "app",
                "threshold": 15,
            }
        )
    doc = [
        {
            "dev": dev,
            "read_buffer_limit": 0,
            "groups": [
                {
                    "dev": f"group{dev[3:]}.0",
                    "grouped_workqueues": wqs,
                    "grouped_engines": [{"dev": f"engine{dev[3:]}.0", "group_id": 0}],
                }
            ],
        }
        for dev, wqs in devices.items()
    ]
    path = etc / "accel-config" / "accel-config.conf"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=2))
    return path


@pytest.fixture
def host_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Isolated roots, a bin dir first on PATH (empty: no nvidia-smi, no lscpu), no pynvml."""
    sysfs, etc, proc, bindir = (tmp_path / n for n in ("sys", "etc", "proc", "bin"))
    for d in (sysfs, etc, proc, bindir):
        d.mkdir()
    (proc / "cpuinfo").write_text(CPUINFO)
    monkeypatch.setenv("PATH", str(bindir))
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml -> ImportError
    (tmp_path / "none.toml").write_text("")  # an empty settings file: no ./advisor.toml or ~/.config one is read
    monkeypatch.setenv("ADVISOR_CONFIG", str(tmp_path / "none.toml"))
    monkeypatch.setenv("ADVISOR_SYSFS_ROOT", str(sysfs))
    monkeypatch.setenv("ADVISOR_ETC_ROOT", str(etc))
    return {"sys": sysfs, "etc": etc, "proc": proc, "bin": bindir}


def collect(env: dict, **kw) -> HostFingerprint:
    kw.setdefault("environ", {})
    return collect_host(load_settings(), proc_root=env["proc"], **kw)


def fake_nvidia_smi(bindir: Path, query: str = H200_QUERY, banner: str = BANNER) -> None:
    script = bindir / "nvidia-smi"
    script.write_text(
        '#!/bin/sh\ncase "$1" in\n'
        f"  --query-gpu=*) printf '%s' '{query}' ;;\n"
        f"  *) printf '%s' '{banner}' ;;\nesac\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)


# --- DSA scenarios ------------------------------------------------------------------------------


def test_no_dsa(host_env):
    fp = collect(host_env)
    assert fp.dsa.bus_present is False
    assert fp.dsa.devices == {} and fp.dsa.work_queues == {}
    assert fp.dsa.persisted is None
    assert any("Intel DSA" in m and "absent" in m for m in fp.missing)
    assert not any("DSA" in w for w in host_warnings(fp))


def test_missing_sysfs_root_is_reported(host_env, monkeypatch, tmp_path):
    monkeypatch.setenv("ADVISOR_SYSFS_ROOT", str(tmp_path / "nowhere"))
    fp = collect(host_env)
    assert any(m.startswith("sysfs:") and "not found" in m for m in fp.missing)


def test_dsa_present_queues_disabled(host_env):
    make_dsa(host_env["sys"], wq_state="disabled", dev_state="disabled")
    fp = collect(host_env)
    assert fp.dsa.bus_present and set(fp.dsa.devices) == {"dsa0", "dsa1"}
    assert list(fp.dsa.work_queues) == WRITEUP_QUEUES
    assert fp.dsa.enabled_queues == [] and fp.dsa.enabled_devices == []
    assert fp.dsa.persisted is True  # nothing enabled, nothing to lose
    assert host_warnings(fp) == [
        "no GPUs detected (nvidia-smi: not on PATH; pynvml: not importable): "
        "pass --gpu and --gpus to describe the serving host"
    ]


def test_eight_queues_enabled_like_writeup_host_not_saved(host_env):
    make_dsa(host_env["sys"])
    fp = collect(host_env)
    assert fp.dsa.enabled_queues == WRITEUP_QUEUES
    q = fp.dsa.work_queues["wq1.3"]
    assert (q.device, q.state, q.mode, q.size, q.type, q.clients, q.name) == (
        "dsa1",
        "enabled",
        "shared",
        16,
        "user",
        0,
        "app3",
    )
    assert fp.dsa.config_found is False
    assert fp.dsa.unsaved_queues == WRITEUP_QUEUES
    assert fp.dsa.persisted is False
    dsa_warnings = [w for w in host_warnings(fp) if "DSA" in w]
    assert len(dsa_warnings) == 1
    assert "lost at reboot; run accel-config save-config" in dsa_warnings[0]
    assert "8:" in dsa_warnings[0] and "wq0.0" in dsa_warnings[0]


def test_eight_queues_enabled_and_saved(host_env):
    queues = make_dsa(host_env["sys"])
    save_config(host_env["etc"], queues)
    fp = collect(host_env)
    assert fp.dsa.config_found and fp.dsa.saved_queues == WRITEUP_QUEUES
    assert fp.dsa.unsaved_queues == [] and fp.dsa.persisted is True
    assert not any("DSA" in w or "accel-config" in w for w in host_warnings(fp))


def test_partly_saved_and_saved_but_disabled(host_env):
    queues = make_dsa(host_env["sys"])
    save_config(host_env["etc"], queues[:6] + ["wq0.7"])
    fp = collect(host_env)
    assert fp.dsa.unsaved_queues == ["wq1.2", "wq1.3"]
    assert fp.dsa.saved_not_enabled == ["wq0.7"]
    assert fp.dsa.persisted is False
    text = " ".join(host_warnings(fp))
    assert "wq1.2, wq1.3" in text and "wq0.7" in text


def test_unreadable_accel_config_is_reported(host_env):
    make_dsa(host_env["sys"])
    path = host_env["etc"] / "accel-config" / "accel-config.conf"
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    fp = collect(host_env)
    assert fp.dsa.config_found and fp.dsa.config_error
    assert any(m.startswith("accel-config:") for m in fp.missing)
    assert any("persistence unknown" in w for w in host_warnings(fp))


def test_parse_accel_config_sample_format():
    # Shape of intel/idxd-config contrib/accel-config.conf.sample, plus an ungrouped queue and
    # a queue with an explicit disabled state (as in `accel-config list -i` output).
    doc = [
        {
            "dev": "dsa0",
            "groups": [
                {"dev": "group0.0", "grouped_workqueues": [{"dev": "wq0.0", "mode": "shared"}]},
                {"dev": "group0.1", "grouped_workqueues": [{"dev": "wq0.1", "mode": "dedicated"}]},
                {"dev": "group0.2"},
            ],
            "ungrouped workqueues": [{"dev": "wq0.10"}, {"dev": "wq0.2", "state": "disabled"}],
        }
    ]
    assert parse_accel_config(json.dumps(doc)) == ["wq0.0", "wq0.1", "wq0.10"]
    with pytest.raises(ValueError):
        parse_accel_config('{"dev": "dsa0"}')


# --- GPUs, CPU, env -----------------------------------------------------------------------------


def test_fake_nvidia_smi(host_env):
    fake_nvidia_smi(
        host_env["bin"], query=H200_QUERY * 1 + "1, NVIDIA H200, 143771, 580.159.04, 9.0\n"
    )
    fp = collect(host_env)
    assert fp.gpu_source == "nvidia-smi" and fp.gpu_count == 2
    assert fp.gpus[1].name == "NVIDIA H200" and fp.gpus[1].memory_mib == 143771
    assert fp.gpus[0].driver_version == "580.159.04" and fp.cuda_version == "13.0"
    assert fp.spec_gpu() == "H200"
    assert not any(m.startswith(("GPUs", "nvidia-smi")) for m in fp.missing)


def test_no_gpu_tools(host_env):
    fp = collect(host_env)
    assert fp.gpus == [] and fp.gpu_count == 0
    assert {"nvidia-smi: not on PATH", "pynvml: not importable", "GPUs: none detected"} <= set(
        fp.missing
    )
    assert any(w.startswith("no GPUs detected") for w in host_warnings(fp))


def test_parse_query_gpu_with_units_and_errors():
    fields = ("index", "name", "memory.total", "driver_version")
    gpus = parse_query_gpu("0, NVIDIA H200, 143771 MiB, 580.159.04\n\n", fields)
    assert gpus[0].memory_mib == 143771 and gpus[0].compute_cap is None
    with pytest.raises(ValueError):
        parse_query_gpu("0, NVIDIA H200\n", fields)
    assert parse_cuda_version(BANNER) == "13.0"
    assert parse_cuda_version("CUDA Version                      : 12.8\n") == "12.8"
    assert parse_cuda_version("no banner") is None


@pytest.mark.parametrize(
    ("name", "short"),
    [
        ("NVIDIA H200", "H200"),
        ("NVIDIA H200 NVL", "H200"),
        ("NVIDIA B200", "B200"),
        ("NVIDIA H100 80GB HBM3", "H100"),
        ("NVIDIA H100 PCIe", "H100"),
        ("NVIDIA A100-SXM4-80GB", "A100"),
        ("NVIDIA L40S", "L40S"),
        ("AMD Instinct MI300X", "MI300X"),
        ("NVIDIA L40", None),
        ("NVIDIA GH200 480GB", None),
        ("NVIDIA GB200", None),
        ("NVIDIA RTX A1000", None),
        ("", None),
        (None, None),
    ],
)
def test_gpu_name_for_specs(name, short):
    assert gpu_name_for_specs(name) == short


def test_cpu_parsers(host_env):
    cpu = parse_cpuinfo(CPUINFO)
    assert (cpu.model, cpu.sockets, cpu.threads) == ("INTEL(R) XEON(R) PLATINUM 8570", 2, 8)
    lscpu = "CPU(s):   224\nModel name:   Intel(R) Xeon(R) Platinum 8570\nSocket(s):   2\n"
    assert parse_lscpu(lscpu).model_dump() == {
        "model": "Intel(R) Xeon(R) Platinum 8570",
        "sockets": 2,
        "threads": 224,
    }
    fp = collect(host_env)
    assert fp.cpu.sockets == 2 and fp.cpu.threads == 8


def test_env_capture_redacts_secrets_and_keeps_relevant(host_env):
    environ = {
        "VLLM_LHC_DSA": "1",
        "VLLM_API_KEY": "sk-123",
        "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
        "ARCTIC_INFERENCE_ENABLED": "0",
        "VLLM_PLUGINS": "",
        "HOME": "/root",
        "HF_TOKEN": "hf_x",
    }
    fp = collect(host_env, environ=environ, cudagraph_mode="full_and_piecewise")
    assert fp.env == {
        "ARCTIC_INFERENCE_ENABLED": "0",
        "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
        "VLLM_API_KEY": "<redacted>",
        "VLLM_LHC_DSA": "1",
        "VLLM_PLUGINS": "",
    }
    assert fp.cudagraph_mode == "FULL_AND_PIECEWISE"
    assert "sk-123" not in fp.model_dump_json()


def test_json_round_trip_keeps_fingerprint(host_env):
    save_config(host_env["etc"], make_dsa(host_env["sys"]))
    fp = collect(host_env, environ={"VLLM_LHC_DSA": "1"})
    data = json.loads(fp.model_dump_json())
    assert data["dsa"]["work_queues"]["wq0.0"]["state"] == "enabled"
    assert data["dsa"]["persisted"] is True
    again = HostFingerprint.model_validate(data)
    assert again.fingerprint == fp.fingerprint == data["fingerprint"]
    assert len(fp.fingerprint) == 64 and all(c in "0123456789abcdef" for c in fp.fingerprint)


def test_fingerprint_ignores_hostname_time_and_clients(host_env):
    make_dsa(host_env["sys"])
    a = collect(host_env)
    (host_env["sys"] / "bus/dsa/devices/wq0.0/clients").write_text("3\n")
    b = collect(host_env).model_copy(update={"hostname": "other", "collected_at": "2030-01-01"})
    assert b.dsa.work_queues["wq0.0"].clients == 3
    assert a.fingerprint == b.fingerprint


def test_fingerprint_changes_with_enabled_queue_set(host_env):
    make_dsa(host_env["sys"])
    a = collect(host_env)
    (host_env["sys"] / "bus/dsa/devices/wq1.3/state").write_text("disabled\n")
    b = collect(host_env)
    assert a.fingerprint != b.fingerprint


def test_unreadable_wq_is_reported_not_fatal(host_env):
    make_dsa(host_env["sys"], devices=("dsa0",), queues=2)
    state = host_env["sys"] / "bus/dsa/devices/wq0.0/state"
    state.unlink()
    state.mkdir()  # reading it raises IsADirectoryError, even as root
    fp = collect(host_env)
    assert any("wq0.0" in m and "unreadable" in m for m in fp.missing)
    assert list(fp.dsa.work_queues) == ["wq0.1"]


def test_secrets_are_redacted_whatever_their_case_or_shape():
    """Issue 43 item 9: VLLM_PASSWD, VLLM_AUTH_HEADER, VLLM_DB_URL and lower-case names were shown."""
    from advisor.hardware.fingerprint import REDACTED, relevant_env

    env = {"VLLM_PASSWD": "p", "VLLM_AUTH_HEADER": "Bearer x", "VLLM_DB_URL": "postgres://u:p@h/db", "vllm_api_key": "k",
           "VLLM_ATTENTION_BACKEND": "FLASH_ATTN"}  # fmt: skip
    got = relevant_env(env)
    assert {k for k, v in got.items() if v == REDACTED} >= {"VLLM_PASSWD", "VLLM_AUTH_HEADER", "VLLM_DB_URL"}
    assert got.get("VLLM_ATTENTION_BACKEND") == "FLASH_ATTN"
    assert got.get("vllm_api_key") in (None, REDACTED)
