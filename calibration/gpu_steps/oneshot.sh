#!/usr/bin/env bash
# The plan that made h200-vllm0.26.0/ (one foreground call): Llama-3.1-8B plain and suffix K=32 with the
# draft capped at 12 (uncapped), 8, 4, 2, 1, then DeepSeek-V2-Lite and Qwen3-30B-A3B while time lasts.
#   bash calibration/gpu_steps/oneshot.sh SECONDS      (in the c3 call, after the copy)
DEADLINE=$(( $(date +%s) + ${1:-480} ))
. "$(dirname "$0")/device_common.sh"
run l8-k0  --model $M/Llama-3.1-8B-Instruct --spec none --conc 1,8,32,64 --reps 2
run l8-k32 --model $M/Llama-3.1-8B-Instruct --spec suffix:32 --drafts 12,8,4,2,1 --conc 1,8,32,64 --reps 1
run v2-k0  --model $M/DeepSeek-V2-Lite --spec none --conc 1,8,32,64 --reps 2
run v2-k32 --model $M/DeepSeek-V2-Lite --spec suffix:32 --drafts 12,4,2,1 --conc 1,8,32,64 --reps 1
run q3-k0  --model $M/Qwen3-30B-A3B --spec none --conc 1,8,64 --reps 1
run q3-k32 --model $M/Qwen3-30B-A3B --spec suffix:32 --drafts 12,4,1 --conc 1,8,64 --reps 1
save; ls -la $R
