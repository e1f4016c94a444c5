"""The online path against a real HTTP server on 127.0.0.1 speaking the hub's resolve protocol.

huggingface_hub reads HF_ENDPOINT at import, so each case runs the real ``advisor`` entry point in
a fresh interpreter with HF_ENDPOINT pointing at the local server.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.conftest import CATALOG

CONFIG = (CATALOG / "meta-llama" / "Llama-3.1-8B-Instruct" / "config.json").read_bytes()
COMMIT = "0123456789abcdef0123456789abcdef01234567"


class Hub(BaseHTTPRequestHandler):
    requests: list[str] = []

    def _answer(self, body: bool) -> None:
        Hub.requests.append(f"{self.command} {self.path}")
        if self.path.startswith("/acme/gated/"):
            self.send_response(401)
            self.send_header("X-Error-Code", "GatedRepo")
            self.end_headers()
            return
        if self.path != "/acme/llama-copy/resolve/main/config.json":
            self.send_response(404)
            self.send_header("X-Error-Code", "EntryNotFound")
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(CONFIG)))
        self.send_header("ETag", f'"{hashlib.sha256(CONFIG).hexdigest()}"')
        self.send_header("X-Repo-Commit", COMMIT)
        self.end_headers()
        if body:
            self.wfile.write(CONFIG)

    def do_HEAD(self):  # noqa: N802
        self._answer(body=False)

    def do_GET(self):  # noqa: N802
        self._answer(body=True)

    def log_message(self, *args):
        pass


@pytest.fixture
def hub():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Hub)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    Hub.requests = []
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def advisor(endpoint: str, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, HF_ENDPOINT=endpoint, HF_HUB_OFFLINE="0", HF_HUB_DISABLE_TELEMETRY="1")
    code = "import sys; from advisor.cli.app import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, timeout=60)


def test_downloads_config_from_the_hub_and_caches_it(hub):
    proc = advisor(hub, "inspect", "acme/llama-copy", "--json")
    assert proc.returncode == 0, proc.stderr
    profile = json.loads(proc.stdout)
    assert profile["id"] == "acme/llama-copy"
    assert profile["num_layers"] == 32 and profile["arch"] == "dense"
    cached = Path(os.environ["HF_HOME"]) / "hub" / "models--acme--llama-copy" / "snapshots" / COMMIT / "config.json"
    assert cached.read_bytes() == CONFIG
    assert any(r.startswith("GET /acme/llama-copy/resolve/main/config.json") for r in Hub.requests)
    # the second run is served from the HF cache without touching the server
    Hub.requests = []
    again = advisor(hub, "inspect", "acme/llama-copy", "--json")
    assert again.returncode == 0 and json.loads(again.stdout)["num_layers"] == 32
    assert Hub.requests == []


def test_missing_and_gated_models_are_clean_errors(hub):
    missing = advisor(hub, "inspect", "acme/nope")
    assert missing.returncode != 0
    assert "acme/nope: the hub answered 404" in missing.stderr and "Traceback" not in missing.stderr
    gated = advisor(hub, "inspect", "acme/gated")
    assert "the hub answered 401 (gated or private" in gated.stderr and "Traceback" not in gated.stderr


def test_unreachable_hub_fails_fast_without_retries():
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    start = time.monotonic()
    proc = advisor(f"http://127.0.0.1:{port}", "recommend", "acme/unreachable")
    elapsed = time.monotonic() - start
    assert proc.returncode != 0
    assert "the hub is unreachable" in proc.stderr and "Retrying" not in proc.stderr
    assert elapsed < 10, f"took {elapsed:.1f}s: the download path is retrying a dead network"
