#!/usr/bin/env bash
# Campaign 13 (session 16, issue #22): an FP8 checkpoint's plain and verification steps on one H100 (compressed-tensors
# per-tensor FP8 weights and activations, the RedHatAI Llama-3.1-8B-Instruct-FP8 config, dummy weights): the step-cost
# model's FP8 path (weight bytes halved, the GPU table's FP8 peak) out of sample, with the minutes campaign 12 left.
# NOT RUN YET: in session 16 the machine that was to run it did not start (the first carry call got no machine, the
# later ones did, without /root/stash), and the minutes were gone. Carry as campaign 12, with `mkdir -p /root/stash`
# in every carry call, and .device/c3/models/Meta-Llama-3.1-8B-Instruct-FP8/config.json from the catalog; start it in
# the c3 call:
#   DEADLINE=$(( $(date +%s) + 300 )) bash calibration/gpu_steps/campaign13.sh
. "$(dirname "$0")/device_common.sh"
F=$M/Meta-Llama-3.1-8B-Instruct-FP8
run h1-l8f-k0  --model $F --spec none --conc 1,4,16,64 --reps 2
run h1-l8f-s32 --model $F --spec suffix:32 --drafts 12,1 --conc 1,16,64 --reps 2
save; echo "=== $(date +%T) campaign done"
