"""``python -m advisor.probe.guard ARGV...``: run a probed server so that nothing outlives the advisor.

The advisor starts this guard as the leader of a new session (advisor.probe.server.running_server),
with PR_SET_PDEATHSIG so that Linux sends it SIGTERM when the advisor dies, even by SIGKILL. The
guard runs ARGV in its own process group (the server and whatever the server starts: vLLM's engine
and worker processes) and waits. On SIGTERM/SIGINT/SIGHUP it signals the whole group with SIGTERM,
then SIGKILL after ``ADVISOR_GUARD_STOP_S`` (default 30) seconds. When the server exits by itself,
the guard exits with its status. PR_SET_PDEATHSIG alone only reaches the direct child, so a
grandchild of the server used to survive a killed advisor.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time


def _stop_group(signum: int, _frame) -> None:
    pgid = os.getpgid(0)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the group signal below must not stop the guard first
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    deadline = time.monotonic() + float(os.environ.get("ADVISOR_GUARD_STOP_S", "30"))
    while time.monotonic() < deadline:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break  # no child of ours left; grandchildren re-parented to init get the SIGKILL below
        if pid == 0:
            time.sleep(0.1)
    os.killpg(pgid, signal.SIGKILL)  # the guard included


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: python -m advisor.probe.guard PROGRAM [ARGS...]", file=sys.stderr)
        return 2
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, _stop_group)
    try:
        child = subprocess.Popen(argv)
    except OSError as exc:
        print(f"advisor probe guard: cannot start {argv[0]}: {exc}", file=sys.stderr, flush=True)
        return 127
    rc = child.wait()
    return 128 - rc if rc < 0 else rc  # killed by signal N: 128 + N, as a shell reports it


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
