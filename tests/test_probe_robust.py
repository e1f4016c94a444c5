"""Probe robustness: the listener must be the started server and serve the model; NaN counters;
Ctrl-C without asyncio tracebacks; no grandchild outlives a killed advisor."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from advisor.errors import ProbeError
from advisor.probe import metrics, server
from advisor.probe.server import BootFailure, running_server
from tests.vllm_helpers.procs import sigint_default

FAKE = Path(__file__).parent / "vllm_helpers" / "fake_vllm.py"
ADVISOR = Path(sys.executable).parent / "advisor"


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except (ProcessLookupError, FileNotFoundError):
        return False


class _Impostor(BaseHTTPRequestHandler):
    """Another program on the port: healthy, serves any model."""

    def _json(self, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802
        self._json({"data": [{"id": "good"}]} if self.path == "/v1/models" else {"status": "ok"})

    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self._json({"choices": [{"message": {"content": "hi"}}]})

    def log_message(self, *args) -> None:
        pass


@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="listener check reads /proc")
def test_a_port_taken_by_another_program_is_not_measured(tmp_path, monkeypatch):
    impostor = ThreadingHTTPServer(("127.0.0.1", 0), _Impostor)
    threading.Thread(target=impostor.serve_forever, daemon=True).start()
    try:
        monkeypatch.setattr(server, "free_port", lambda host="127.0.0.1": impostor.server_address[1])  # the race, made certain
        with pytest.raises(BootFailure) as err:
            with running_server([sys.executable, str(FAKE), "--model", "good"], log_path=tmp_path / "l.log", boot_timeout_s=30):
                pass
        assert err.value.failure.code == "port_taken" and str(os.getpid()) in err.value.failure.line
    finally:
        impostor.shutdown()


def test_listener_of_our_server_is_found(tmp_path):
    with running_server([sys.executable, str(FAKE), "--model", "good"], log_path=tmp_path / "l.log", boot_timeout_s=30) as srv:
        port = int(srv.base_url.rsplit(":", 1)[1])
        pids = server.listener_pids(port)
        assert pids and all(os.getsid(p) == srv.process.pid for p in pids)


def test_server_must_serve_the_requested_model(tmp_path):
    with pytest.raises(BootFailure, match="wrong_model|not 'meta-llama/Llama-3.1-8B'"):
        with running_server([sys.executable, str(FAKE), "--model", "other/model"], log_path=tmp_path / "l.log",
                            boot_timeout_s=30, model="meta-llama/Llama-3.1-8B"):  # fmt: skip
            pass
    with running_server([sys.executable, str(FAKE), "--model", "acme/m"], log_path=tmp_path / "k.log",
                        boot_timeout_s=30, model="acme/m") as srv:  # fmt: skip
        assert srv.served_model == "acme/m"


@pytest.mark.parametrize("value", ["NaN", "+Inf", "-3"])
def test_non_finite_counters_are_a_probe_error(value):
    text = f"# TYPE vllm:generation_tokens_total counter\nvllm:generation_tokens_total{{engine=\"0\"}} {value}\n"
    with pytest.raises(ProbeError, match="not a count"):
        metrics.parse(text)


def _start_probe(tmp_path, *extra):
    env = {**os.environ, "FAKE_TOKEN_S": "0.05", "HF_HUB_OFFLINE": "1"}
    return subprocess.Popen([str(ADVISOR), "--data-dir", str(tmp_path / "d"), "probe", "meta-llama/Llama-3.1-8B-Instruct",
                             "--corpus", "sharegpt", "--configs", "vanilla", "--duration", "60",
                             "--server-cmd", f"{sys.executable} {FAKE}", *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            preexec_fn=sigint_default)  # fmt: skip


def _wait_for(proc, needle, timeout=60.0) -> list[str]:
    seen, end = [], time.monotonic() + timeout
    while time.monotonic() < end:
        line = proc.stderr.readline()
        seen.append(line)
        if needle in line:
            return seen
    raise AssertionError("".join(seen))


@pytest.mark.slow
def test_ctrl_c_during_load_prints_no_tracebacks(tmp_path):
    proc = _start_probe(tmp_path)
    try:
        _wait_for(proc, "starting vLLM")
        time.sleep(5)  # booted (0.2 s) and under load
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "Task exception was never retrieved" not in err
    assert "interrupted" in err


_OWNER = """
import sys, time
from pathlib import Path
from advisor.probe.server import running_server
with running_server([sys.executable, sys.argv[1], "--model", "spawner"], log_path=Path(sys.argv[2])) as srv:
    print(srv.process.pid, flush=True)
    time.sleep(600)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux-only")
def test_no_grandchild_outlives_a_killed_advisor(tmp_path):
    log = tmp_path / "o.log"
    owner = subprocess.Popen([sys.executable, "-c", _OWNER, str(FAKE), str(log)], stdout=subprocess.PIPE, text=True)
    try:
        owner.stdout.readline()
        deadline = time.monotonic() + 10
        while "child pid" not in log.read_text() and time.monotonic() < deadline:
            time.sleep(0.05)
        grandchild = int(next(ln for ln in log.read_text().splitlines() if ln.startswith("child pid")).split()[-1])
        assert alive(grandchild)
        owner.send_signal(signal.SIGKILL)  # nothing runs in the owner: no finally, no atexit
        owner.wait()
        deadline = time.monotonic() + 15
        while alive(grandchild) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not alive(grandchild)
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait()
