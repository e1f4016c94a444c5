#!/usr/bin/env bash
# Plain decode steps of a GQA MoE (Qwen3-30B-A3B) and a bigger dense model (Qwen2.5-32B) at TP 1, for the
# absolute figures of the layout search (docs/layout.md). One foreground call: bash THIS SECONDS
DEADLINE=$(( $(date +%s) + ${1:-480} ))
. "$(dirname "$0")/device_common.sh"
run q3-k0  --model $M/Qwen3-30B-A3B --spec none --conc 1,8,32,64 --reps 2
run q32-k0 --model $M/Qwen2.5-32B-Instruct --spec none --conc 1,8,64 --reps 1
save; ls -la $R
