"""What the host's CPU did during one probe load: how busy the server's engine and the load client were, and how
fast one core ran.

The fifth and sixth H200 campaigns (calibration/gpu_real/README.md) found SmolLM2-135M's vLLM engine process busy
94-100 % of one core in all 88 loads, vanilla and suffix alike, with the GPU 8-60 % used and its clock fixed at
1,980 MHz: on that host a step is bound by one CPU core, not by the GPU. The VM's single-thread speed drifted x1.7
over 25 minutes (a fixed loop's median 12.9-21.4 ms per boot); the vanilla step followed it (correlation 0.80 with
the loop timed on every core in turn, 0.64 with the probe's own loop then, unpinned; pinning the server to 8 cores
changed nothing), the suffix step less (0.54: it has noise of its own). So every load records, on any host:

- ``engine_cpu_busy``: CPU seconds of the server's busiest process (the EngineCore, where one exists) over the
  load's seconds, read from /proc (Linux; None elsewhere). At ``ENGINE_BOUND`` or more the steps are host-bound.
- ``client_cpu_busy``: the same for this process, the load client. At ``CLIENT_BOUND`` or more the client may
  be what limits throughput, and the figure is a lower bound.
- ``host_loop_ms``: the median time of a fixed pure-Python loop (``LOOP_N`` additions in a function), timed every
  ``SAMPLE_EVERY_S`` by a separate process on each allowed core in turn (``calibration/gpu_real/cpu_timeline.py``'s
  loop, the one the step followed): the single-thread speed the load ran at;
  ``host_loop_cpu_ms`` the CPU time of the same loops. Wall above CPU time means the loop waited for a core (the
  host's cores busy); both up means the cores ran slower.

:func:`cpu_notes` turns these into the warnings ``advisor probe`` prints; nothing here changes a measurement.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

ENGINE_BOUND = 0.9
"""Busy share of one core at which the server's busiest process bounds the step (campaign 5: 0.94-1.00)."""
CLIENT_BOUND = 0.8
"""Busy share at which the load client itself may bound the throughput it measures (campaign 5: 0.79-0.89 at
vanilla ShareGPT c64, 14,600 tok/s)."""
SPEED_MOVED = 1.25
"""Ratio of two loads' ``host_loop_ms`` beyond which their throughputs are not comparable when the engine is
host-bound (campaign 5's boots: x1.8 between a vanilla and a suffix load of the same prompts)."""
CONTENDED = 1.2
"""Wall over CPU time of the fixed loop at which it waited for a core (the host's cores busy), rather than ran slow."""
LOOP_N = 400_000
"""Additions in one timed loop: ``cpu_timeline.py``'s (about 16 ms on the H200 VM's cores)."""
SAMPLE_EVERY_S = 0.5
"""Seconds between two timed loops: about 3 % of one core."""

# On each allowed core in turn (the host's speed, not one core's: campaign 6's unpinned loop tracked the step less),
# in a function (fast locals: a module-level loop times dictionary stores as well).
_SAMPLER = f"""
import os, sys, time
def work(n):
    t, c = time.perf_counter(), time.thread_time(); s = 0
    for i in range(n): s += i
    return (time.perf_counter() - t) * 1e3, (time.thread_time() - c) * 1e3
cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
k = 0
while True:
    if cores:
        try: os.sched_setaffinity(0, {{cores[k % len(cores)]}})
        except OSError: cores = []
    core = cores[k % len(cores)] if cores else -1
    k += 1
    sys.stdout.write("%.4f %.4f %d\\n" % (*work({LOOP_N}), core))
    sys.stdout.flush()
    time.sleep({SAMPLE_EVERY_S})
"""


@dataclass(frozen=True)
class CpuWindow:
    """The CPU facts of one load (None where not measurable here)."""

    engine_cpu_busy: float | None = None
    client_cpu_busy: float | None = None
    host_loop_ms: float | None = None
    host_loop_cpu_ms: float | None = None


