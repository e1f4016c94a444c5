"""The rendered vllm.service really starts under systemd: a stand-in ``vllm`` that serves /health
is installed with the unit, the start job waits for readiness (ExecStartPost), the server runs as a
dynamic unprivileged user with the hardening in force, and a killed server is restarted.

Where PID 1 is systemd (a CI VM, a container started with systemd as init) the host's systemd runs
the unit. Elsewhere (a container whose PID 1 is not systemd, as the development machine's) the test
boots a systemd of its own in fresh namespaces (issue 43): ``unshare --pid --mount --cgroup
--mount-proc`` with fresh tmpfs on /tmp, /var/tmp, /run, /var/log, /var/lib/systemd and /var/cache
mounted inside before systemd is exec'd (mounts private: nothing reaches the host's), a cgroup
subtree of its own, a minimal target as the only goal, a hard time bound (``timeout -s KILL`` and
unshare's --kill-child: the namespace's init and so every process in it die with it), and only that
process signalled. The host's /tmp is checked to be untouched (an earlier attempt wiped it). Where
neither can be done the test is skipped with one line saying why."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from advisor.domain.decision import Decision
from advisor.render.files import render_files

STAND_IN = """#!/usr/bin/python3
import http.server, sys
args = sys.argv[1:]
host, port = args[args.index("--host") + 1], int(args[args.index("--port") + 1])
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/health" else 404); self.end_headers()
    def log_message(self, *a): pass
http.server.HTTPServer((host, port), H).serve_forever()
"""

SYSTEMD = Path("/lib/systemd/systemd")
BOOT_BOUND_S = 300
"""The namespace's whole life: past it, timeout SIGKILLs unshare and unshare SIGKILLs the namespace's init."""

# Mounted inside the namespace before systemd starts: what systemd and its tmpfiles write at boot lands there.
_INNER = """set -eu
for d in /tmp /var/tmp; do mount -t tmpfs -o mode=1777,size=64m tmpfs "$d"; done
mount -t tmpfs -o mode=755,size=64m tmpfs /run
for d in /var/log /var/lib/systemd /var/cache; do [ -d "$d" ] && mount -t tmpfs -o mode=755,size=64m tmpfs "$d"; done
mkdir -p /run/systemd/system /run/lock /run/advisor-units
mount -t tmpfs -o mode=755 tmpfs /sys/fs/cgroup
if [ "$1" = unified ]; then
    mount -t cgroup2 cgroup2 /sys/fs/cgroup
else
    mkdir /sys/fs/cgroup/systemd /sys/fs/cgroup/unified
    mount -t cgroup -o none,name=systemd cgroup /sys/fs/cgroup/systemd
    mount -t cgroup2 cgroup2 /sys/fs/cgroup/unified
fi
# Only these units exist for this systemd (SYSTEMD_UNIT_PATH without a trailing ':' drops the distribution's): the
# targets a service's default dependencies name, empty, and the unit under test. No udev, sysctl, modules, tmpfiles,
# sysusers or binfmt unit can start, so nothing is done to the host's kernel, devices or /etc.
for t in advisor-boot-test sysinit basic shutdown sockets timers paths local-fs network network-online; do
    printf '[Unit]\\nDescription=%s (empty: advisor unit boot test)\\n' "$t" > "/run/advisor-units/$t.target"
done
printf '[Unit]\\nDescription=System Slice\\nDefaultDependencies=no\\n' > /run/advisor-units/system.slice
exec env container=advisor-test SYSTEMD_UNIT_PATH=/run/advisor-units "$2" --unit=advisor-boot-test.target \\
    --log-target=console --show-status=no
