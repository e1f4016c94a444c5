#!/usr/bin/env python3
"""Loaded TTFT / TPOT / throughput of ``vllm bench serve`` runs against advisor.predict.serving.

The check issue 23 asks for and no session had a GPU for: one server, several loads, each run's
``--save-result`` JSON compared with the operating-point model at the same shapes (prompt and output
lengths read from the run, the server's max_num_seqs / max_num_batched_tokens given here). On the GPU
machine, dummy weights are enough (the step costs do not depend on the values):

    vllm serve meta-llama/Llama-3.1-8B-Instruct --load-format dummy --max-num-seqs 256 \
        --max-num-batched-tokens 8192 --max-model-len 4096 &
    for r in 2 5 10 20 40 inf; do
      vllm bench serve --model meta-llama/Llama-3.1-8B-Instruct --dataset-name random --random-input-len 1024 \
        --random-output-len 512 --ignore-eos --num-prompts 400 --request-rate $r \
        --save-result --result-dir bench --result-filename rate-$r.json
    done
    python scripts/check_serving.py --model meta-llama/Llama-3.1-8B-Instruct --gpu H200 \
        --max-num-seqs 256 --max-num-batched-tokens 8192 bench/*.json

A run with ``--max-concurrency C`` and rate inf is a closed loop of C; a finite ``--request-rate`` an open
(Poisson) loop. Prints measured, predicted and their ratio per run; exits 0 (a report, not a gate).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def predict(run: dict, model: str, gpu_name: str, tp: int, seqs: int, budget: int):
    from advisor.hardware.gpus import get_gpu
    from advisor.model.load import load_profile
    from advisor.predict.absolute import ReplicaLayout, decode_step, prefill_marginal, prefill_time
    from advisor.predict.serving import operating_figures

    p, gpu, lay = load_profile(model), get_gpu(gpu_name), ReplicaLayout(tp=tp)
    P = max(1, round(sum(run["input_lens"]) / len(run["input_lens"])))
    out_len = max(1, round(sum(run["output_lens"]) / len(run["output_lens"])))
    ctx = P + out_len / 2
    rate = run.get("request_rate")
    load = ({"rate": float(rate)} if rate not in (None, "inf") and float(rate) != float("inf")
            else {"concurrency": int(run.get("max_concurrency") or run.get("max_concurrent_requests") or seqs)})  # fmt: skip
    f = operating_figures(lambda n: decode_step(p, gpu, lay, n, ctx)[0], prefill_token_s=prefill_marginal(p, gpu, lay, P) / P,
                          prefill_alone_s=prefill_time(p, gpu, lay, P), prompt_len=P, output_len=out_len, max_num_seqs=seqs,
                          max_num_batched_tokens=budget, kv_slots=10**6, **load)  # fmt: skip
    return P, out_len, load, f


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", nargs="+", type=Path, help="vllm bench serve --save-result JSON files")
    ap.add_argument("--model", required=True)
    ap.add_argument("--gpu", required=True)
    ap.add_argument("--tp", type=int, default=1)
    ap.add_argument("--max-num-seqs", type=int, required=True)
    ap.add_argument("--max-num-batched-tokens", type=int, required=True)
    args = ap.parse_args()
    print("| run | load | P / O | TTFT ms meas / pred | TPOT ms meas / pred | out tok/s meas / pred | stable |")
    print("|---|---|---|---|---|---|---|")
    for path in args.results:
        run = json.loads(path.read_text())
        P, out_len, load, f = predict(run, args.model, args.gpu, args.tp, args.max_num_seqs, args.max_num_batched_tokens)
        lo = f"rate {load['rate']:g}/s" if "rate" in load else f"concurrency {load['concurrency']}"
        r = lambda m, q: f"{m:,.1f} / {q:,.1f} (x{q / m:.2f})" if m else f"- / {q:,.1f}"  # noqa: E731
        print(f"| {path.name} | {lo} | {P} / {out_len} | {r(run['mean_ttft_ms'], f.ttft_ms.value)} | "
              f"{r(run['mean_tpot_ms'], f.tpot_ms.value)} | {r(run['output_throughput'], f.throughput_tok_s.value)} | {f.stable} |")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
