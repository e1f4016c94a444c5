#!/usr/bin/env bash
# Campaign 20 (issue 40 step 5, the second, fresh pre-registered set after the MoE fix 7cc65ef): the answers this
# campaign checks, made from a clean checkout of the commit recorded in predictions.json (repo root):
#   bash calibration/serving_bench/h100-vllm0.26.0-c20/make_predictions.sh          # H100 set
#   GPU=H200 bash calibration/serving_bench/h100-vllm0.26.0-c20/make_predictions.sh  # the fallback set (h200-... folder)
# Other models and loads than campaign 14: Qwen3-30B-A3B in bf16 and gpt-oss-20b (MXFP4) are new, Qwen3-30B-A3B-FP8
# at TPOT limits campaign 14 did not answer; on an H200 Mixtral-8x7B (bf16, 93 GB) replaces the FP8 model.
# Plain decoding (--spec none): the campaign checks the MoE step physics. Each answer is recommend --json (with its
# `benchmark`, the vllm bench serve command a user runs) and the text view (its Launch line); each model boots ONCE
# with the flags of its higher-load answer and the lower-load answer rides on that server (c14's README: the flags
# differ only in --max-num-seqs, which the ride records). Compared afterwards with `advisor verify --result R
# --prediction answers/<id>.json --dummy-weights`, the product's own path.
set -euo pipefail
GPU=${GPU:-H100}
D=calibration/serving_bench/$(echo $GPU | tr A-Z a-z)-vllm0.26.0-c20
[ -z "$(git status --porcelain -- advisor rules catalog calibration/*.csv)" ] || { echo "dirty advisor/rules/catalog/tables: refuse" >&2; exit 1; }
mkdir -p $D/answers
ANSWERS="q30-bf16-t35 Qwen/Qwen3-30B-A3B 35 boot q30-bf16-t35
q30-bf16-t20 Qwen/Qwen3-30B-A3B 20 ride q30-bf16-t35
gptoss-t20 openai/gpt-oss-20b 20 boot gptoss-t20
gptoss-t10 openai/gpt-oss-20b 10 ride gptoss-t20
q30-fp8-t35 Qwen/Qwen3-30B-A3B-FP8 35 boot q30-fp8-t35
q30-fp8-t20 Qwen/Qwen3-30B-A3B-FP8 20 ride q30-fp8-t35"
[ $GPU = H200 ] && ANSWERS="q30-bf16-t35 Qwen/Qwen3-30B-A3B 35 boot q30-bf16-t35
q30-bf16-t20 Qwen/Qwen3-30B-A3B 20 ride q30-bf16-t35
gptoss-t20 openai/gpt-oss-20b 20 boot gptoss-t20
gptoss-t10 openai/gpt-oss-20b 10 ride gptoss-t20
mixtral-t40 mistralai/Mixtral-8x7B-Instruct-v0.1 40 boot mixtral-t40
mixtral-t25 mistralai/Mixtral-8x7B-Instruct-v0.1 25 ride mixtral-t40"
echo "$ANSWERS" > $D/answers/list.txt
while read -r id model t role boot; do
  args=(recommend "$model" --gpu $GPU --gpus 1 --vllm-version 0.26 --prompt-len 1024 --output-len 512 --max-tpot-ms "$t" --spec none)
  echo "python3 -m advisor ${args[*]}" > $D/answers/$id.cmd
  python3 -m advisor "${args[@]}" --json > $D/answers/$id.json
  python3 -m advisor "${args[@]}" > $D/answers/$id.txt
done <<< "$ANSWERS"
python3 - "$D" "$(git rev-parse HEAD)" "$GPU" <<'PY'
import json, sys
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
    c, p = a["decision"], a["prediction"]
    assert c["speculative_method"] is None, i
    primary = next(x for x in a["benchmark"]["commands"] if x["primary"])
    out.append({"id": i, "model": model, "role": role, "boot": boot, "advisor_command": (D / f"answers/{i}.cmd").read_text().strip(),
                "advisor_commit": commit, "sla": {"max_tpot_ms": float(tmax)}, "sla_met_predicted": a["sla_met"],
                "launch": launch(i)[0], "launch_env": launch(i)[1], "boot_launch": launch(boot)[0],
                "max_num_seqs": c["max_num_seqs"], "boot_max_num_seqs": b["decision"]["max_num_seqs"],
                "pattern": primary["pattern"], "load": primary["load"], "num_prompts": primary["num_prompts"],
                "bench_argv": primary["argv"], "predicted": primary["predicted"],
                "step_ms": p["step_ms"], "running_per_replica": p["running_per_replica"]})
meta = {"campaign": "c20", "issue": 40, "step": "5, the second pre-registered set (after the MoE fix 7cc65ef)",
        "gpu": sys.argv[3], "vllm": "0.26.0", "advisor_commit": commit, "weights": "dummy (--load-format dummy)",
        "tokenizer": "word-level, vocab = config vocab_size (device/mktok.py)", "answers": out}
(D / "predictions.json").write_text(json.dumps(meta, indent=1) + "\n")
for o in out:
    pr = o["predicted"]
    print(f"{o['id']:13} {o['pattern']} {o['load']} step {o['step_ms']['value']:6.2f} TPOT {pr['tpot_ms']['value']:6.2f} tok/s {pr['output_throughput_tok_s']['value']:8.0f} seqs {o['max_num_seqs']}/{o['boot_max_num_seqs']}")
PY
