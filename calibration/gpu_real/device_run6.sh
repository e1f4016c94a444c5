#!/usr/bin/env bash
# Seventh H200 campaign (session 11, issue #22). Two questions, passes interleaved so that both see the host's drift:
#  - (b)'s two priors misses are campaign 4's humaneval c16 [0:48] and c32 [48:164] (smol-h3, one pass each, suffix
#    x1.07 / x1.05 over vanilla, within one pass's noise). The "h3" passes rerun smol-h3's exact command (same
#    loads, warm-up and server command, so the same campaign ids on the same host fingerprint): more passes of
#    those settings, so their medians decide instead of one draw.
#  - The probe's own CPU loop (advisor/probe/hostcpu.py) now rotates over the allowed cores as cpu_timeline.py
#    does. The "j" passes rerun campaign 6's unpinned passes (device_run5.sh, odd passes) to check that the
#    records' host_loop_ms tracks the vanilla step as the timeline's loop did (r 0.80 in campaign 6).
source "$(dirname "${BASH_SOURCE[0]}")/device_env.sh"
H=$D/humaneval.jsonl; S=$D/sharegpt.jsonl
start_timelines
common=(--warmup-load $S:32:500:564 --max-tokens 256 --gmu 0.30 --max-model-len 4096 --boot-timeout 300
        --server-cmd "$SERVER" --data-dir $R/advisor-data --cpu-check)
for pass in ${PASSES:-1 2 3 4}; do  # PASSES="3 4": a second machine goes on where the first stopped
  echo "== smol-m$pass $(date +%T)"
  python3 calibration/gpu_real/real_campaign.py --model $SMOL --configs vanilla,suffix:32,ngram:4 \
    --load $H:16:0:48 --load $H:32:48:164 --load $S:32:2264:2392 "${common[@]}" --out $R/smol-m$pass
  echo "== smol-n$pass $(date +%T)"
  python3 calibration/gpu_real/real_campaign.py --model $SMOL --configs vanilla,suffix:32 \
    --load $H:32:40:136 --load $S:64:184:440 --load $S:64:600:856 --load $S:64:856:1112 --load $S:16:1112:1176 \
    "${common[@]}" --out $R/smol-n$pass
done
echo "== all done $(date +%T)"