def tree_cpu(root: int, proc: Path = Path("/proc")) -> dict[int, tuple[str, float, int]]:
    """CPU seconds (user + system) so far of process ``root`` and every process below it, by pid: (name, seconds,
    the core it last ran on). Empty where /proc is not there or ``root`` is gone."""
    try:
        tick = os.sysconf("SC_CLK_TCK")
        entries = [d for d in proc.iterdir() if d.name.isdigit()]
    except (OSError, ValueError, AttributeError):
        return {}
    kids: dict[int, list[int]] = {}
    stats: dict[int, tuple[str, float, int]] = {}
    for d in entries:
        try:
            raw = (d / "stat").read_text()
            name = raw[raw.index("(") + 1 : raw.rindex(")")]
            rest = raw[raw.rindex(")") + 2 :].split()  # rest[0] is field 3 (state): ppid 4, utime 14, stime 15, cpu 39
            ppid, seconds, core = int(rest[1]), (int(rest[11]) + int(rest[12])) / tick, int(rest[36])
        except (OSError, ValueError, IndexError):
            continue
        stats[int(d.name)] = (name, seconds, core)
        kids.setdefault(ppid, []).append(int(d.name))
    out: dict[int, tuple[str, float, int]] = {}
    todo = [root]
    while todo:
        pid = todo.pop()
        if pid in stats and pid not in out:
            out[pid] = stats[pid]
            todo.extend(kids.get(pid, []))
    return out


def busiest(before: dict[int, tuple], after: dict[int, tuple], seconds: float) -> float | None:
    """The largest share of one core any process present in both snapshots (of :func:`tree_cpu`) used over
    ``seconds``."""
    if seconds <= 0:
        return None
    shares = [(after[pid][1] - b[1]) / seconds for pid, b in before.items() if pid in after]
    return round(max(shares), 3) if shares else None


class _Sampler:
    """A child process timing ``LOOP_N`` additions every ``SAMPLE_EVERY_S`` (its own process: a thread here would
    share the load client's interpreter lock and slow both)."""

    def __init__(self) -> None:
        self.cores: set[int] = set()  # the cores the loop ran on (after stop; none where affinity is not settable)
        try:
            # -I: a bare interpreter (no user site, no PYTHON* variables), so that the loop times the CPU only
            self.proc: subprocess.Popen | None = subprocess.Popen(
                [sys.executable, "-I", "-c", _SAMPLER], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
            )
        except OSError:
            self.proc = None

    def stop(self) -> tuple[float | None, float | None]:
        """Stop it; the median loop time in ms, wall and CPU (None, None with no sample)."""
        if self.proc is None:
            return None, None
        self.proc.terminate()
        try:
            out, _ = self.proc.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, _ = self.proc.communicate()
        wall, cpu = [], []
        for line in (out or "").splitlines():
            try:
                w, c, core = (f(x) for f, x in zip((float, float, int), line.split(), strict=True))
            except ValueError:
                continue
            if core >= 0:
                self.cores.add(core)
            wall.append(w)
            cpu.append(c)
        if not wall:
            return None, None
        return round(statistics.median(wall), 3), round(statistics.median(cpu), 3) or None


@contextmanager
def watch(server_pid: int | None) -> Iterator[list[CpuWindow]]:
    """Measure the CPU over the ``with`` block (one load): yields a list that holds one :class:`CpuWindow` after it."""
    result: list[CpuWindow] = []
    sampler = _Sampler()
    srv0 = tree_cpu(server_pid) if server_pid else {}
    own0, t0 = os.times(), time.monotonic()
    try:
        yield result
    finally:
        seconds = time.monotonic() - t0
        srv1 = tree_cpu(server_pid) if server_pid else {}
        own1 = os.times()
        loop_ms, loop_cpu_ms = sampler.stop()
        client = round((own1.user + own1.system - own0.user - own0.system) / seconds, 3) if seconds > 0 else None
        result.append(CpuWindow(engine_cpu_busy=busiest(srv0, srv1, seconds), client_cpu_busy=client, host_loop_ms=loop_ms,
                                host_loop_cpu_ms=loop_cpu_ms))  # fmt: skip


