#!/usr/bin/env bash
# Fifth H200 campaign (session 9, issue #22): what makes a speculative step's cost vary x1.5-2 between boots?
# Campaign 4 measured the same suffix:32 load in fresh boots at 8,060-12,002 tok/s (ShareGPT c64) with K̄ within
# 3 %. This alternates vanilla and suffix:32 boots (one real_campaign.py call per pass, vanilla first) on the same
# slices in every pass, several loads per boot (disjoint slices: a within-boot replicate), and records beside
# them: the single-thread speed over time on every core (cpu_timeline.py), the GPU's clocks and power
# (nvidia-smi every second), and per load a fixed loop's time and every server process's CPU seconds
# (real_campaign.py --cpu-check, O/cpu.jsonl). Even passes pin the server to cores 2-9 (taskset), odd ones do not.
source "$(dirname "${BASH_SOURCE[0]}")/device_env.sh"
H=$D/humaneval.jsonl; S=$D/sharegpt.jsonl
start_timelines
for pass in 1 2 3 4 5 6 7 8; do
  if [ $((pass % 2)) -eq 0 ]; then CMD="taskset -c 2-9 $SERVER"; else CMD="$SERVER"; fi
  echo "== smol-i$pass $(date +%T) server: $CMD"
  python3 calibration/gpu_real/real_campaign.py --model $SMOL --configs vanilla,suffix:32 --cpu-check \
    --warmup-load $S:32:500:564 --load $H:32:40:136 --load $S:64:184:440 --load $S:64:600:856 \
    --load $S:64:856:1112 --load $S:16:1112:1176 \
    --max-tokens 256 --gmu 0.30 --max-model-len 4096 --boot-timeout 300 --server-cmd "$CMD" \
    --data-dir $R/advisor-data --out $R/smol-i$pass
done
echo "== all done $(date +%T)"
