"""The server harness and the load generator against a small real HTTP server on 127.0.0.1
(tests/vllm_helpers/fake_vllm.py, a separate process): health + warm-up, fast failure when the
process exits, boot timeout, kill after the stop timeout, process-group reaping, bounded load."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import httpx
import pytest

from advisor.errors import UsageError
from advisor.probe.corpus import Prompt
from advisor.probe.load import LoadSpec, mean_in_flight, percentile, run_load
from advisor.probe.server import BootFailure, running_server, stop_process_group

FAKE = Path(__file__).parent / "vllm_helpers" / "fake_vllm.py"


def fake_argv(kind: str, *flags: str) -> list[str]:
    return [sys.executable, str(FAKE), "--model", kind, *flags]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); it is dead for our purposes.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except FileNotFoundError:
        return False


def test_boot_waits_for_health_and_warmup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_BOOT_S", "1.0")
    log = tmp_path / "logs" / "ok.log"
    with running_server(fake_argv("good"), log_path=log, boot_timeout_s=30) as srv:
        assert srv.boot_s >= 1.0
        assert srv.base_url.startswith("http://127.0.0.1:")
        assert srv.argv[-4:-2] == ["--host", "127.0.0.1"]
        assert srv.served_model == "good" and srv.api == "chat"
        stats = httpx.get(f"{srv.base_url}/stats", trust_env=False).json()
        assert stats["requests"] == 1  # the warm-up
        pid = srv.process.pid
    assert not alive(pid)
    text = log.read_text()
    assert text.startswith("# advisor probe: ") and "fake vLLM good" in text


def test_warmup_falls_back_to_completions(tmp_path: Path) -> None:
    with running_server(fake_argv("nochat"), log_path=tmp_path / "l.log", boot_timeout_s=30) as srv:
        assert srv.api == "completions"


def test_process_exit_fails_fast_with_recognised_cause(tmp_path: Path) -> None:
    t0 = time.monotonic()
    with pytest.raises(BootFailure) as err:
        with running_server(fake_argv("broken"), log_path=tmp_path / "b.log", boot_timeout_s=120):
            pytest.fail("must not yield")
    assert time.monotonic() - t0 < 10
    assert err.value.outcome == "boot_failed"
    assert err.value.failure.code == "no_kv_blocks"
    assert "b.log" in str(err.value)


def test_missing_program_is_a_failed_boot(tmp_path: Path) -> None:
    with pytest.raises(BootFailure) as err:
        with running_server(["/nonexistent/vllm", "serve"], log_path=tmp_path / "x.log"):
            pass
    assert err.value.failure.code == "not_startable"


def test_boot_timeout(tmp_path: Path) -> None:
    t0 = time.monotonic()
    with pytest.raises(BootFailure) as err:
        with running_server(fake_argv("hang"), log_path=tmp_path / "h.log", boot_timeout_s=2):
            pass
    assert err.value.outcome == "timeout"
    assert 2 <= time.monotonic() - t0 < 15


def test_warmup_failure(tmp_path: Path) -> None:
    with pytest.raises(BootFailure) as err:
        with running_server(fake_argv("nowarm"), log_path=tmp_path / "w.log", boot_timeout_s=30):
            pass
    assert err.value.failure.code == "warmup_failed"
    assert "HTTP 500" in err.value.failure.line


def test_stubborn_server_is_killed_after_stop_timeout(tmp_path: Path) -> None:
    t0 = time.monotonic()
    with running_server(fake_argv("stubborn"), log_path=tmp_path / "s.log", stop_timeout_s=1.5) as srv:
        pid = srv.process.pid
        t0 = time.monotonic()
    assert 1.4 <= time.monotonic() - t0 < 10
    assert not alive(pid)
    assert srv.process.returncode == -9
    assert "ignoring SIGTERM" in (tmp_path / "s.log").read_text()


def test_children_are_stopped_with_the_group(tmp_path: Path) -> None:
    log = tmp_path / "c.log"
    with running_server(fake_argv("spawner"), log_path=log) as srv:
        child = int(next(line for line in log.read_text().splitlines() if line.startswith("child pid")).split()[-1])
        assert alive(child)
        assert os.getpgid(child) == srv.process.pid
    deadline = time.monotonic() + 5
    while alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(child)


def test_interrupt_inside_the_block_still_stops_the_server(tmp_path: Path) -> None:
    with pytest.raises(KeyboardInterrupt):
        with running_server(fake_argv("good"), log_path=tmp_path / "k.log") as srv:
            pid = srv.process.pid
            raise KeyboardInterrupt
    assert not alive(pid)


_OWNER = """
import sys, time
from pathlib import Path
from advisor.probe.server import running_server
with running_server([sys.executable, sys.argv[1], "--model", "good"], log_path=Path(sys.argv[2])) as srv:
    print(srv.process.pid, flush=True)
    time.sleep(600)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux-only")
