#!/usr/bin/env python3
"""Sample this machine's single-thread speed over time, one core at a time, while a campaign runs.

Campaign 4 found a speculative step's cost varying x1.5-2 between fresh boots of the same load on the
H200 VM, and a pure-Python loop varying 0.75-1.15 s between three consecutive runs. This sampler tests
whether the slow boots are slow CPU: every ``--every`` seconds it pins itself to the next core
(``os.sched_setaffinity``), times a fixed pure-Python loop, and writes one JSON line
``{"t": unix time, "core": n, "s": seconds}``. The campaign's records carry their own times, so the
two join afterwards (``calibration/gpu_real/cpu_join.py``). The loop is ~20 ms of one core every
0.5 s: 4 % of one core of 16.

    python3 calibration/gpu_real/cpu_timeline.py --out /root/results/cpu_timeline.jsonl &
"""

from __future__ import annotations

import argparse
import json
import os
import time


def work(n: int) -> float:
    t = time.perf_counter()
    s = 0
    for i in range(n):
        s += i
    return time.perf_counter() - t


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--every", type=float, default=0.5)
    ap.add_argument("--n", type=int, default=400_000)
    ap.add_argument("--seconds", type=float, default=3600)
    args = ap.parse_args()
    cores = sorted(os.sched_getaffinity(0))
    end = time.time() + args.seconds
    k = 0
    with open(args.out, "a") as fh:
        while time.time() < end:
            core = cores[k % len(cores)]
            k += 1
            os.sched_setaffinity(0, {core})
            fh.write(json.dumps({"t": round(time.time(), 3), "core": core, "s": round(work(args.n), 5)}) + "\n")
            fh.flush()
            time.sleep(args.every)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