"""


def _cgroup_layout() -> tuple[str, list[Path]] | str:
    """("unified" | "hybrid", the hierarchies a subtree is made in), or why neither."""
    if Path("/sys/fs/cgroup/cgroup.controllers").exists():
        return "unified", [Path("/sys/fs/cgroup")]
    v1, v2 = Path("/sys/fs/cgroup/systemd"), Path("/sys/fs/cgroup/unified")
    if (v1 / "cgroup.procs").exists() and (v2 / "cgroup.controllers").exists():
        return "hybrid", [v1, v2]
    return "no cgroup2 or systemd-named cgroup hierarchy under /sys/fs/cgroup"


def _why_not() -> str | None:
    """None when the test can boot a unit here, else the one line saying why not."""
    if os.geteuid() != 0:
        return "needs root (it installs a unit and boots systemd)"
    if Path("/run/systemd/system").is_dir() and _pid1() == "systemd" and shutil.which("systemctl"):
        return None
    missing = [p for p in ("unshare", "nsenter", "timeout", "systemctl") if not shutil.which(p)]
    if missing or not SYSTEMD.exists():
        return f"PID 1 is not systemd and {', '.join(missing) or SYSTEMD} is missing to boot one in namespaces"
    layout = _cgroup_layout()
    if isinstance(layout, str):
        return f"PID 1 is not systemd and a namespaced one cannot run: {layout}"
    probe = subprocess.run(["unshare", "--pid", "--mount", "--cgroup", "--fork", "--mount-proc", "true"],
                           capture_output=True, text=True, timeout=30)  # fmt: skip
    if probe.returncode != 0:
        return f"PID 1 is not systemd and unshare cannot make pid/mount/cgroup namespaces here: {probe.stderr.strip()[:200]}"
    return None


def _pid1() -> str:
    with contextlib.suppress(OSError):
        return Path("/proc/1/comm").read_text().strip()
    return ""


pytestmark = pytest.mark.skipif(bool(_why_not()), reason=str(_why_not()))


def _sh(*argv: str, timeout: float = 120) -> str:
    return subprocess.run(argv, check=True, capture_output=True, text=True, timeout=timeout).stdout.strip()


class _Systemd:
    """Where the unit runs: ``run`` runs systemctl (or any command) in its view, ``unit_dir`` takes units."""

    def __init__(self, run: Callable[..., str], unit_dir: Path, pid_of: Callable[[int], int]) -> None:
        self.run, self.unit_dir, self.host_pid = run, unit_dir, pid_of

    def show(self, unit: str, prop: str) -> str:
        return self.run("systemctl", "show", "-p", prop, "--value", unit)


@contextlib.contextmanager
def _host_systemd() -> Iterator[_Systemd]:
    yield _Systemd(_sh, Path("/run/systemd/system"), lambda pid: pid)


@contextlib.contextmanager
def _namespaced_systemd(tag: str, log: Path) -> Iterator[_Systemd]:
    layout, hierarchies = _cgroup_layout()  # type: ignore[misc]
    groups = [h / tag for h in hierarchies]
    for g in groups:
        g.mkdir()
    enter = "; ".join(f"echo $$ > {g / 'cgroup.procs'}" for g in groups)
    outer = f"{enter}; exec unshare --cgroup --pid --mount --propagation private --fork --mount-proc --kill-child=SIGKILL " \
            f'/bin/sh -c "$0" advisor-boot-inner {layout} {SYSTEMD}'  # fmt: skip
    with log.open("wb") as out:
        proc = subprocess.Popen(["timeout", "-s", "KILL", str(BOOT_BOUND_S), "/bin/sh", "-c", outer, _INNER],
                                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
    try:
        init = _init_pid(proc, log)

        def run(*argv: str, timeout: float = 120) -> str:
            return _sh("nsenter", "-t", str(init), "-m", "-p", *argv, timeout=timeout)

        deadline = time.monotonic() + 60
        state = ""
        while time.monotonic() < deadline and state not in ("running", "degraded"):
            state = subprocess.run(["nsenter", "-t", str(init), "-m", "-p", "systemctl", "is-system-running"],
                                   capture_output=True, text=True, timeout=30).stdout.strip()  # fmt: skip
            if state not in ("running", "degraded"):
                time.sleep(0.5)
        assert state in ("running", "degraded"), f"the namespaced systemd did not come up ({state}): {log.read_text()[-2000:]}"

        pid_ns = os.readlink(f"/proc/{init}/ns/pid")

        def host_pid(ns_pid: int) -> int:  # MainPID is the namespace's number; /proc here needs the host's
            for entry in Path("/proc").iterdir():
                if entry.name.isdigit():
                    with contextlib.suppress(OSError, IndexError, ValueError):
                        nspid = (entry / "status").read_text().split("NSpid:")[1].split("\n")[0].split()
                        if int(nspid[-1]) == ns_pid and os.readlink(entry / "ns" / "pid") == pid_ns:
                            return int(entry.name)
            raise AssertionError(f"no host pid for namespace pid {ns_pid}")

        yield _Systemd(run, Path(f"/proc/{init}/root/run/advisor-units"), host_pid)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, 9)  # timeout and unshare only (the namespace's init has a session of its own) ...
        proc.wait(timeout=30)  # ... and unshare's --kill-child takes the init, so the whole namespace, with it
        end = time.monotonic() + 15  # the namespace's processes die a moment after its init: then its cgroups go
        while any(g.exists() for g in groups) and time.monotonic() < end:
            for g in groups:
                for sub in sorted((p for p in g.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)) + [g]:
                    with contextlib.suppress(OSError):
                        sub.rmdir()
            time.sleep(0.1)


def _init_pid(proc: subprocess.Popen, log: Path) -> int:
    """The host pid of the namespace's init (systemd): the child of the unshare that ``proc`` became."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"the namespace exited ({proc.returncode}): {log.read_text()[-2000:]}")
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                with contextlib.suppress(OSError):
                    if (entry / "exe").resolve() == SYSTEMD.resolve() and _is_descendant(int(entry.name), proc.pid):
                        return int(entry.name)
        time.sleep(0.1)
    raise AssertionError(f"no systemd started in the namespace: {log.read_text()[-2000:]}")


