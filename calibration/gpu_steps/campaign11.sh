#!/usr/bin/env bash
# Campaign 11 (session 15, issue #22): what an n-gram verification step costs on the H200, offline engine, so that
# the `h200-vllm0.26.0` host profile's n-gram terms are measured instead of inferred from suffix's. Same engine,
# machine class and method as the shipped suffix grid (gridbench.py, dummy weights, prefill differenced out), with
# suffix:32 re-measured beside it on the same machine (a replicate of the shipped grid, across machine loans) and a
# second dense model for a held-out check. Start it in the c3 call:
#   DEADLINE=$(( $(date +%s) + 1250 )) setsid nohup bash calibration/gpu_steps/campaign11.sh > /root/campaign.out 2>&1 < /dev/null &
# and poll with `bash calibration/gpu_steps/poll.sh 570`. Boots in priority order, each bounded by DEADLINE.
. "$(dirname "$0")/device_common.sh"
REPO="$(cd "$GS_DIR/../.." && pwd)"
(cd "$REPO" && PYTHONPATH=$REPO:$PYTHONPATH python3 -m advisor --data-dir /root/advisor-data host --json > $R/host.json)
lscpu > $R/lscpu.txt; nproc > $R/nproc.txt
L=$M/Llama-3.1-8B-Instruct; Q=$M/Qwen2.5-32B-Instruct
run l8n-k0    --model $L --spec none --conc 1,4,16,64 --reps 2
run l8n-ng32  --model $L --spec ngram:32 --lookup 3,5 --drafts 32,12,4,1 --conc 1,4,16,64 --reps 2 --out-short 256 --out-long 1280
run q32n-k0   --model $Q --spec none --conc 1,4,16,64 --reps 2 --out-short 96 --out-long 384
run q32n-ng32 --model $Q --spec ngram:32 --lookup 3,5 --drafts 32,4,1 --conc 1,4,16,64 --reps 2 --out-short 192 --out-long 960
run l8n-s32   --model $L --spec suffix:32 --drafts 12,4,1 --conc 1,4,16,64 --reps 2
run l8n-ng5   --model $L --spec ngram:5 --lookup 3,5 --drafts 5,2 --conc 1,4,16,64 --reps 2 --out-short 192 --out-long 768
save; echo "=== $(date +%T) campaign done"