def cpu_notes(rec, vanilla=None) -> list[str]:
    """Warnings about one probe record's CPU facts (``rec``, and the campaign's vanilla record ``vanilla`` to compare
    the single-thread speed with): empty when nothing is worth saying."""
    notes = []
    # on a CPU backend (no GPU) the engine computes on the CPU: busy is expected there and says nothing of host work
    bound = rec.gpu is not None and rec.engine_cpu_busy is not None and rec.engine_cpu_busy >= ENGINE_BOUND
    if bound:
        notes.append(f"the server's busiest process used {rec.engine_cpu_busy:.0%} of a core: this host's steps are "
                     "CPU-bound, so its throughput moves with the CPU's single-thread speed")  # fmt: skip
    if rec.client_cpu_busy is not None and rec.client_cpu_busy >= CLIENT_BOUND:
        notes.append(f"the load client used {rec.client_cpu_busy:.0%} of a core: it may limit what it measures "
                     "(throughput is a lower bound); a lower --concurrency or a faster host CPU measures the server")  # fmt: skip
    if (bound and vanilla is not None and vanilla is not rec and rec.host_loop_ms and vanilla.host_loop_ms):
        ratio = rec.host_loop_ms / vanilla.host_loop_ms
        if max(ratio, 1 / ratio) >= SPEED_MOVED:
            slower = "slower" if ratio > 1 else "faster"
            why = ""
            if rec.host_loop_cpu_ms and vanilla.host_loop_cpu_ms:  # wall / CPU > 1: the loop waited for a core
                waits = (rec.host_loop_ms / rec.host_loop_cpu_ms, vanilla.host_loop_ms / vanilla.host_loop_cpu_ms)
                why = (f"; the loop's wall time was x{waits[0]:.2f} its CPU time, against x{waits[1]:.2f}: "
                       + ("the cores were contended" if max(waits) >= CONTENDED else "the cores themselves ran at "
                          "another speed"))  # fmt: skip
            notes.append(f"the host's single-thread speed was x{max(ratio, 1 / ratio):.2f} {slower} than during the "
                         f"vanilla load ({rec.host_loop_ms:.1f} against {vanilla.host_loop_ms:.1f} ms per fixed loop"
                         f"{why}): with the engine CPU-bound the gain may mix the method with the host's speed; rerun "
                         "with --repeat 3")  # fmt: skip
    return notes


def summary(records) -> dict | None:
    """What the host CPU did over ``records`` (the ok loads that carry the facts; None when none does):
    ``{"loads", "engine_bound", "client_bound", "loop_ms": {"min", "median", "max"} | None}``."""
    ok = [r for r in records if r.outcome == "ok" and (r.engine_cpu_busy is not None or r.host_loop_ms is not None)]
    if not ok:
        return None
    loops = sorted(r.host_loop_ms for r in ok if r.host_loop_ms)
    return {
        "loads": len(ok),
        "engine_bound": sum(1 for r in ok if r.gpu is not None and (r.engine_cpu_busy or 0) >= ENGINE_BOUND),
        "client_bound": sum(1 for r in ok if (r.client_cpu_busy or 0) >= CLIENT_BOUND),
        "loop_ms": {"min": loops[0], "median": round(statistics.median(loops), 3), "max": loops[-1]} if loops else None,
    }


def summary_text(s: dict) -> str:
    """One line of :func:`summary` for ``advisor calibrate``."""
    parts = [f"host CPU over {s['loads']} probe load(s): engine CPU-bound (>= {ENGINE_BOUND:.0%} of a core, GPU "
             f"hosts) in {s['engine_bound']}, load client >= {CLIENT_BOUND:.0%} in {s['client_bound']}"]  # fmt: skip
    if s["loop_ms"]:
        lm = s["loop_ms"]
        spread = lm["max"] / lm["min"]
        parts.append(f"single-thread loop {lm['min']:.1f}-{lm['max']:.1f} ms (median {lm['median']:.1f}"
                     + (f"; x{spread:.2f} apart: where the engine is CPU-bound, repeat probes with --repeat 3)"
                        if s["engine_bound"] and spread >= SPEED_MOVED else ")"))  # fmt: skip
    return "; ".join(parts)