def _is_descendant(pid: int, ancestor: int) -> bool:
    while pid > 1:
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            return False
        if pid == ancestor:
            return True
    return False


def _tmp_state() -> dict[str, int]:
    return {p.name: p.lstat().st_ino for p in Path("/tmp").iterdir()}


def test_rendered_unit_boots_is_ready_unprivileged_hardened_and_restarts(tmp_path):
    tag = f"advisor-test-{uuid.uuid4().hex[:8]}"
    root, etc, unit = Path("/opt") / tag, Path("/etc") / tag, f"{tag}.service"
    sentinel = Path("/tmp") / f".{tag}-sentinel"
    sentinel.write_text("the host's /tmp")
    before = _tmp_state()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    systemd = _host_systemd() if _pid1() == "systemd" else _namespaced_systemd(tag, tmp_path / "systemd.log")
    try:
        root.mkdir(mode=0o755)
        (root / "vllm").write_text(STAND_IN)
        (root / "vllm").chmod(0o755)
        d = Decision(tensor_parallel_size=1, gpu_memory_utilization=0.85)
        files = render_files("org/model", d, vllm_bin=str(root / "vllm"), env_file=str(etc / "vllm.env"), unit_name=unit, port=port)
        etc.mkdir(mode=0o755)
        (etc / "vllm.env").write_text(files["vllm.env"])
        (etc / "vllm.env").chmod(0o600)
        with systemd as sd:
            try:
                (sd.unit_dir / unit).write_text(files["vllm.service"])
                sd.run("systemctl", "daemon-reload")
                sd.run("systemctl", "start", unit, timeout=180)
                if _pid1() != "systemd":  # the namespaced systemd ran nothing that acts on the host
                    ran = [ln.split()[0] for ln in sd.run("systemctl", "list-units", "--all", "--plain", "--no-legend").splitlines()
                           if len(ln.split()) > 2 and ln.split()[1] != "not-found" and ln.split()[2] != "inactive"]  # fmt: skip
                    assert not [u for u in ran if any(w in u for w in ("udev", "sysctl", "tmpfiles", "modules-load",
                                                                       "sysusers", "binfmt"))], ran  # fmt: skip  # returns once ExecStartPost saw /health 200
                assert sd.show(unit, "ActiveState") == "active"
                assert urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5).status == 200
                pid = sd.host_pid(int(sd.show(unit, "MainPID")))
                uid = int(Path(f"/proc/{pid}/status").read_text().split("Uid:")[1].split()[0])
                assert uid != 0 and sd.show(unit, "DynamicUser") == "yes"
                assert sd.show(unit, "NoNewPrivileges") == "yes" and sd.show(unit, "ProtectSystem") == "strict"
                assert sd.show(unit, "PrivateTmp") == "yes" and sd.show(unit, "CapabilityBoundingSet") == ""
                os.kill(pid, 9)
                deadline = time.monotonic() + 90  # RestartSec=30
                while time.monotonic() < deadline and not (sd.show(unit, "NRestarts") != "0"
                                                           and sd.show(unit, "ActiveState") == "active"):  # fmt: skip
                    time.sleep(1)
                assert sd.show(unit, "NRestarts") != "0" and sd.show(unit, "ActiveState") == "active"
                assert sd.host_pid(int(sd.show(unit, "MainPID"))) != pid
            finally:
                with contextlib.suppress(subprocess.SubprocessError, OSError):
                    sd.run("systemctl", "stop", unit)
                    (sd.unit_dir / unit).unlink(missing_ok=True)
                    sd.run("systemctl", "daemon-reload")
    finally:
        shutil.rmtree(root, ignore_errors=True)
        shutil.rmtree(etc, ignore_errors=True)
        after = _tmp_state()
        intact = sentinel.exists() and sentinel.read_text() == "the host's /tmp"
        sentinel.unlink(missing_ok=True)
    gone = sorted(name for name, ino in before.items() if after.get(name) != ino and name != sentinel.name)
    left = [str(p) for p in (Path("/sys/fs/cgroup") / tag, *Path("/sys/fs/cgroup").glob(f"*/{tag}")) if p.exists()]
    assert not left, f"the namespace's cgroups were left: {left}"
    assert intact and not gone, f"the host's /tmp was touched: sentinel intact {intact}, entries gone or replaced {gone[:20]}"
