#!/usr/bin/env bash
# Campaign 4, part b (same machine, right after device_run4.sh): campaign 3's own prompt slices again in fresh
# boots (humaneval c32 [40:136], ShareGPT c64 [184:440]), vanilla and suffix:32: the replicate on the same
# prompts, to split pass-to-pass noise into prompt sampling and run-to-run.
source "$(dirname "${BASH_SOURCE[0]}")/device_env.sh"
H=$D/humaneval.jsonl; S=$D/sharegpt.jsonl
echo "== smol-h4 $(date +%T)"
python3 calibration/gpu_real/real_campaign.py --model $SMOL --configs vanilla,suffix:32 \
  --warmup-load $S:32:500:564 --load $H:32:40:136 --load $S:64:184:440 \
  --max-tokens 256 --gmu 0.30 --max-model-len 4096 --boot-timeout 300 --server-cmd "$SERVER" \
  --data-dir $R/advisor-data --out $R/smol-h4
echo "== all done $(date +%T)"
