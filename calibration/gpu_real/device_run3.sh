#!/usr/bin/env bash
# Third H200 campaign (session 7, issue #22): vLLM's GPU n-gram proposer (ngram_gpu, which keeps async
# scheduling on: vllm/config/vllm.py 0.26.0 NgramGPUTypes) against the CPU proposers, with real weights, and
# the warm-up load's responses saved (real_campaign.py writes warmup-<config>.jsonl) so the own-output replay
# can feed them to its suffix tree first. Every boot runs the discarded warm-up load first.
#   1. real weights, SmolLM2-135M-Instruct: vanilla, ngram_gpu:4, suffix:32, ngram:4 on humaneval and ShareGPT
#      at concurrency 1, 8, 32 (the slices of device_run2.sh) and ShareGPT at 64; chat API, greedy, 256 tokens;
#   2. dummy weights, Llama-3.1-8B shape: vanilla, ngram_gpu:8, ngram:8, suffix:32 at concurrency 1, 8, 32, 64;
#   3. vanilla with --no-async-scheduling, warmed (the first campaign's were cold): dummy 8B and real SmolLM2.
# As run (runs3.out): steps 1 and 2 (vanilla, ngram_gpu:8) in one go; step 3's first attempt failed on
# "--extra-args --no-async-scheduling" (argparse reads the value as an option: it needs "="), then step 3 and
# 8B ngram:8, suffix:32 ran as three more invocations on the same machine; this script is all of it in order.
source "$(dirname "${BASH_SOURCE[0]}")/device_env.sh"  # set -u, env, the two models, host.json
echo "== real $(date +%T)"
python3 calibration/gpu_real/real_campaign.py --model $SMOL --configs vanilla,ngram_gpu:4,suffix:32,ngram:4 \
  --warmup-load $D/sharegpt.jsonl:32:500:564 \
  --load $D/humaneval.jsonl:1:0:8 --load $D/humaneval.jsonl:8:8:40 --load $D/humaneval.jsonl:32:40:136 \
  --load $D/sharegpt.jsonl:1:0:8 --load $D/sharegpt.jsonl:8:8:56 --load $D/sharegpt.jsonl:32:56:184 \
  --load $D/sharegpt.jsonl:64:184:440 \
  --max-tokens 256 --gmu 0.30 --max-model-len 4096 --boot-timeout 300 --server-cmd "$SERVER" \
  --data-dir $R/advisor-data --out $R/smol-g
echo "== dummy 8B $(date +%T)"
L8LOADS="--load $D/sharegpt.jsonl:1:0:8 --load $D/sharegpt.jsonl:8:8:56 --load $D/sharegpt.jsonl:32:56:248 --load $D/sharegpt.jsonl:64:248:500"
python3 calibration/gpu_real/real_campaign.py --model $L8 --configs vanilla,ngram_gpu:8,ngram:8,suffix:32 --dummy-weights \
  --ignore-eos --warmup-load $D/sharegpt.jsonl:32:500:564 $L8LOADS \
  --max-tokens 256 --gmu 0.85 --max-model-len 4096 --boot-timeout 300 --server-cmd "$SERVER" --api completions \
  --data-dir $R/advisor-data --out $R/l8-g
echo "== dummy 8B no-async $(date +%T)"
python3 calibration/gpu_real/real_campaign.py --model $L8 --configs vanilla --dummy-weights --extra-args=--no-async-scheduling \
  --ignore-eos --warmup-load $D/sharegpt.jsonl:32:500:564 $L8LOADS \
  --max-tokens 256 --gmu 0.85 --max-model-len 4096 --boot-timeout 300 --server-cmd "$SERVER" --api completions \
  --data-dir $R/advisor-data --out $R/l8-noasync-w
echo "== real no-async $(date +%T)"
python3 calibration/gpu_real/real_campaign.py --model $SMOL --configs vanilla --extra-args=--no-async-scheduling \
  --warmup-load $D/sharegpt.jsonl:32:500:564 \
  --load $D/humaneval.jsonl:1:0:8 --load $D/humaneval.jsonl:8:8:40 --load $D/humaneval.jsonl:32:40:136 \
  --load $D/sharegpt.jsonl:1:0:8 --load $D/sharegpt.jsonl:8:8:56 --load $D/sharegpt.jsonl:32:56:184 \
  --load $D/sharegpt.jsonl:64:184:440 \
  --max-tokens 256 --gmu 0.30 --max-model-len 4096 --boot-timeout 300 --server-cmd "$SERVER" \
  --data-dir $R/advisor-data --out $R/smol-noasync-w
echo "== all done $(date +%T)"
