"""A real vLLM server for one probe: start, wait until it serves, stop and reap.

``running_server(argv, log_path=...)`` appends ``--host 127.0.0.1 --port P`` (a free port it picks)
to ``argv``, starts it in its own process group with stdout+stderr going to ``log_path``, and waits
for ``/health`` 200 **and** a warm-up completion (``/health`` answers before the engine can serve).
It fails fast with :class:`BootFailure` when the process exits, the boot deadline passes or the
warm-up fails, naming the cause found in the log (:mod:`advisor.probe.failures`). On leaving the
block the whole process group gets SIGTERM, SIGKILL after ``stop_timeout_s``, and is reaped. On
Linux the server also gets SIGTERM if the advisor process itself dies (PR_SET_PDEATHSIG).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from advisor.domain.secrets import redacted_argv
from advisor.errors import ProbeError, printable
from advisor.probe.failures import Failure, classify, read_tail

HOST = "127.0.0.1"
WARMUP_PROMPT = "Hello, my name is"


class BootFailure(ProbeError):
    """The server did not come up (or died). ``outcome`` is a ProbeRecord outcome."""

    def __init__(self, outcome: str, failure: Failure, log_path: Path | None = None) -> None:
        where = f" (log: {log_path})" if log_path else ""
        super().__init__(f"vLLM server {outcome.replace('_', ' ')}: {failure}{where}")
        self.outcome = outcome
        self.failure = failure
        self.log_path = log_path


@dataclass
class Server:
    """A running, warmed-up server."""

    argv: list[str]
    """The exact command, host and port included."""
    base_url: str
    served_model: str
    """The model id the server answers to (first entry of /v1/models)."""
    api: str
    """``chat`` or ``completions``: what the warm-up found to work."""
    process: subprocess.Popen
    log_path: Path
    boot_s: float
    headers: dict[str, str] = field(default_factory=dict, repr=False)
    """What every /v1 request carries: ``Authorization: Bearer KEY`` when the server requires an API key
    (:func:`server_api_key`); never printed."""

    def check_alive(self, grace_s: float = 0.0) -> None:
        """Raise BootFailure('crashed') if the server process has exited (or exits within ``grace_s``:
        the guard in front of it exits a moment after the server)."""
        if grace_s > 0:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=grace_s)
        rc = self.process.poll()
        if rc is not None:
            failure = classify(read_tail(self.log_path)) or Failure("exited", f"exit status {rc}")
            raise BootFailure("crashed", failure, self.log_path)


def server_api_key(argv: list[str], env: Mapping[str, str]) -> str | None:
    """The API key a vLLM server started with ``argv`` and ``env`` requires on its /v1 routes, or None: vLLM's
    ``--api-key`` (it wins; any of its values is accepted), else ``VLLM_API_KEY`` (vLLM 0.33.0
    vllm/entrypoints/serve/middleware/register.py and authenticate.py: 401 without ``Authorization: Bearer KEY``).
    A probe run with VLLM_API_KEY exported failed every configuration as boot_failed (issue 43)."""
    for i, arg in enumerate(argv):
        if arg.startswith("--api-key="):
            return arg.split("=", 1)[1] or None
        if arg == "--api-key" and i + 1 < len(argv) and not argv[i + 1].startswith("--"):
            return argv[i + 1]
    return env.get("VLLM_API_KEY") or None


def free_port(host: str = HOST) -> int:
    """A TCP port that was free on ``host`` a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def listener_pids(port: int, host: str = HOST) -> set[int] | None:
    """Pids holding a TCP socket that listens on ``port`` (from /proc/net/tcp and /proc/PID/fd), or
    None where /proc cannot tell (not Linux). Another user's processes are not visible: they are
    not ours either."""
    inodes: set[str] = set()
    try:
        lines = Path("/proc/net/tcp").read_text().splitlines()[1:]
    except OSError:
        return None
    for extra in ("/proc/net/tcp6",):
        with contextlib.suppress(OSError):
            lines += Path(extra).read_text().splitlines()[1:]
    for line in lines:
        parts = line.split()
        if len(parts) > 9 and parts[3] == "0A" and int(parts[1].rsplit(":", 1)[1], 16) == port:  # 0A = LISTEN
            inodes.add(parts[9])
    pids: set[int] = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            for fd in (entry / "fd").iterdir():
                with contextlib.suppress(OSError):
                    link = os.readlink(fd)
                    if link.startswith("socket:[") and link[8:-1] in inodes:
                        pids.add(int(entry.name))
                        break
    return pids


