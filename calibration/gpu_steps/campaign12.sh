#!/usr/bin/env bash
# Campaign 12 (session 16, issue #22): the offline-grid step costs on a second GPU type, one H100 (the `nvidia-h100-x1`
# device kind), with the engine, method and vLLM of the H200 grids (gridbench.py, dummy weights, prefill differenced out).
# What it is for: (1) the step-cost model's GEMM constants were measured on an H200 -- this predicts an H100's plain and
# verification steps out of sample; (2) suffix's and n-gram's serialised host work on another machine class (GPU and
# CPU); (3) an H100 host profile measured instead of the spread of the known ones. Start it in the c3 call:
#   DEADLINE=$(( $(date +%s) + 1250 )) setsid nohup bash calibration/gpu_steps/campaign12.sh > /root/campaign.out 2>&1 < /dev/null &
# and poll with `bash calibration/gpu_steps/poll.sh 570`. Boots in priority order, each bounded by DEADLINE.
. "$(dirname "$0")/device_common.sh"
REPO="$(cd "$GS_DIR/../.." && pwd)"
(cd "$REPO" && PYTHONPATH=$REPO:$PYTHONPATH python3 -m advisor --data-dir /root/advisor-data host --json > $R/host.json)
lscpu > $R/lscpu.txt; nproc > $R/nproc.txt
L=$M/Llama-3.1-8B-Instruct; Q=$M/Qwen2.5-7B-Instruct
run h1-l8-k0   --model $L --spec none --conc 1,4,16,64 --reps 2
run h1-l8-s32  --model $L --spec suffix:32 --drafts 12,4,1 --conc 1,4,16,64 --reps 2
run h1-q7-k0   --model $Q --spec none --conc 1,4,16,64 --reps 2
run h1-q7-s32  --model $Q --spec suffix:32 --drafts 12,4,1 --conc 1,4,16,64 --reps 2
run h1-l8-ng5  --model $L --spec ngram:5 --lookup 3,5 --drafts 5,2 --conc 1,4,16,64 --reps 2 --out-short 192 --out-long 768
run h1-q7-ng5  --model $Q --spec ngram:5 --lookup 3,5 --drafts 5,2 --conc 1,4,16,64 --reps 2 --out-short 192 --out-long 768
save; echo "=== $(date +%T) campaign done"
