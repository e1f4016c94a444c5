"""``python -m advisor.probe.guard ARGV...``: run a probed server so that nothing outlives the advisor.

The advisor starts this guard as the leader of a new session (advisor.probe.server.running_server),
with PR_SET_PDEATHSIG so that Linux sends it SIGTERM when the advisor dies, even by SIGKILL. The
guard runs ARGV in its own process group (the server and whatever the server starts: vLLM's engine
and worker processes) and waits. On SIGTERM/SIGINT/SIGHUP it signals the whole group with SIGTERM,
then SIGKILL after ``ADVISOR_GUARD_STOP_S`` (default 30) seconds. When the server exits by itself,
the guard exits with its status. PR_SET_PDEATHSIG alone only reaches the direct child, so a
grandchild of the server used to survive a killed advisor.

A process the server starts in a session of its own (setsid: out of the group, so no group signal
reaches it) used to outlive the probe (issue 43). The guard is a child subreaper
(PR_SET_CHILD_SUBREAPER): such a process, orphaned when the server exits, becomes the guard's child
rather than init's; on stopping, and when the server exits by itself, the guard signals every
descendant it has (found by parent pid in /proc), inside the group or not, and reaps them.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time


STOP_ENV = "ADVISOR_GUARD_STOP_S"
_STOP_S = [30.0]


def _proc_stat(pid: int) -> tuple[int, int] | None:
    """(parent pid, start time) of ``pid`` from /proc, or None when it is gone or /proc cannot tell."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
        return int(fields[1]), int(fields[19])
    except (OSError, IndexError, ValueError):
        return None


def descendants(root: int) -> dict[int, int]:
    """Every living descendant of ``root`` (pid -> start time, to tell a recycled pid), by parent pid in /proc;
    empty where there is no /proc."""
    children: dict[int, list[tuple[int, int]]] = {}
    try:
        entries = [int(e) for e in os.listdir("/proc") if e.isdigit()]
    except OSError:
        return {}
    for pid in entries:
        st = _proc_stat(pid)
        if st is not None:
            children.setdefault(st[0], []).append((pid, st[1]))
    found: dict[int, int] = {}
    todo = [root]
    while todo:
        for pid, start in children.get(todo.pop(), ()):
            if pid not in found:
                found[pid] = start
                todo.append(pid)
    return found


def signal_all(procs: dict[int, int], sig: int) -> None:
    """Send ``sig`` to each of ``procs`` that is still the same process (same start time)."""
    for pid, start in procs.items():
        st = _proc_stat(pid)
        if st is not None and st[1] == start:
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass


def _reap_until(deadline: float) -> None:
    """Reap children (orphaned descendants included: the guard is their subreaper) until none is left or ``deadline``."""
    while time.monotonic() < deadline:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            time.sleep(0.05)


def _stop_descendants(grace_s: float) -> None:
    """SIGTERM every descendant (in the group or escaped from it by setsid), SIGKILL what is left after ``grace_s``."""
    me = os.getpid()
    signal_all(descendants(me), signal.SIGTERM)
    _reap_until(time.monotonic() + grace_s)
    signal_all(descendants(me), signal.SIGKILL)
    _reap_until(time.monotonic() + 2.0)


def _stop_group(signum: int, _frame) -> None:
    pgid = os.getpgid(0)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the group signal below must not stop the guard first
    escaped = {p: s for p, s in descendants(os.getpid()).items() if _pgid(p) != pgid}
    signal_all(escaped, signal.SIGTERM)
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    deadline = time.monotonic() + _STOP_S[0]
    _reap_until(deadline)  # orphans come to the guard (subreaper) and are reaped here
    signal_all(descendants(os.getpid()), signal.SIGKILL)  # setsid'd ones included
    os.killpg(pgid, signal.SIGKILL)  # the guard included


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None


def _become_subreaper() -> None:
    """PR_SET_CHILD_SUBREAPER: orphaned descendants are re-parented to the guard, not to init."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    pr_set_child_subreaper = 36
    try:
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_child_subreaper, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass


LOG_ENV = "ADVISOR_GUARD_LOG"
"""The server's log file: with it the guard copies the server's stdout+stderr there, capped and rotated."""
LOG_MAX_ENV = "ADVISOR_GUARD_LOG_MAX_BYTES"
MIN_LOG_BYTES = 64 * 1024


class RotatingLog:
    """``path`` written up to ``max_bytes``; then it becomes ``path.1`` (the previous ``.1`` is dropped) and a new
    ``path`` starts. A server that prints without end leaves at most about 2 x ``max_bytes`` (issue 43: a server
    printing 200 MB left a 205 MB log and no room for the measurement)."""

    def __init__(self, path: str, max_bytes: int) -> None:
        self.path, self.max_bytes = path, max(MIN_LOG_BYTES, max_bytes)
        self.fh = open(path, "ab", buffering=0)  # noqa: SIM115 - closed in close()
        self.size = self.fh.seek(0, 2)

    def write(self, data: bytes) -> None:
        if self.size + len(data) > self.max_bytes and self.size:
            self.fh.close()
            os.replace(self.path, self.path + ".1")
            self.fh = open(self.path, "ab", buffering=0)  # noqa: SIM115
            self.fh.write(f"# advisor probe: log rotated at {self.max_bytes:,} bytes; the earlier part is "
                          f"{os.path.basename(self.path)}.1\n".encode())  # fmt: skip
            self.size = self.fh.tell()
        try:
            self.fh.write(data)
            self.size += len(data)
        except OSError:  # a full disk: the server's output is dropped, the server and the measurement go on
            pass

    def close(self) -> None:
        self.fh.close()


def _copy(fd: int, log: RotatingLog) -> None:
    while True:
        try:
            data = os.read(fd, 65536)
        except OSError:
            return
        if not data:
            return
        log.write(data)


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: python -m advisor.probe.guard PROGRAM [ARGS...]", file=sys.stderr)
        return 2
    _become_subreaper()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, _stop_group)
    env = dict(os.environ)
    log_path, max_bytes = env.pop(LOG_ENV, None), env.pop(LOG_MAX_ENV, None)  # never the server's business
    stop_s = env.pop(STOP_ENV, None)
    if stop_s:
        try:
            _STOP_S[0] = max(0.1, float(stop_s))
        except ValueError:
            pass
    try:
        if log_path:
            child = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        else:
            child = subprocess.Popen(argv, env=env)
    except OSError as exc:
        print(f"advisor probe guard: cannot start {argv[0]}: {exc}", file=sys.stderr, flush=True)
        return 127
    copier = None
    if log_path:
        import threading

        log = RotatingLog(log_path, int(max_bytes or 16 * 2**20))
        copier = threading.Thread(target=_copy, args=(child.stdout.fileno(), log), daemon=True)
        copier.start()
    rc = child.wait()
    _stop_descendants(grace_s=min(5.0, _STOP_S[0]))  # what the server left behind (a setsid'd process too)
    if copier is not None:
        copier.join(timeout=2.0)  # a grandchild may hold the pipe open: the guard does not wait for it
    return 128 - rc if rc < 0 else rc  # killed by signal N: 128 + N, as a shell reports it


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