def _check_listener(port: int, session: int, log_path: Path) -> None:
    """The process answering on ``port`` must be the server we started (its session), not another
    program that took the port between free_port() and the server's bind."""
    pids = listener_pids(port)
    if pids is None:
        return
    ours = set()
    for pid in pids:
        with contextlib.suppress(OSError):
            if os.getsid(pid) == session:
                ours.add(pid)
    if not ours:
        who = ", ".join(str(p) for p in sorted(pids)) or "a process not visible to this user"
        raise BootFailure("boot_failed", Failure("port_taken", f"{HOST}:{port} answers /health but is held by "
                          f"pid {who}, not the server this probe started"), log_path)  # fmt: skip


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """Ask Linux to SIGTERM the server when the advisor process dies, even by SIGKILL, so that a
    crashed campaign leaves no server holding GPU memory (vLLM's engine processes follow their parent)."""
    import ctypes

    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, int(signal.SIGTERM))


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # a recycled id owned by someone else: not ours any more
        return False
    return True


def stop_process_group(proc: subprocess.Popen, timeout_s: float = 30.0) -> None:
    """SIGTERM the process group led by ``proc``; SIGKILL what is left after ``timeout_s``; reap ``proc``.
    Descendants that left the group (setsid) are stopped by the guard; any the guard left (it was killed
    first) get SIGKILL here, as found before the stop."""
    from advisor.probe.guard import descendants, signal_all

    pgid = proc.pid  # started with start_new_session=True: the leader's pid is the group id
    tree = descendants(proc.pid)
    if proc.poll() is None or _group_alive(pgid):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None and not _group_alive(pgid):
            break
        time.sleep(0.1)
    if _group_alive(pgid):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)
    proc.wait()
    # Children the leader left behind are re-parented to init, which reaps them once killed.
    end = time.monotonic() + 5.0
    while _group_alive(pgid) and time.monotonic() < end:
        time.sleep(0.05)
    signal_all(tree, signal.SIGKILL)  # only those still the same processes (start time)


def _wait_healthy(client, proc: subprocess.Popen, base_url: str, log_path: Path, deadline: float) -> None:
    import httpx

    while True:
        rc = proc.poll()
        if rc is not None:
            failure = classify(read_tail(log_path)) or Failure("exited", f"exit status {rc} before /health")
            raise BootFailure("boot_failed", failure, log_path)
        if time.monotonic() > deadline:
            raise BootFailure("timeout", Failure("boot_timeout", "no /health 200 before the boot deadline"), log_path)
        try:
            if client.get(f"{base_url}/health", timeout=5.0).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.5)


def served_names(doc: object, base_url: str) -> tuple[str, set[str]]:
    """(first served id, every id and root) from a ``/v1/models`` answer; ProbeError when it is not
    the OpenAI shape ``{"data": [{"id": "…"}, …]}`` with string ids."""
    data = doc.get("data") if isinstance(doc, dict) else None
    if not isinstance(data, list) or not data or not all(isinstance(m, dict) and isinstance(m.get("id"), str) for m in data):
        raise ProbeError(f"{base_url}/v1/models is not an OpenAI model list with string ids: {printable(str(doc)[:200])}")
    names = {m["id"] for m in data} | {m["root"] for m in data if isinstance(m.get("root"), str)}
    return data[0]["id"], names


def _warm_up(client, base_url: str, model: str, api: str, deadline: float | None = None, log_path: Path | None = None) -> str:
    """Send one short request; returns the API that works (``auto`` tries chat, then completions).
    Every try ends by ``deadline`` (the boot deadline): a server that never answers is a timeout."""
    import httpx

    tries = ["chat", "completions"] if api == "auto" else [api]
    errors = []
    for kind in tries:
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            raise BootFailure("timeout", Failure("warmup_timeout", "the warm-up request got no answer before the boot deadline "
                              "(--boot-timeout): " + "; ".join(errors)), log_path)  # fmt: skip
        if kind == "chat":
            url = f"{base_url}/v1/chat/completions"
            body = {"model": model, "messages": [{"role": "user", "content": WARMUP_PROMPT}], "max_tokens": 4}
        else:
            url = f"{base_url}/v1/completions"
            body = {"model": model, "prompt": WARMUP_PROMPT, "max_tokens": 4}
        try:
            cap = client.timeout.read or left
            resp = client.post(url, json=body, **({} if left is None else {"timeout": httpx.Timeout(min(left, cap or left))}))
        except httpx.TimeoutException as exc:
            errors.append(f"{kind}: {type(exc).__name__}: {exc}")
            if deadline is not None and time.monotonic() >= deadline:
                raise BootFailure("timeout", Failure("warmup_timeout", "the warm-up request got no answer before the boot "
                                  "deadline (--boot-timeout)"), log_path) from None  # fmt: skip
            continue
        except httpx.TransportError as exc:
            errors.append(f"{kind}: {type(exc).__name__}: {exc}")
            continue
        if resp.status_code == 200:
            return kind
        errors.append(f"{kind}: HTTP {resp.status_code} {resp.text[:200]}")
    raise ProbeError("; ".join(errors))


