#!/usr/bin/env python3
"""Join a campaign's loads with the host's CPU and GPU timelines, and split the step time's spread into what a
boot carries and what changes within one (campaigns 5 and 6, issue #22: what moves a speculative step's cost).

    python calibration/gpu_real/cpu_join.py calibration/gpu_real/h200-vllm0.26.0/store6 \\
        calibration/gpu_real/h200-vllm0.26.0/smol-j[1-8]

For every load of every folder (``records.jsonl`` joined with ``cpu.jsonl`` on config and prompt slice) it
derives: step ms = K̄ x mean in flight / throughput; the record's own ``host_loop_ms`` (the probe's loop); EngineCore and client CPU busy (CPU seconds / load
seconds); the timeline loop (median of ``cpu_timeline.jsonl``'s samples inside the load, any core, ms); the
GPU's mean utilisation inside it (``gpu_timeline.csv``); whether the server was pinned (``taskset`` in its
command). It writes ``loads.csv`` into the store folder and prints, per configuration, the spread of ln(step)
around each slice's median, split into a per-boot part (the boot's mean residual) and a within-boot part, and
how much of it the loop's own spread explains (least squares of the step's residual on the loop's).
"""

from __future__ import annotations

import csv
import json
import math
import statistics
import sys
from datetime import datetime, timezone
from pathlib import Path


def _gpu(path: Path) -> list[tuple[float, float]]:
    out = []
    if not path.exists():
        return out
    with path.open() as fh:
        for row in csv.reader(fh):
            try:
                t = datetime.strptime(row[0].strip(), "%Y/%m/%d %H:%M:%S.%f").replace(tzinfo=timezone.utc).timestamp()
                out.append((t, float(row[5].strip().rstrip(" %"))))
            except (ValueError, IndexError):
                continue
    return out


def _inside(samples: list[tuple[float, float]], t0: float, t1: float) -> list[float]:
    return [v for t, v in samples if t0 <= t <= t1]


def loads(store: Path, folders: list[Path]) -> list[dict]:
    timeline = [json.loads(line) for line in (store / "cpu_timeline.jsonl").open()]
    loop = [(s["t"], s["s"] * 1e3) for s in timeline]
    gpu = _gpu(store / "gpu_timeline.csv")  # nvidia-smi stamps local time: the VM runs in UTC
    rows = []
    for boot, folder in enumerate(folders, 1):
        recs = [json.loads(line) for line in (folder / "records.jsonl").open()]
        order: dict[str, list[dict]] = {}  # each configuration's loads in cpu.jsonl, in its records' order
        for c in map(json.loads, (folder / "cpu.jsonl").open()):
            order.setdefault(c["config"], []).append(c)
        for cfg, cs in order.items():
            mine = [r for r in recs if r["config"] == cfg and r["outcome"] == "ok"]
            for rec, c in zip(mine, sorted(cs, key=lambda c: c["t0"])):
                k = rec.get("tokens_per_step") or 1.0
                tput = rec["throughput_tok_s"]
                inside = _inside(loop, c["t0"], c["t1"])
                util = _inside(gpu, c["t0"], c["t1"])
                rows.append(dict(
                    folder=folder.name, boot=boot, config=cfg, slice=f"{c['corpus']}:c{c['concurrency']}:{c['start']}",
                    pinned="taskset" in rec["command"][0], tput=round(tput, 1), k_bar=round(k, 3),
                    in_flight=rec["mean_in_flight"], step_ms=round(k * rec["mean_in_flight"] / tput * 1e3, 3),
                    engine_busy=rec.get("engine_cpu_busy"), client_busy=rec.get("client_cpu_busy"),
                    loop_ms=round(statistics.median(inside), 2) if inside else None, loop_n=len(inside),
                    probe_loop_ms=rec.get("host_loop_ms"), gpu_util=round(statistics.fmean(util), 1) if util else None,
                    engine_core=next((p["core"] for p in c["procs"] if p["name"].startswith("VLLM::Engine")), None),
                ))  # fmt: skip
    return rows