def test_server_dies_with_a_killed_advisor(tmp_path: Path) -> None:
    import signal
    import subprocess

    owner = subprocess.Popen([sys.executable, "-c", _OWNER, str(FAKE), str(tmp_path / "o.log")],
                             stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        server_pid = int(owner.stdout.readline())
        assert alive(server_pid)
        owner.send_signal(signal.SIGKILL)  # no finally block runs in the owner
        owner.wait()
        deadline = time.monotonic() + 10
        while alive(server_pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not alive(server_pid)
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait()


def test_stop_process_group_on_exited_process(tmp_path: Path) -> None:
    import subprocess

    proc = subprocess.Popen([sys.executable, "-c", "pass"], start_new_session=True)
    proc.wait()
    stop_process_group(proc, timeout_s=1)  # nothing left: must return at once, no error
    assert proc.returncode == 0


# --- load generator ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def fake_server(tmp_path_factory: pytest.TempPathFactory):
    os.environ["FAKE_TOKEN_S"] = "0.005"
    try:
        log = tmp_path_factory.mktemp("fake") / "srv.log"
        with running_server(fake_argv("good"), log_path=log) as srv:
            yield srv
    finally:
        os.environ.pop("FAKE_TOKEN_S", None)


def _stats(srv) -> dict:
    return httpx.get(f"{srv.base_url}/stats", trust_env=False).json()


def test_load_bounded_by_request_count_and_concurrency(fake_server) -> None:
    before = _stats(fake_server)
    prompts = [Prompt(f"prompt {i}") for i in range(100)]
    spec = LoadSpec(concurrency=3, duration_s=30, max_requests=12, max_tokens=8)
    res = run_load(fake_server.base_url, "good", "chat", prompts, spec)
    after = _stats(fake_server)
    assert res.requests_ok == 12 and res.requests_failed == 0 and res.requests_cut == 0
    assert after["requests"] - before["requests"] == 12
    assert after["max_inflight"] <= 3
    assert res.output_tokens == 12 * 8
    assert res.ttft_ms_p50 is not None and res.ttft_ms_p50 <= res.ttft_ms_p99
    assert res.itl_ms_p50 is not None and res.itl_ms_p50 > 0
    # Little's law over the client's own timings: three workers kept busy, never more than three in flight
    inflight = mean_in_flight(res)
    assert inflight is not None and 1.5 < inflight <= 3.0, inflight
    assert not res.corpus_exhausted


def test_load_cut_at_duration(fake_server) -> None:
    prompts = [Prompt(f"p{i}") for i in range(10_000)]
    spec = LoadSpec(concurrency=4, duration_s=1.0, max_tokens=16)  # ~0.08 s per request
    t0 = time.monotonic()
    res = run_load(fake_server.base_url, "good", "completions", prompts, spec)
    assert time.monotonic() - t0 < 5
    assert 5 <= res.requests_ok < 200
    assert res.requests_cut <= 4
    assert 0.9 <= res.elapsed_s < 3


def test_load_stops_at_corpus_end_and_counts_rejections(fake_server) -> None:
    prompts = [Prompt("a"), Prompt("TOO LONG"), Prompt("b", [{"role": "user", "content": "b"}])]
    res = run_load(fake_server.base_url, "good", "chat", prompts, LoadSpec(concurrency=2, duration_s=30, max_tokens=4))
    assert (res.requests_ok, res.requests_rejected, res.requests_failed) == (2, 1, 0)
    assert res.corpus_exhausted


def test_load_refuses_non_loopback_targets() -> None:
    with pytest.raises(UsageError, match="loopback"):
        run_load("http://10.0.0.1:8000", "m", "chat", [Prompt("x")], LoadSpec(duration_s=1))


def test_load_errors_when_server_is_gone() -> None:
    from advisor.probe.server import free_port

    url = f"http://127.0.0.1:{free_port()}"
    res = run_load(url, "m", "chat", [Prompt(str(i)) for i in range(5)], LoadSpec(concurrency=2, duration_s=5))
    assert res.requests_ok == 0 and res.requests_failed == 5
    assert res.errors and "ConnectError" in res.errors[0]


def test_percentile_matches_numpy_default() -> None:
    import numpy as np

    xs = [5.0, 1.0, 9.0, 3.0, 7.0, 2.0]
    for q in (0, 10, 50, 90, 99, 100):
        assert percentile(xs, q) == pytest.approx(float(np.percentile(xs, q)))
    assert percentile([], 50) is None
