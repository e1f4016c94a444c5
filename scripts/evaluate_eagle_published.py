#!/usr/bin/env python3
"""Predicted EAGLE-3 / draft-model gains against the published vLLM results (calibration/published/
eagle_draft_results.csv, frozen at 2a55cf5 before anything here was fitted), with the trivial baselines beside them.

Evaluated: every vLLM row that reports a speedup (or a TPOT pair) of a method the advisor prices, whose target is in
the catalog, whose drafter (or, for an unnamed head, a catalog head of the same method for that target) is in the
catalog, and whose K and concurrency are stated. Each is predicted by the product's code path (advisor.methods:
the method's ``estimate`` at the row's GPU, TP 1 unless stated, K and concurrency; context: recommend's default
prompt 1024 + output 512 / 2, the rows state none). Two predictions per row:
- product: K̄ as the advisor finds it (advisor.methods._drafted.acceptance), R from the drafter's step physics;
- cost only: the row's own published acceptance length at that K (where the source gives one) over the predicted R,
  which isolates the step-cost model.
Baselines: "always plain" (gain 1) and the median published speedup of the method over the OTHER sources.
Everything else in the file is counted and listed as not evaluable with its reason.

    python3 scripts/evaluate_eagle_published.py > calibration/published/eagle_draft_evaluation.md
"""

from __future__ import annotations

import csv
import math
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from advisor import methods  # noqa: E402
from advisor.hardware.gpus import get_gpu  # noqa: E402
from advisor.methods import MethodContext  # noqa: E402
from advisor.model.drafter import drafters_for, load_drafter  # noqa: E402
from advisor.model.load import load_profile  # noqa: E402
from advisor.predict.absolute import ReplicaLayout  # noqa: E402
from advisor.rules.policy import load_policy  # noqa: E402
from advisor.vllm_facts import facts  # noqa: E402

SRC = ROOT / "calibration" / "published" / "eagle_draft_results.csv"
CONTEXT = 1024 + 512 / 2
SPEEDUP = ("speedup_throughput", "speedup_per_user_tok_s", "speedup_tpot")


def _drafter(row):
    try:
        return load_drafter(row["drafter"]), "the row's drafter"
    except Exception:  # noqa: BLE001 - not in the catalog: a catalog head of the same method for the target
        for ref in drafters_for(row["target_model"]):
            d = load_drafter(ref)
            if d.kind == row["method"]:
                return d, f"catalog stand-in {ref} (the row's drafter {row['drafter']!r} is not in the catalog)"
    return None, "no catalog drafter of this method for the target"


