#!/usr/bin/env bash
# Campaign 19 (session 20, issue 42 (b)): real weights where speculation should win, pre-registered
# (calibration/gpu_real/c19/predictions.json, committed before any device call). SmolLM2-135M-Instruct (real weights,
# built from the GGUF parts gs.* in /root/stash), vanilla / suffix:32 / ngram:4 on the edit corpus
# (calibration/gpu_real/edit/edit.jsonl: HumanEval code handed back renamed or without its docstring), through the
# probe's own code (real_campaign.py), chat API, greedy, 256 tokens, one boot per configuration per pass.
# Loads (disjoint slices of the 327 prompts): warm-up c8 [0:16] (not recorded), c1 [16:32], c8 [32:112], c32 [112:327].
source "$(dirname "${BASH_SOURCE[0]}")/device_env.sh"  # set -u, env, the real model, host.json
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $R/nvidia-smi.csv
lscpu > $R/lscpu.txt
E=$PWD/calibration/gpu_real/edit/edit.jsonl
for pass in ${PASSES:-1 2}; do
  echo "== edit-p$pass $(date +%T)"
  python3 calibration/gpu_real/real_campaign.py --model $SMOL --configs vanilla,suffix:32,ngram:4 \
    --warmup-load $E:8:0:16 --load $E:1:16:32 --load $E:8:32:112 --load $E:32:112:327 \
    --max-tokens 256 --gmu 0.30 --max-model-len 4096 --boot-timeout 300 --server-cmd "$SERVER" \
    --data-dir $R/advisor-data --out $R/edit-p$pass
done
echo "== all done $(date +%T)"
