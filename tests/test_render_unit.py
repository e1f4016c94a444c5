"""The production systemd unit: `systemd-analyze verify` accepts it, `systemd-analyze security`
rates it <= 5.0 ("OK"), it keeps the settings a service needs (unprivileged user, cache
directories, restart limits, GPU device nodes reachable), and its readiness check really waits
for /health (run against a stand-in vLLM server on 127.0.0.1)."""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from advisor.domain.decision import Decision
from advisor.render.files import render_files
from tests.render_helpers import unit as sd
from tests.render_helpers.fakebin import make_fake

HELPERS = Path(__file__).parent / "vllm_helpers"
DECISION = Decision(speculative_method="suffix", num_speculative_tokens=16, gpu_memory_utilization=0.85,
                    tensor_parallel_size=8, env={"VLLM_PLUGINS": "", "HF_TOKEN": "hf_x"})  # fmt: skip
needs_systemd = pytest.mark.skipif(not shutil.which("systemd-analyze"), reason="systemd-analyze not installed (apt-get install systemd)")
MAX_EXPOSURE = 5.0


def _unit(tmp_path: Path, **kw) -> Path:
    fake = make_fake(tmp_path / "bin")
    path = tmp_path / "vllm.service"
    path.write_text(render_files("meta-llama/Llama-3.1-70B-Instruct", DECISION, vllm_bin=str(fake), **kw)["vllm.service"])
    return path


def exposure(unit: Path) -> float:
    proc = subprocess.run(["systemd-analyze", "security", "--offline=true", "--no-pager", str(unit)],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    found = re.search(r"Overall exposure level for \S+: (\d+\.\d+)", proc.stdout + proc.stderr)
    assert found, proc.stdout[-2000:] + proc.stderr[-2000:]
    return float(found.group(1))


@needs_systemd
def test_unit_passes_systemd_analyze_verify(tmp_path):
    unit = _unit(tmp_path)
    proc = subprocess.run(["systemd-analyze", "verify", "--man=no", str(unit)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "vllm.service" not in proc.stderr, proc.stderr


@needs_systemd
@pytest.mark.parametrize("model", ["meta-llama/Llama-3.1-70B-Instruct", "/home/ops/models/llama"])
def test_unit_exposure_is_ok(tmp_path, model):
    unit = tmp_path / "vllm.service"
    unit.write_text(render_files(model, DECISION, vllm_bin=str(make_fake(tmp_path / "bin")))["vllm.service"])
    score = exposure(unit)
    print(f"systemd-analyze security exposure for {model}: {score}")
    assert score <= MAX_EXPOSURE


@needs_systemd
def test_exposure_check_sees_a_weak_unit(tmp_path):
    """The score is real: the same unit without its hardening block rates far worse."""
    unit = _unit(tmp_path)
    text = unit.read_text()
    weak = text[: text.index("NoNewPrivileges=")] + text[text.index("[Install]") :]
    weak = weak.replace("DynamicUser=yes\n", "")
    unit.write_text(weak)
    assert exposure(unit) > 8.0


def test_unit_has_what_a_service_needs(tmp_path):
    d = {(s, k): v for s, k, v in sd.directives(_unit(tmp_path).read_text())}
    assert d[("Service", "DynamicUser")] == "yes" and ("Service", "User") not in d
    assert d[("Service", "CacheDirectory")] == "vllm" and d[("Service", "StateDirectory")] == "vllm"
    assert "HF_HOME=%C/vllm/huggingface" in d[("Service", "Environment")]
    assert d[("Service", "Restart")] == "on-failure"
    assert int(d[("Unit", "StartLimitBurst")]) >= 1 and int(d[("Unit", "StartLimitIntervalSec")]) > 3 * int(d[("Service", "RestartSec")])
    assert int(d[("Service", "TimeoutStartSec")]) >= 1800
    assert d[("Service", "EnvironmentFile")] == "/etc/vllm/vllm.env"
    assert ("Service", "PrivateDevices") not in d and ("Service", "DevicePolicy") not in d  # /dev/nvidia* reachable
    assert ("Service", "MemoryDenyWriteExecute") not in d  # torch / Triton JIT need W+X pages
    assert d[("Service", "ProtectSystem")] == "strict" and d[("Service", "NoNewPrivileges")] == "yes"
    assert d[("Service", "PrivateTmp")] == "yes" and d[("Service", "ProtectHome")] == "yes"
    assert "hf_x" not in _unit(tmp_path).read_text()


def test_a_model_under_home_keeps_home_readable(tmp_path):
    unit = render_files("/home/ops/models/llama", DECISION, vllm_bin="/opt/vllm/bin/vllm")["vllm.service"]
    assert sd.one(unit, "ProtectHome") == "read-only"
    assert sd.exec_argv(sd.one(unit, "ExecStart"))[2] == "/home/ops/models/llama"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ready_cmd(port: int) -> list[str]:
    unit = render_files("m/x", DECISION, vllm_bin="/opt/vllm/bin/vllm", port=port)["vllm.service"]
    return sd.exec_argv(sd.one(unit, "ExecStartPost"))


def test_readiness_check_waits_for_health(tmp_path):
    port = _free_port()
    ready = subprocess.Popen(_ready_cmd(port), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        time.sleep(1.5)
        assert ready.poll() is None, "readiness returned before anything listened"
        server = subprocess.Popen([sys.executable, str(HELPERS / "fake_vllm.py"), "--model", "m", "--host", "127.0.0.1",
                                   "--port", str(port)], env={"FAKE_BOOT_S": "2", "PATH": "/usr/bin:/bin"},
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        try:
            t0 = time.monotonic()
            assert ready.wait(timeout=60) == 0
            assert time.monotonic() - t0 >= 1.0  # it waited for /health to turn 200, not just for the port
        finally:
            server.terminate()
            server.wait(timeout=10)
    finally:
        if ready.poll() is None:
            ready.kill()