def main() -> None:
    rows = list(csv.DictReader(SRC.open(newline="")))
    al = {(r["source_id"], r["target_model"], r["drafter"], r["k"]): float(r["value"])
          for r in rows if r["metric"] == "acceptance_length" and r["stat"] == "value"}  # fmt: skip
    out, skipped = [], {}
    for r in rows:
        speed = None
        if r["metric"] in SPEEDUP and r["stat"] == "value":
            speed = float(r["value"])
        elif r["metric"] == "tpot_ms" and r["baseline_value"]:
            speed = float(r["baseline_value"]) / float(r["value"])
        if speed is None:
            continue
        why = None
        if r["engine"] != "vllm":
            why = f"engine {r['engine']} (the advisor predicts vLLM)"
        elif not r["k"].isdigit() or not r["concurrency"].isdigit():
            why = "K or concurrency not stated"
        if why is None:
            try:
                p = load_profile(r["target_model"])
            except Exception:  # noqa: BLE001
                why = f"target {r['target_model']} not in the catalog"
        if why is None:
            d, how = _drafter(r)
            if d is None:
                why = how
        if why is not None:
            skipped[why] = skipped.get(why, 0) + 1
            continue
        gpu_name = r["gpu"] if r["gpu"] in ("H100", "H200", "B200", "A100") else "H100"
        gpu_note = "" if gpu_name == r["gpu"] else f"GPU {r['gpu']!r}: priced as H100"
        tp = int(r["tp"]) if r["tp"].isdigit() else 1
        k, n = int(r["k"]), int(r["concurrency"])
        ctx = MethodContext(profile=p, gpu=get_gpu(gpu_name), layout=ReplicaLayout(tp=tp, dp=1, ep=False), vf=facts("0.26"),
                            suffix_at=lambda *a: None, ngram_k_ref=load_policy().num_speculative_tokens,
                            drafter=d)  # fmt: skip
        est = methods.get(r["method"]).estimate(ctx, k, n, CONTEXT)
        own_al = al.get((r["source_id"], r["target_model"], r["drafter"], r["k"]))
        out.append({"row": r, "speed": speed, "pred": est.gain.value, "low": est.gain.low, "high": est.gain.high,
                    "r": est.r, "kbar": est.k_bar, "cost_only": own_al / est.r if own_al else None, "own_al": own_al,
                    "drafter_note": how, "gpu_note": gpu_note})  # fmt: skip
    pub = [(r["source_id"], r["method"], float(r["value"])) for r in rows
           if r["engine"] == "vllm" and r["metric"] in SPEEDUP and r["stat"] == "value"]  # fmt: skip
    print("# EAGLE-3 / draft-model gains: predicted against published vLLM results\n")
    print("Generated by `scripts/evaluate_eagle_published.py` from `eagle_draft_results.csv` (frozen at 2a55cf5). "
          "ln error = ln(predicted / published). Baselines: always plain (gain 1) and the median published speedup of "
          "the same method in the other sources (leave one source out).\n")
    print("| source | method | K | C | GPU | published gain | predicted [band] | ln err | in band | K̄ used | R | "
          "cost only (own AL / R) | ln err | median-other baseline | ln err | plain ln err | notes |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    e_p, e_c, e_m, e_1 = [], [], [], []
    for o in out:
        r = o["row"]
        other = [v for s, m, v in pub if m == r["method"] and s != r["source_id"]]
        med = statistics.median(other) if other else None
        lp = math.log(o["pred"] / o["speed"])
        lc = math.log(o["cost_only"] / o["speed"]) if o["cost_only"] else None
        lm = math.log(med / o["speed"]) if med else None
        l1 = math.log(1 / o["speed"])
        e_p.append(abs(lp))
        e_1.append(abs(l1))
        if lc is not None:
            e_c.append(abs(lc))
        if lm is not None:
            e_m.append(abs(lm))
        inb = o["low"] <= o["speed"] <= o["high"]
        notes = "; ".join(x for x in (o["drafter_note"], o["gpu_note"]) if x)
        print(f"| {r['source_id']} | {r['method']} | {r['k']} | {r['concurrency']} | {r['gpu'] or 'not stated'} | {o['speed']:.2f} | "
              f"{o['pred']:.2f} [{o['low']:.2f}, {o['high']:.2f}] | {lp:+.3f} | {'yes' if inb else 'no'} | {o['kbar']:.2f} | "
              f"{o['r']:.3f} | {'' if lc is None else f'{o[chr(99) + chr(111) + chr(115) + chr(116) + chr(95) + chr(111) + chr(110) + chr(108) + chr(121)]:.2f}'} | "
              f"{'' if lc is None else f'{lc:+.3f}'} | {'' if med is None else f'{med:.2f}'} | {'' if lm is None else f'{lm:+.3f}'} | "
              f"{l1:+.3f} | {notes} |")  # fmt: skip
    print("\n| prediction | rows | median abs ln error |")
    print("|---|---|---|")
    for name, errs in (("product (advisor's K̄ and R)", e_p), ("cost only (published AL / predicted R)", e_c),
                       ("baseline: median published gain of the method, other sources", e_m), ("baseline: always plain", e_1)):
        print(f"| {name} | {len(errs)} | {statistics.median(errs):.3f} |" if errs else f"| {name} | 0 | - |")
    print("\nNot evaluable (speedup rows only):\n")
    for why, n in sorted(skipped.items(), key=lambda kv: -kv[1]):
        print(f"- {n}: {why}")


if __name__ == "__main__":
    main()
