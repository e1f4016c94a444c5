#!/usr/bin/env bash
# Campaign 4, part c: suffix:32 once more on part b's slices in a fresh boot (the within-session replicate). Run twice: smol-h5, then smol-h6 (bash device_run4c.sh smol-h6).
source "$(dirname "${BASH_SOURCE[0]}")/device_env.sh"
OUTN=${1:-smol-h5}; H=$D/humaneval.jsonl; S=$D/sharegpt.jsonl
echo "== $OUTN $(date +%T)"
python3 calibration/gpu_real/real_campaign.py --model $SMOL --configs suffix:32 \
  --warmup-load $S:32:500:564 --load $H:32:40:136 --load $S:64:184:440 \
  --max-tokens 256 --gmu 0.30 --max-model-len 4096 --boot-timeout 300 --server-cmd "$SERVER" \
  --data-dir $R/advisor-data --out $R/$OUTN
echo "== all done $(date +%T)"
