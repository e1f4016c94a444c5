"""The rendered vllm.service really starts under systemd: a stand-in ``vllm`` that serves /health
is installed with the unit, the start job waits for readiness (ExecStartPost), the server runs as a
dynamic unprivileged user with the hardening in force, and a killed server is restarted.

Needs a machine whose PID 1 is systemd and root (a CI VM, or a container started with systemd as
init); elsewhere it is skipped with the reason. Not run on the development container, whose PID 1
is not systemd."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
import urllib.request
import uuid
from pathlib import Path

import pytest

from advisor.domain.decision import Decision
from advisor.render.files import render_files

STAND_IN = """#!/usr/bin/env python3
import http.server, sys
args = sys.argv[1:]
host, port = args[args.index("--host") + 1], int(args[args.index("--port") + 1])
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/health" else 404); self.end_headers()
    def log_message(self, *a): pass
http.server.HTTPServer((host, port), H).serve_forever()
"""

pytestmark = pytest.mark.skipif(
    not (os.geteuid() == 0 and Path("/run/systemd/system").is_dir() and shutil.which("systemctl")),
    reason="needs root on a machine whose PID 1 is systemd (here PID 1 is not): the unit cannot be booted",
)


def _sh(*argv: str, timeout: float = 120) -> str:
    return subprocess.run(argv, check=True, capture_output=True, text=True, timeout=timeout).stdout.strip()


def _show(unit: str, prop: str) -> str:
    return _sh("systemctl", "show", "-p", prop, "--value", unit)


def test_rendered_unit_boots_is_ready_unprivileged_hardened_and_restarts():
    tag = f"advisor-test-{uuid.uuid4().hex[:8]}"
    root, etc, unit = Path("/opt") / tag, Path("/etc") / tag, f"{tag}.service"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    try:
        root.mkdir(mode=0o755)
        (root / "vllm").write_text(STAND_IN)
        (root / "vllm").chmod(0o755)
        d = Decision(tensor_parallel_size=1, gpu_memory_utilization=0.85)
        files = render_files("org/model", d, vllm_bin=str(root / "vllm"), env_file=str(etc / "vllm.env"), unit_name=unit, port=port)
        etc.mkdir(mode=0o755)
        (etc / "vllm.env").write_text(files["vllm.env"])
        (etc / "vllm.env").chmod(0o600)
        Path(f"/run/systemd/system/{unit}").write_text(files["vllm.service"])
        _sh("systemctl", "daemon-reload")
        _sh("systemctl", "start", unit, timeout=180)  # returns once ExecStartPost saw /health 200
        assert _show(unit, "ActiveState") == "active"
        assert urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5).status == 200
        pid = int(_show(unit, "MainPID"))
        uid = int(Path(f"/proc/{pid}/status").read_text().split("Uid:")[1].split()[0])
        assert uid != 0 and _show(unit, "DynamicUser") == "yes"
        assert _show(unit, "NoNewPrivileges") == "yes" and _show(unit, "ProtectSystem") == "strict"
        assert _show(unit, "PrivateTmp") == "yes" and _show(unit, "CapabilityBoundingSet") == ""
        os.kill(pid, 9)
        deadline = time.monotonic() + 90  # RestartSec=30
        while time.monotonic() < deadline and not (_show(unit, "NRestarts") != "0" and _show(unit, "ActiveState") == "active"):
            time.sleep(1)
        assert _show(unit, "NRestarts") != "0" and _show(unit, "ActiveState") == "active"
        assert int(_show(unit, "MainPID")) != pid
    finally:
        subprocess.run(["systemctl", "stop", unit], capture_output=True, timeout=120)
        Path(f"/run/systemd/system/{unit}").unlink(missing_ok=True)
        subprocess.run(["systemctl", "daemon-reload"], capture_output=True, timeout=120)
        shutil.rmtree(root, ignore_errors=True)
        shutil.rmtree(etc, ignore_errors=True)
