#!/usr/bin/env bash
# Tenth H200 campaign (session 14, issue #22 item 4): what an MTP step costs with a COMPILED drafter.
#  - Campaign 9 measured GLM-4.5's MTP (glm4_moe_mtp.py: no @support_torch_compile, the drafter runs eagerly):
#    +6.1 ms for the first draft, +3.5 ms per further draft. DeepSeek-V3/R1's drafter (deepseek_mtp.py) IS compiled
#    in vLLM 0.26, and the product still prices it as GPU work ASSUMED at one MTP layer's share of the roofline.
#    This measures it: `advisor probe`'s own path (real_campaign.py) with mtp:1 and mtp:3 against vanilla, fresh boots,
#    on a DeepSeek-V3 shape cut to 4 decoder layers (3 dense + 1 MoE, its MTP layer kept; bf16: the FP8 block kernels'
#    JIT warm-up does not fit a lent half hour), dummy weights (acceptance near zero; the point is the step).
# The model directory (config.json, SmolLM2's tokenizer: its ids fit the 129,280 vocabulary) travels in
# .device/c3/models/DeepSeek-V3-L4 (calibration/gpu_real/README.md, "Tenth campaign").
NO_SMOL=1 source "$(dirname "${BASH_SOURCE[0]}")/device_env.sh"
M=/root/stash/models/DeepSeek-V3-L4; S=$D/sharegpt.jsonl
export VLLM_USE_DEEP_GEMM=0
start_timelines
common=(--dummy-weights --ignore-eos --api completions --warmup-load $S:32:500:564 --max-tokens 256 --gmu 0.85
        --max-model-len 4096 --boot-timeout 500 --server-cmd "$SERVER" --data-dir $R/advisor-data --cpu-check)
loads=(--load $S:1:0:8 --load $S:8:8:56 --load $S:32:56:248)
for pass in ${PASSES:-1 2 3}; do
  echo "== ds-p$pass $(date +%T)"
  python3 calibration/gpu_real/real_campaign.py --model $M --configs vanilla,mtp:1,mtp:3 "${loads[@]}" "${common[@]}" \
    --out $R/ds-p$pass
done
echo "== all done $(date +%T)"
