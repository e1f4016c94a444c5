#!/usr/bin/env bash
# Campaign 14 (issue 40 step 5, first pass): the advisor answers this campaign checks, made from a clean
# checkout of the commit recorded in predictions.json (run from the repo root of that checkout):
#   bash calibration/serving_bench/h100-vllm0.26.0-c14/make_predictions.sh
# Writes answers/<id>.json (recommend --json) and answers/<id>.txt (the table, with its Launch line), then
# predictions.json. Each model boots ONCE with the flags of its higher-load answer; the lower-load answer
# runs on that server (see README.md: its flags differ only in --max-num-seqs).
set -euo pipefail
GPU=${GPU:-H100}   # H200: the fallback set, used only if the session gets an H200 instead of an H100
D=calibration/serving_bench/$(echo $GPU | tr A-Z a-z)-vllm0.26.0-c14
[ -z "$(git status --porcelain -- advisor rules catalog)" ] || { echo "dirty advisor/rules/catalog: refuse" >&2; exit 1; }
mkdir -p $D/answers
# id model max-tpot-ms role(boot|ride) boot-id
ANSWERS="l8-bf16-t30 meta-llama/Llama-3.1-8B-Instruct 30 boot l8-bf16-t30
l8-bf16-t15 meta-llama/Llama-3.1-8B-Instruct 15 ride l8-bf16-t30
l8-fp8-t25 RedHatAI/Meta-Llama-3.1-8B-Instruct-FP8 25 boot l8-fp8-t25
l8-fp8-t12 RedHatAI/Meta-Llama-3.1-8B-Instruct-FP8 12 ride l8-fp8-t25
q30-fp8-t25 Qwen/Qwen3-30B-A3B-FP8 25 boot q30-fp8-t25
q30-fp8-t15 Qwen/Qwen3-30B-A3B-FP8 15 ride q30-fp8-t25
dsv2l-t20 deepseek-ai/DeepSeek-V2-Lite 20 boot dsv2l-t20
dsv2l-t15 deepseek-ai/DeepSeek-V2-Lite 15 ride dsv2l-t20"
[ $GPU = H200 ] && ANSWERS="l8-bf16-t25 meta-llama/Llama-3.1-8B-Instruct 25 boot l8-bf16-t25
l8-bf16-t12 meta-llama/Llama-3.1-8B-Instruct 12 ride l8-bf16-t25
l8-fp8-t20 RedHatAI/Meta-Llama-3.1-8B-Instruct-FP8 20 boot l8-fp8-t20
l8-fp8-t12 RedHatAI/Meta-Llama-3.1-8B-Instruct-FP8 12 ride l8-fp8-t20
q30-fp8-t20 Qwen/Qwen3-30B-A3B-FP8 20 boot q30-fp8-t20
q30-fp8-t12 Qwen/Qwen3-30B-A3B-FP8 12 ride q30-fp8-t20
dsv2l-t15 deepseek-ai/DeepSeek-V2-Lite 15 boot dsv2l-t15
dsv2l-t12 deepseek-ai/DeepSeek-V2-Lite 12 ride dsv2l-t15"
echo "$ANSWERS" > $D/answers/list.txt
while read -r id model t role boot; do
  args=(recommend "$model" --gpu $GPU --gpus 1 --vllm-version 0.26 --prompt-len 1024 --output-len 512 --max-tpot-ms "$t")
  echo "python3 -m advisor ${args[*]}" > $D/answers/$id.cmd
  python3 -m advisor "${args[@]}" --json > $D/answers/$id.json
  python3 -m advisor "${args[@]}" > $D/answers/$id.txt
done <<< "$ANSWERS"
python3 - "$D" "$(git rev-parse HEAD)" "$GPU" <<'PY'
import json, sys, re
from pathlib import Path
D, commit = Path(sys.argv[1]), sys.argv[2]
rows = [l.split() for l in (D / "answers/list.txt").read_text().splitlines()]
ans = {r[0]: json.loads((D / f"answers/{r[0]}.json").read_text()) for r in rows}
def launch(i):
    t = (D / f"answers/{i}.txt").read_text().splitlines()
    return t[t.index("Launch:") + 1].strip(), t[t.index("Launch:") + 2].strip()
out = []
for i, model, tmax, role, boot in rows:
    a, b = ans[i], ans[boot]
    c, p, m = a["decision"], a["prediction"], a["memory"]
    assert c["speculative_method"] is None and p["method"] == "none", i  # plain decoding only
    cb = b["decision"]
    same = {k: (c[k], cb[k]) for k in ("gpu_memory_utilization", "max_model_len", "max_num_seqs", "max_num_batched_tokens",
                                       "cudagraph_mode", "tensor_parallel_size", "kv_cache_dtype", "env") if c[k] != cb[k]}
    conc = p["offered_concurrency"]
    out.append({
        "id": i, "model": model, "role": role, "boot": boot,
        "advisor_command": (D / f"answers/{i}.cmd").read_text().strip(), "advisor_commit": commit,
        "sla": {"max_tpot_ms": float(tmax)}, "sla_met_predicted": a["sla_met"],
        "launch": launch(i)[0], "launch_env": launch(i)[1],
        "boot_launch": launch(boot)[0], "flags_differing_from_boot": same,
        "decision": {k: c[k] for k in ("gpu_memory_utilization", "max_model_len", "max_num_seqs", "max_num_batched_tokens",
                                       "cudagraph_mode", "tensor_parallel_size", "data_parallel_size", "kv_cache_dtype", "env")},
        "concurrency": conc, "num_prompts": 3 * conc, "prompt_len": 1024, "output_len": 512,
        "predicted": {k: p[k] for k in ("tpot_ms", "ttft_ms", "throughput_tok_s", "step_ms", "prefill_ms")}
                     | {"running_per_replica": p["running_per_replica"], "ttft_unloaded_ms": p["ttft_unloaded_ms"],
                        "tok_s_per_user": p["tok_s_per_user"], "kv_cache_tokens": m["kv_cache_tokens"],
                        "num_gpu_blocks": m["num_gpu_blocks"], "kv_cache_gib": m["terms_gib"]["kv_cache"]},
        "figure_notes": p["figure_notes"],
    })
meta = {"campaign": "c14", "issue": 40, "step": "5, first pass", "gpu": sys.argv[3], "vllm": "0.26.0",
        "advisor_commit": commit, "weights": "dummy (--load-format dummy)", "tokenizer": "word-level, vocab = config vocab_size (device/mktok.py)",
        "bench": "vllm bench serve --backend vllm --dataset-name random --random-input-len 1024 --random-output-len 512 "
                 "--ignore-eos --max-concurrency C --num-prompts 3C (closed loop, request rate inf)",
        "answers": out}
(D / "predictions.json").write_text(json.dumps(meta, indent=1) + "\n")
for o in out:
    pr = o["predicted"]
    print(f"{o['id']:12} C={o['concurrency']:4} TPOT {pr['tpot_ms']['value']:6.2f} TTFT {pr['ttft_ms']['value']:6.1f} tok/s {pr['throughput_tok_s']['value']:8.0f} diff-from-boot {o['flags_differing_from_boot']}")
PY