def _resid(rows: list[dict], key: str) -> dict[int, float]:
    by_slice: dict[str, list[float]] = {}
    for r in rows:
        by_slice.setdefault(r["slice"], []).append(math.log(r[key]))
    med = {s: statistics.median(v) for s, v in by_slice.items()}
    return {id(r): math.log(r[key]) - med[r["slice"]] for r in rows}


def spread(rows: list[dict]) -> list[str]:
    lines = []
    for cfg in sorted({r["config"] for r in rows}):
        mine = [r for r in rows if r["config"] == cfg]
        res = _resid(mine, "step_ms")
        boots: dict[int, list[float]] = {}
        for r in mine:
            boots.setdefault(r["boot"], []).append(res[id(r)])
        boot_mean = {b: statistics.fmean(v) for b, v in boots.items()}
        within = [res[id(r)] - boot_mean[r["boot"]] for r in mine]
        total = statistics.pstdev(res.values())
        lines.append(f"{cfg}: {len(mine)} loads in {len(boots)} boots; sd ln(step) around each slice's median "
                     f"{total:.3f}: per boot {statistics.pstdev(boot_mean.values()):.3f}, within a boot "
                     f"{statistics.pstdev(within):.3f}")
        lines.append("  boot mean step x" + " ".join(f"{math.exp(boot_mean[b]):.2f}" for b in sorted(boot_mean))
                     + "  (pinned: " + " ".join("y" if any(r["pinned"] for r in mine if r["boot"] == b) else "n"
                                                for b in sorted(boot_mean)) + ")")
        for key, name in (("loop_ms", "loop"), ("probe_loop_ms", "probe loop")):  # the timeline's; the record's
            with_loop = [r for r in mine if r[key]]
            if len(with_loop) <= 3:
                continue
            lres = _resid(with_loop, key)
            x = [lres[id(r)] for r in with_loop]
            y = [res[id(r)] for r in with_loop]
            mx, my = statistics.fmean(x), statistics.fmean(y)
            sxx = sum((a - mx) ** 2 for a in x)
            slope = sum((a - mx) * (b - my) for a, b in zip(x, y)) / sxx if sxx else 0.0
            ss = sum((b - my) ** 2 for b in y)
            r2 = 1 - sum((b - my - slope * (a - mx)) ** 2 for a, b in zip(x, y)) / ss if ss else 0.0
            lines.append(f"  ln(step) on ln({name}): slope {slope:.2f}, R^2 {r2:.2f} ({len(with_loop)} loads)")
        for pin in (False, True):
            sel = [res[id(r)] for r in mine if r["pinned"] is pin]
            if sel:
                lines.append(f"  {'pinned 2-9' if pin else 'unpinned  '}: median step x{math.exp(statistics.median(sel)):.2f} "
                             f"of the slice's median, sd {statistics.pstdev(sel):.3f} ({len(sel)} loads)")
    return lines


def gains(rows: list[dict]) -> list[str]:
    """Per boot pair: the gain of each non-vanilla configuration over the same pass's vanilla, per slice."""
    lines = []
    van = {(r["folder"], r["slice"]): r for r in rows if r["config"] == "vanilla"}
    per_slice: dict[str, list[float]] = {}
    for r in rows:
        v = van.get((r["folder"], r["slice"]))
        if r["config"] != "vanilla" and v:
            per_slice.setdefault(f"{r['config']} {r['slice']}", []).append(r["tput"] / v["tput"])
    for key, gs in sorted(per_slice.items()):
        lines.append(f"{key}: gain median x{statistics.median(gs):.2f}, range x{min(gs):.2f}-{max(gs):.2f} "
                     f"over {len(gs)} passes")
    return lines


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__)
        return 2
    store, folders = Path(argv[0]), [Path(a) for a in argv[1:]]
    rows = loads(store, folders)
    out = store / "loads.csv"
    with out.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    print(f"{len(rows)} loads -> {out}")
    print("\n".join(spread(rows) + gains(rows)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