LOG_MAX_BYTES = 16 * 2**20
"""A server log is rotated past this (advisor.probe.guard.RotatingLog: the log and one ``.1``, about 32 MiB in all)."""


@contextlib.contextmanager
def running_server(
    argv: list[str],
    *,
    log_path: Path,
    env: Mapping[str, str] | None = None,
    boot_timeout_s: float = 900.0,
    stop_timeout_s: float = 30.0,
    api: str = "auto",
    request_timeout_s: float = 300.0,
    model: str | None = None,
) -> Iterator[Server]:
    """Start ``argv`` + host/port under :mod:`advisor.probe.guard`, wait until it serves, check that
    the listener is that process and (with ``model``) that /v1/models serves it, yield a
    :class:`Server`, then stop it."""
    import shutil

    import httpx

    if not argv or shutil.which(argv[0]) is None:
        raise BootFailure("boot_failed", Failure("not_startable", f"{argv[0] if argv else '(empty command)'}: "
                          "no such program"), log_path)  # fmt: skip
    port = free_port()
    full = [*argv, "--host", HOST, "--port", str(port)]
    base_url = f"http://{HOST}:{port}"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    from advisor.probe.guard import LOG_ENV, LOG_MAX_ENV, STOP_ENV

    # the guard caps and rotates the log, and stops the server (and what escaped its group) within our stop timeout
    proc_env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {}), LOG_ENV: str(log_path), LOG_MAX_ENV: str(LOG_MAX_BYTES),
                STOP_ENV: f"{max(0.1, stop_timeout_s * 0.8):g}"}  # fmt: skip
    t0 = time.monotonic()
    with log_path.open("ab") as log:
        log.write(f"# advisor probe: {' '.join(redacted_argv(full))}\n".encode())
        log.flush()
        try:
            proc = subprocess.Popen(
                [sys.executable, "-m", "advisor.probe.guard", *full], stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env=proc_env, start_new_session=True,
                preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
            )  # fmt: skip
        except OSError as exc:
            raise BootFailure("boot_failed", Failure("not_startable", f"{full[0]}: {exc}"), log_path) from None
    key = server_api_key(full, proc_env)
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    try:
        # trust_env=False: a proxy from the environment must never see loopback traffic.
        with httpx.Client(timeout=request_timeout_s, trust_env=False, headers=headers) as client:
            _wait_healthy(client, proc, base_url, log_path, t0 + boot_timeout_s)
            _check_listener(port, proc.pid, log_path)
            deadline = t0 + boot_timeout_s
            try:
                left = max(0.1, deadline - time.monotonic())
                answer = client.get(f"{base_url}/v1/models", timeout=min(left, 30.0))
                if answer.status_code in (401, 403):
                    sent = ("sent the key from " + ("--api-key" if any(a.startswith("--api-key") for a in full) else "VLLM_API_KEY")
                            + " and it was refused") if key else "had no key to send"  # fmt: skip
                    raise BootFailure("boot_failed", Failure("unauthorized", f"{base_url}/v1/models answers HTTP "
                                      f"{answer.status_code}: the server requires an API key; the probe {sent}: give the "
                                      "server's key as VLLM_API_KEY or --api-key in --extra-args"), log_path)  # fmt: skip
                served, names = served_names(answer.json(), base_url)
                if model is not None and model not in names and not any(
                        n and Path(model).name == Path(str(n)).name for n in names):  # fmt: skip
                    raise BootFailure("boot_failed", Failure("wrong_model", f"/v1/models at {base_url} serves "
                                      f"{sorted(n for n in names if n)}, not {model!r}"), log_path)  # fmt: skip
                kind = _warm_up(client, base_url, served, api, deadline, log_path)
            except BootFailure:
                raise
            except (httpx.HTTPError, ValueError, KeyError, IndexError, TypeError, AttributeError, RecursionError, ProbeError) as exc:
                failure = classify(read_tail(log_path)) if proc.poll() is not None else None
                raise BootFailure("boot_failed", failure or Failure("warmup_failed", printable(str(exc)[:300])), log_path) from None
        yield Server(full, base_url, served, kind, proc, log_path, time.monotonic() - t0, headers)
    finally:
        stop_process_group(proc, stop_timeout_s)
