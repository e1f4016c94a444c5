#!/usr/bin/env bash
# Second H200 campaign (session 6, issue #22): what a suffix / n-gram verification step costs behind
# `vllm serve` as a function of the draft length, and whether the first session's short loads carried
# one-time warm-up cost. Every boot runs a discarded warm-up load first (real_campaign.py --warmup-load).
#   1. dummy weights, Llama-3.1-8B shape (sharegpt text, ignore_eos 256 tokens, completions API):
#      vanilla, suffix:32, suffix:4, ngram:8 at concurrency 1, 8, 32 (the draft length of a dummy model
#      is about its cap: suffix:32 drafts ~11, suffix:4 4, ngram:8 8, ngram:4 4 (first campaign));
#   2. real weights, SmolLM2-135M-Instruct: vanilla, suffix:32, suffix:4 on humaneval and ShareGPT at
#      concurrency 1, 8, 32 (the slices of device_run.sh), chat API, greedy, 256 tokens.
source "$(dirname "${BASH_SOURCE[0]}")/device_env.sh"  # set -u, env, the two models, host.json
echo "== dummy 8B $(date +%T)"
python3 calibration/gpu_real/real_campaign.py --model $L8 --configs vanilla,suffix:32,suffix:4 --dummy-weights \
  --ignore-eos --warmup-load $D/sharegpt.jsonl:32:500:564 \
  --load $D/sharegpt.jsonl:1:0:8 --load $D/sharegpt.jsonl:8:8:56 --load $D/sharegpt.jsonl:32:56:248 \
  --max-tokens 256 --gmu 0.85 --max-model-len 4096 --boot-timeout 300 --server-cmd "$SERVER" --api completions \
  --data-dir $R/advisor-data --out $R/l8-dummy-k
echo "== real $(date +%T)"
python3 calibration/gpu_real/real_campaign.py --model $SMOL --configs vanilla,suffix:4,suffix:32 \
  --warmup-load $D/sharegpt.jsonl:32:500:564 \
  --load $D/humaneval.jsonl:1:0:8 --load $D/humaneval.jsonl:8:8:40 --load $D/humaneval.jsonl:32:40:136 \
  --load $D/sharegpt.jsonl:1:0:8 --load $D/sharegpt.jsonl:8:8:56 --load $D/sharegpt.jsonl:32:56:184 \
  --max-tokens 256 --gmu 0.30 --max-model-len 4096 --boot-timeout 300 --server-cmd "$SERVER" \
  --data-dir $R/advisor-data --out $R/smol-k
echo "== all done $(date +%T)"
