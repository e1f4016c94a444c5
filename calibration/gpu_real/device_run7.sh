#!/usr/bin/env bash
# Eighth H200 campaign (session 12, issue #22): n-gram's K out of sample, and concurrency 4.
#  - Every n-gram run so far was ngram:4. The published n-gram rows run K 5 and 32 (calibration/published/), and
#    `recommend --ngram-k` prices any K from the same step-cost model and replay. ngram:16 beside ngram:4 on the
#    same loads and boots' host checks whether the K the predictor never saw measured is priced as measured.
#  - Concurrency 4 was never probed (1, 8, 16, 32, 64, 128 were): a setting no serving fit has seen.
# Passes repeat the same loads (same campaign ids), so their medians decide instead of one boot.
source "$(dirname "${BASH_SOURCE[0]}")/device_env.sh"
H=$D/humaneval.jsonl; S=$D/sharegpt.jsonl
start_timelines
common=(--warmup-load $S:32:500:564 --max-tokens 256 --gmu 0.30 --max-model-len 4096 --boot-timeout 300
        --server-cmd "$SERVER" --data-dir $R/advisor-data --cpu-check)
for pass in ${PASSES:-1 2 3}; do
  echo "== smol-q$pass $(date +%T)"
  python3 calibration/gpu_real/real_campaign.py --model $SMOL --configs vanilla,ngram:4,ngram:16,suffix:32 \
    --load $H:4:0:32 --load $H:32:32:164 --load $S:4:1176:1208 --load $S:32:1208:1336 --load $S:128:1336:1720 \
    "${common[@]}" --out $R/smol-q$pass
done
echo "== all done $(date +%T)"
