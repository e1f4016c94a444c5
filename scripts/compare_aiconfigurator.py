#!/usr/bin/env python3
"""advisor beside NVIDIA aiconfigurator 0.12 on issue 23's four questions (a script, not a CI test).

8 x H200, ISL 1024 / OSL 512, TTFT <= 1000 ms, TPOT <= 30 ms: for each model, aiconfigurator's
``cli default`` (Python API ``aiconfigurator.cli.api.cli_default``, backend vllm, aggregated serving)
and ``advisor recommend --json`` at the same limits, side by side per GPU; a dense model whose answers
differ by more than 15 % per GPU is flagged (docs/layout.md explains the disagreements it knows).

Needs aiconfigurator in the running Python (``pip install 'aiconfigurator==0.12.*'``; the advisor runs
as ``python -m advisor`` from this checkout). Usage: python scripts/compare_aiconfigurator.py [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ISL, OSL, TTFT, TPOT, GPUS = 1024, 512, 1000.0, 30.0, 8
QUESTIONS = [  # (HF id, dense?, MTP drafts, MTP accepted per step for aiconfigurator: advisor's MTP_ACCEPT mid)
    ("meta-llama/Llama-3.1-70B-Instruct", True, 0, None),
    ("meta-llama/Llama-3.1-8B-Instruct", True, 0, None),
    ("Qwen/Qwen3-30B-A3B", False, 0, None),
    ("deepseek-ai/DeepSeek-R1", False, 1, 0.875),
]
TOLERANCE = 0.15


def advisor(model: str) -> dict:
    cmd = [sys.executable, "-m", "advisor", "recommend", model, "--gpu", "H200", "--gpus", str(GPUS), "--max-tpot-ms",
           str(TPOT), "--max-ttft-ms", str(TTFT), "--prompt-len", str(ISL), "--output-len", str(OSL), "--json"]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    rec = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout)
    p, d = rec["prediction"], rec["decision"]
    plain = [c for c in rec["candidates"] if c["speculative_method"] is None and c["eligible"] and c.get("prediction")]
    best_plain = max(plain, key=lambda c: c["prediction"]["tok_s_per_gpu"]) if plain else None
    return {
        "config": f"TP{d['tensor_parallel_size']} x DP{d['data_parallel_size']}{' +EP' if d['enable_expert_parallel'] else ''}"
                  f" {d['speculative_method'] or 'plain'}, max_num_seqs {d['max_num_seqs']}",
        "tok_s_per_gpu": p["tok_s_per_gpu"], "tpot_ms": p["tpot_ms"]["value"], "ttft_ms": p["ttft_ms"]["value"],
        "concurrency": p.get("offered_concurrency"),
        "plain": None if best_plain is None else {"config": best_plain["label"], "tok_s_per_gpu": best_plain["prediction"]["tok_s_per_gpu"],
                                                  "tpot_ms": best_plain["prediction"]["tpot_ms"]["value"]},
    }  # fmt: skip


def run_peer(model: str, nextn: int, accepted: float | None) -> dict:
    from aiconfigurator.cli.api import cli_default

    kw = {"nextn": nextn, "nextn_accepted": accepted} if nextn else {}
    # the bundled config.json (aiconfigurator would otherwise fetch it from the Hugging Face hub)
    local = ROOT / "catalog" / "models" / model
    res = cli_default(str(local if (local / "config.json").is_file() else model), GPUS, "h200_sxm", backend="vllm",
                      isl=ISL, osl=OSL, ttft=TTFT, tpot=TPOT, **kw)  # fmt: skip
    df = res.best_configs.get("agg")  # aggregated serving, as vllm serve runs; rows are per replica
    if df is None or df.empty:
        return {"config": "no aggregated configuration meets the limits", "tok_s_per_gpu": float("nan"), "tpot_ms": float("nan"),
                "ttft_ms": float("nan"), "concurrency": float("nan")}  # fmt: skip
    row = df.iloc[0]
    return {
        "config": f"agg replica TP{row['tp']} x DP{row['dp']} (moe_tp {row['moe_tp']}, moe_ep {row['moe_ep']}), batch {row['bs']}",
        "tok_s_per_gpu": float(row["tokens/s/gpu"]), "tpot_ms": float(row["tpot"]), "ttft_ms": float(row["ttft"]),
        "concurrency": float(row["concurrency"]),
    }  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = ap.parse_args()
    try:
        import aiconfigurator.cli.api  # noqa: F401
    except ImportError:
        print("aiconfigurator is not installed in this Python: pip install 'aiconfigurator==0.12.*'", file=sys.stderr)
        return 2
    rows, worst = [], 0.0
    for model, dense, nextn, accepted in QUESTIONS:
        a, peer = advisor(model), run_peer(model, nextn, accepted)
        ours = (a["plain"] or a)["tok_s_per_gpu"] if dense else a["tok_s_per_gpu"]
        diff = ours / peer["tok_s_per_gpu"] - 1
        flag = dense and abs(diff) > TOLERANCE
        worst = max(worst, abs(diff) if dense else 0.0)
        rows.append({"model": model, "advisor": a, "aiconfigurator": peer, "per_gpu_diff": round(diff, 3), "flag": flag})
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        for r in rows:
            a, p = r["advisor"], r["aiconfigurator"]
            print(f"{r['model']}\n  aiconfigurator: {p['config']}: {p['tok_s_per_gpu']:,.0f} tok/s/GPU, TPOT {p['tpot_ms']:.1f} ms, "
                  f"TTFT {p['ttft_ms']:.0f} ms, concurrency {p['concurrency']:,.0f} per replica")
            print(f"  advisor:        {a['config']}: {a['tok_s_per_gpu']:,.0f} tok/s/GPU, TPOT {a['tpot_ms']:.1f} ms, "
                  f"TTFT {a['ttft_ms']:.0f} ms, concurrency {a['concurrency']}")
            if a["plain"]:
                print(f"  advisor, plain: {a['plain']['config']}: {a['plain']['tok_s_per_gpu']:,.0f} tok/s/GPU, TPOT {a['plain']['tpot_ms']:.1f} ms")
            print(f"  per GPU: {r['per_gpu_diff']:+.1%}{'  <-- over 15 % (dense): explain in docs/layout.md' if r['flag'] else ''}")
    return 1 if any(r["flag"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
