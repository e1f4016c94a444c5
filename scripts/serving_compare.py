#!/usr/bin/env python3
"""Pre-registered serving campaign: predicted vs measured per answer (issue 40, step 5).

    python3 scripts/serving_compare.py calibration/serving_bench/h100-vllm0.26.0-c14

Reads DIR/predictions.json (written and committed before the device ran), DIR/answers/<id>.json (the advisor
answers), DIR/results/<id>.json (`vllm bench serve --save-result`) and DIR/logs/<boot>.server.log (vLLM's KV cache
size). Prints, per answer, predicted [band] vs measured and ln(measured / predicted) for TPOT (mean), TTFT (mean) and
output tok/s, whether the measured value lies in the band, whether the SLA the answer claimed held, the result's
completed count, and the pre-registered trivial baseline (HBM roofline step; TTFT = the unloaded prefill). A report,
not a gate: exit 0.
"""

from __future__ import annotations

import json
import math
import re
import statistics
import sys
from pathlib import Path

HBM_TB_S = {"H100": 3.35, "H200": 4.8}  # the baseline's bandwidth, fixed in the pre-registration


def baseline(ans: dict, conc: int, ctx: float, gpu: str) -> dict:
    m = ans["model"]
    active = m["weight_bytes"] * m["params_active_b"] / m["params_total_b"]
    step_s = (active + conc * ctx * m["kv_bytes_per_token"]) / (HBM_TB_S[gpu] * 1e12)
    return {"tpot_ms": step_s * 1e3, "ttft_ms": ans["prediction"]["ttft_unloaded_ms"], "tok_s": conc / step_s}


def kv_tokens(log: Path) -> int | None:
    if not log.exists():
        return None
    hits = re.findall(r"GPU KV cache size: ([\d,]+) tokens", log.read_text(errors="replace"))
    return int(hits[-1].replace(",", "")) if hits else None


def main() -> int:
    d = Path(sys.argv[1])
    pre = json.loads((d / "predictions.json").read_text())
    gpu = "H200" if "H200" in pre["gpu"] else "H100"
    errs: dict[str, list[float]] = {"tpot": [], "ttft": [], "toks": [], "b_tpot": [], "b_ttft": [], "b_toks": []}
    print(f"# {d.name}: advisor {pre['advisor_commit'][:10]}, {pre['gpu']}, vLLM {pre['vllm']}\n")
    print("| id | role | C | completed | TPOT ms pred [band] / meas mean (p50) | ln | in band | SLA T | held "
          "| TTFT ms pred [band] / meas mean (p50) | ln | out tok/s pred [band] / meas | ln | baseline ln TPOT / TTFT / tok/s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for a in pre["answers"]:
        i, p = a["id"], a["predicted"]
        f = d / "results" / f"{i}.json"
        if not f.exists():
            print(f"| {i} | {a['role']} | {a['concurrency']} | NOT RUN | | | | {a['sla']['max_tpot_ms']:g} | | | | | | |")
            continue
        r = json.loads(f.read_text())
        ans = json.loads((d / "answers" / f"{i}.json").read_text())
        b = baseline(ans, a["concurrency"], a["prompt_len"] + a["output_len"] / 2, gpu)
        meas = {"tpot": r["mean_tpot_ms"], "ttft": r["mean_ttft_ms"], "toks": r["output_throughput"]}
        pred = {"tpot": p["tpot_ms"], "ttft": p["ttft_ms"], "toks": p["throughput_tok_s"]}
        ln = {k: math.log(meas[k] / pred[k]["value"]) for k in meas}
        bl = {"tpot": math.log(meas["tpot"] / b["tpot_ms"]), "ttft": math.log(meas["ttft"] / b["ttft_ms"]),
              "toks": math.log(meas["toks"] / b["tok_s"])}
        for k in meas:
            errs[k].append(ln[k])
            errs["b_" + k].append(bl[k])
        inb = lambda k: "yes" if pred[k]["low"] <= meas[k] <= pred[k]["high"] else "no"  # noqa: E731
        band = lambda k, fmt: f"{pred[k]['value']:{fmt}} [{pred[k]['low']:{fmt}}, {pred[k]['high']:{fmt}}]"  # noqa: E731
        T = a["sla"]["max_tpot_ms"]
        comp = f"{r['completed']}/{a['num_prompts']}" + ("" if r["completed"] == a["num_prompts"] else " (!)")
        print(f"| {i} | {a['role']} | {a['concurrency']} | {comp} | {band('tpot', '.2f')} / {meas['tpot']:.2f} "
              f"({r['median_tpot_ms']:.2f}) | {ln['tpot']:+.3f} | {inb('tpot')} | {T:g} | {'yes' if meas['tpot'] <= T else 'NO'} "
              f"| {band('ttft', '.1f')} / {meas['ttft']:.1f} ({r['median_ttft_ms']:.1f}) | {ln['ttft']:+.2f} "
              f"| {band('toks', '.0f')} / {meas['toks']:.0f} | {ln['toks']:+.3f} "
              f"| {bl['tpot']:+.2f} / {bl['ttft']:+.2f} / {bl['toks']:+.2f} |")
    print()
    for k, name in (("tpot", "TPOT"), ("ttft", "TTFT"), ("toks", "out tok/s")):
        if errs[k]:
            e, be = errs[k], errs["b_" + k]
            med, mad = statistics.median(e), statistics.median(abs(x) for x in e)
            print(f"- {name}: advisor median ln {med:+.3f}, median |ln| {mad:.3f}, max |ln| {max(abs(x) for x in e):.3f} "
                  f"(n={len(e)}); baseline median |ln| {statistics.median(abs(x) for x in be):.3f}")
    print("\nDiagnostic (not pre-registered): the predicted decode step (`prediction.step_ms`, no prefill in it) vs the "
          "measured median ITL (most steps of a closed-loop wave carry no prefill chunk)\n")
    print("| id | C | step ms pred | median ITL ms | ln | mean TPOT - median ITL (ms) |")
    print("|---|---|---|---|---|---|")
    for a in pre["answers"]:
        f = d / "results" / f"{a['id']}.json"
        if f.exists():
            r, s = json.loads(f.read_text()), a["predicted"]["step_ms"]["value"]
            print(f"| {a['id']} | {a['concurrency']} | {s:.2f} | {r['median_itl_ms']:.2f} | {math.log(r['median_itl_ms'] / s):+.3f} "
                  f"| {r['mean_tpot_ms'] - r['median_itl_ms']:.2f} |")
    print("\n| boot | predicted KV tokens | vLLM 'GPU KV cache size' | ln |")
    print("|---|---|---|---|")
    for a in pre["answers"]:
        if a["role"] != "boot":
            continue
        k = kv_tokens(d / "logs" / f"{a['id']}.server.log")
        pk = a["predicted"]["kv_cache_tokens"]
        print(f"| {a['id']} | {pk:,} | {k:,} | {math.log(k / pk):+.3f} |" if k else f"| {a['id']} | {pk:,} | - | |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
