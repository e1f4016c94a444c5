#!/usr/bin/env python3
"""Campaign 14's closed-loop runs against advisor.predict.closed_loop (issue 40 item 2): the simulation of the
benchmark's closed loop, at each run's own server flags (the boot's max_num_seqs / max_num_batched_tokens), its
concurrency and number of prompts, with the product's step model and KV plan, next to the pre-registered
(Poisson-arrival) prediction as the baseline.

    python scripts/closed_loop_check.py calibration/serving_bench/h100-vllm0.26.0-c14

The simulation was committed (10a496e) before the campaign's results were read; nothing here is fitted to them.
Prints one markdown table and the median |ln(pred/meas)| per figure; exits 0 (a report, not a gate).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def predict_run(answer: dict, boot: dict, result: dict) -> dict:
    from advisor.hardware.gpus import get_gpu
    from advisor.model.load import load_profile
    from advisor.predict.absolute import ReplicaLayout, decode_step, prefill_marginal
    from advisor.predict.closed_loop import simulate

    p, gpu, lay = load_profile(answer["model"]), get_gpu("H100"), ReplicaLayout(tp=1)
    P, out_len = answer["prompt_len"], answer["output_len"]
    d = boot["decision"]
    kv = boot["predicted"]["kv_cache_tokens"]
    run = simulate(lambda n: decode_step(p, gpu, lay, n, P + out_len / 2)[0],
                   prefill_token_s=prefill_marginal(p, gpu, lay, P) / P, prompt_len=P, output_len=out_len,
                   concurrency=int(result["max_concurrency"]), num_prompts=int(result["num_prompts"]),
                   max_num_seqs=d["max_num_seqs"], max_num_batched_tokens=d["max_num_batched_tokens"],
                   kv_slots=kv // (P + out_len))  # fmt: skip
    return run.model_dump()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folder", type=Path)
    args = ap.parse_args()
    pre = json.loads((args.folder / "predictions.json").read_text())
    answers = {a["id"]: a for a in pre["answers"]}
    rows, errs = [], {"mean_ttft": [], "median_ttft": [], "tpot": [], "tok_s": [], "poisson_ttft": []}
    for aid, a in answers.items():
        path = args.folder / "results" / f"{aid}.json"
        if not path.is_file():
            continue
        res = json.loads(path.read_text())
        boot = answers[a["boot"]]
        sim = predict_run(a, boot, res)
        ln = lambda pred, meas: math.log(pred / meas)  # noqa: E731
        e = {"mean_ttft": ln(sim["mean_ttft_ms"], res["mean_ttft_ms"]), "median_ttft": ln(sim["median_ttft_ms"], res["median_ttft_ms"]),
             "tpot": ln(sim["mean_tpot_ms"], res["mean_tpot_ms"]), "tok_s": ln(sim["output_tok_s"], res["output_throughput"]),
             "poisson_ttft": ln(a["predicted"]["ttft_ms"]["value"], res["mean_ttft_ms"])}  # fmt: skip
        for k, v in e.items():
            errs[k].append(abs(v))
        rows.append(f"| {aid} | {res['max_concurrency']} | {res['num_prompts']} | {sim['mean_ttft_ms']:.0f} / {res['mean_ttft_ms']:.0f} "
                    f"({e['mean_ttft']:+.2f}) | {sim['median_ttft_ms']:.0f} / {res['median_ttft_ms']:.0f} ({e['median_ttft']:+.2f}) | "
                    f"{sim['p99_ttft_ms']:.0f} / {res['p99_ttft_ms']:.0f} | {sim['mean_tpot_ms']:.2f} / {res['mean_tpot_ms']:.2f} "
                    f"({e['tpot']:+.2f}) | {sim['output_tok_s']:.0f} / {res['output_throughput']:.0f} ({e['tok_s']:+.2f}) | "
                    f"{a['predicted']['ttft_ms']['value']:.0f} ({e['poisson_ttft']:+.2f}) |")  # fmt: skip
    print("| id | C | prompts | mean TTFT ms sim / meas (ln) | median TTFT | p99 TTFT | mean TPOT ms | out tok/s | "
          "baseline: pre-registered Poisson TTFT (ln vs mean) |")
    print("|---|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    print()
    for k, v in errs.items():
        if v:
            print(f"- {k}: median |ln| {statistics.median(v):.3f}, max {max(v):.3f} (n={len(v)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
