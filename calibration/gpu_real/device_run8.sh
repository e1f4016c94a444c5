#!/usr/bin/env bash
# Ninth H200 campaign (session 13, issue #22 item 4): what an MTP step costs on this host.
#  - `recommend` launches MTP for checkpoints with MTP layers (DeepSeek-V3/R1, GLM-4.5, Qwen3-Next) and prices its step
#    as GPU work with async scheduling kept on (advisor.predict.absolute.mtp_gain): no CPU proposer, no host floor
#    serialised. No MTP step had been measured. This runs `advisor probe`'s own path (real_campaign.py) with `mtp:1`
#    and `mtp:3` against vanilla on a GLM-4.5-Air shape cut to 12 decoder layers (it fits one H200 in bf16 with
#    dummy weights; the MTP layer is the checkpoint's one), plus ngram:4 (a CPU proposer, async off) and vanilla
#    with --no-async-scheduling on the same shape: what async scheduling is worth for a MoE step.
#  - Dummy weights: the MTP head's drafts are not the main model's argmax, so acceptance is near zero and K̄ near 1;
#    the point is R, the step's cost multiple (step ms = K̄ x concurrency / tok/s from vLLM's counters).
# The model directory (config.json with num_hidden_layers 12, SmolLM2's tokenizer: its ids fit the vocabulary)
# travels in .device/c3/models/GLM-4.5-Air-L12 (calibration/gpu_real/README.md, "Ninth campaign").
NO_SMOL=1 source "$(dirname "${BASH_SOURCE[0]}")/device_env.sh"
G=/root/stash/models/GLM-4.5-Air-L12; S=$D/sharegpt.jsonl
start_timelines
common=(--dummy-weights --ignore-eos --api completions --warmup-load $S:32:500:564 --max-tokens 256 --gmu 0.85
        --max-model-len 4096 --boot-timeout 500 --server-cmd "$SERVER" --data-dir $R/advisor-data --cpu-check)
loads=(--load $S:1:0:8 --load $S:8:8:56 --load $S:32:56:248)
for pass in ${PASSES:-1 2}; do
  echo "== glm-p$pass $(date +%T)"
  cfgs=vanilla,mtp:1,mtp:3; [ "$pass" = 1 ] && cfgs=$cfgs,ngram:4
  python3 calibration/gpu_real/real_campaign.py --model $G --configs $cfgs "${loads[@]}" "${common[@]}" --out $R/glm-p$pass
  if [ "$pass" = 1 ]; then
    echo "== glm-noasync $(date +%T)"
    python3 calibration/gpu_real/real_campaign.py --model $G --configs vanilla --extra-args=--no-async-scheduling \
      "${loads[@]}" "${common[@]}" --out $R/glm-noasync
  fi
done
echo "== all done $(date +%T)"
