#!/usr/bin/env python3
"""Cold-process start-up time of `advisor inspect` and `advisor recommend --json` on bundled models.

Runs each command N times as a fresh process and prints the median and the spread, plus the
bare interpreter for reference. With --report also `advisor report` (the HTML page; its first
run on a machine caches the leave-one-model-out evaluation, so the warm-up run pays for that).
Usage: python scripts/bench_startup.py [-n 21] [--report]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

COMMANDS = {
    "python -c pass (floor)": [sys.executable, "-c", "pass"],
    "advisor inspect --json": ["advisor", "inspect", "meta-llama/Llama-3.1-70B", "--json"],
    "advisor recommend --json": ["advisor", "recommend", "meta-llama/Llama-3.1-70B", "--gpu", "B200", "--gpus", "8", "--json"],
    "advisor recommend --max-tpot-ms --json": ["advisor", "recommend", "meta-llama/Llama-3.1-70B-Instruct", "--gpu", "H200",
                                               "--gpus", "8", "--max-tpot-ms", "30", "--max-ttft-ms", "1000", "--json"],
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("-n", type=int, default=21, help="runs per command (default 21)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--report", action="store_true", help="also time `advisor report` (writes into a temporary folder)")
    args = ap.parse_args()
    commands = dict(COMMANDS)
    tmp = tempfile.TemporaryDirectory(prefix="bench-report-")
    if args.report:
        commands["advisor report"] = ["advisor", "report", "meta-llama/Llama-3.1-70B-Instruct", "--gpu", "B200", "--gpus", "8",
                                      "--out", os.path.join(tmp.name, "report.html")]  # fmt: skip
    if not shutil.which("advisor"):
        print("advisor is not on PATH: pip install -e . first", file=sys.stderr)
        return 1
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    results = {}
    for name, cmd in commands.items():
        subprocess.run(cmd, env=env, capture_output=True, check=True)  # warm the page cache
        times = []
        for _ in range(args.n):
            t0 = time.perf_counter()
            subprocess.run(cmd, env=env, capture_output=True, check=True)
            times.append(time.perf_counter() - t0)
        q = statistics.quantiles(times, n=10)
        results[name] = {"median_s": round(statistics.median(times), 3), "p10_s": round(q[0], 3), "p90_s": round(q[-1], 3)}
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        for name, r in results.items():
            print(f"{name:28s} median {r['median_s']:.3f} s  (p10 {r['p10_s']:.3f}, p90 {r['p90_s']:.3f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
