#!/usr/bin/env python3
"""Print docs/layout.md's tables: the layout search's answer for a handful of models and hosts, and
the absolute figures against the H200 GPU grid. Usage: python scripts/layout_table.py"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CASES = [
    ("meta-llama/Llama-3.1-8B-Instruct", 8, 256), ("meta-llama/Llama-3.1-8B-Instruct", 1, 64),
    ("Qwen/Qwen2.5-7B-Instruct", 8, 256), ("meta-llama/Llama-3.1-70B-Instruct", 8, 64),
    ("meta-llama/Llama-3.1-70B-Instruct", 8, 256), ("meta-llama/Llama-3.1-405B-Instruct-FP8", 8, 256),
    ("deepseek-ai/DeepSeek-R1", 8, 256), ("Qwen/Qwen3-30B-A3B", 8, 256),
]  # fmt: skip


def _band(b: dict, n: int = 0) -> str:
    return f"{b['value']:,.{n}f} [{b['low']:,.{n}f}–{b['high']:,.{n}f}]"


def search_table() -> None:
    print("| model | host | conc. | layout | method | host tok/s | TPOT ms | TTFT ms | step ms | runner-up |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for model, gpus, conc in CASES:
        out = subprocess.run(["advisor", "recommend", model, "--gpu", "H200", "--gpus", str(gpus), "--concurrency", str(conc), "--json"],
                             capture_output=True, text=True, check=True).stdout  # fmt: skip
        r = json.loads(out)
        d, p = r["decision"], r["prediction"]
        lay = f"TP {d['tensor_parallel_size']}" + (f" x DP {d['data_parallel_size']}" if d["data_parallel_size"] > 1 else "")
        lay += " + EP" if d["enable_expert_parallel"] else ""
        meth = f"{d['speculative_method']} K={d['num_speculative_tokens']}" if d["speculative_method"] else "plain"
        nxt = next((c for c in r["candidates"] if not c["chosen"]), None)
        runner = f"{nxt['label']}: {nxt.get('why_lost') or nxt['why_not']}"[:110] if nxt else ""
        print(f"| {model.split('/')[1]} | {gpus}xH200 | {conc} | {lay} | {meth} | {_band(p['throughput_tok_s'])} | "
              f"{_band(p['tpot_ms'], 1)} | {_band(p['ttft_ms'])} | {p['step_ms']['value']:.2f} | {runner} |")  # fmt: skip


def grid_table() -> None:
    from advisor.hardware.gpus import get_gpu
    from advisor.model.load import load_profile
    from advisor.predict.absolute import ReplicaLayout, decode_step, prefill_marginal

    p, g, lay = load_profile("meta-llama/Llama-3.1-8B-Instruct"), get_gpu("H200"), ReplicaLayout(tp=1)
    rows = [json.loads(x) for x in (ROOT / "calibration/gpu_steps/h200-vllm0.26.0/grid.jsonl").read_text().splitlines()]
    tm = prefill_marginal(p, g, lay, 1024)
    print("| concurrency | step ms measured | predicted | decode tok/s measured | predicted | prefill ms implied | predicted | 128-token run s measured | predicted |")
    print("|---|---|---|---|---|---|---|---|---|")
    seen = set()
    for r in rows:
        if r["spec"] != "none" or r["conc"] in seen:
            continue
        c = r["conc"]
        seen.add(c)
        ts, _ = decode_step(p, g, lay, c, r["prompt_len"] + (r["out_short"] + r["out_long"]) / 2)
        ts_short, _ = decode_step(p, g, lay, c, r["prompt_len"] + r["out_short"] / 2)
        implied = (r["t_short_s"] - r["out_short"] * r["step_ms"] / 1e3) / c
        run = c * tm + r["out_short"] * ts_short
        print(f"| {c} | {r['step_ms']:.2f} | {ts * 1e3:.2f} ({ts * 1e3 / r['step_ms'] - 1:+.1%}) | {r['decode_tok_s']:,.0f} | {c / ts:,.0f} | "
              f"{implied * 1e3:.1f} | {tm * 1e3:.1f} ({tm / implied - 1:+.0%}) | {r['t_short_s']:.3f} | {run:.3f} ({run / r['t_short_s'] - 1:+.1%}) |")  # fmt: skip


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    search_table()
    print()
    grid_table()
