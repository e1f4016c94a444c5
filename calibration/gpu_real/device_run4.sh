#!/usr/bin/env bash
# Fourth H200 campaign (session 8, issue #22): the speculative step at high concurrency on real weights.
# Campaign 3 found SmolLM2's suffix step concave in the batch (flat extra over the plain step from c8 to c64 on
# ShareGPT, growing on humaneval) and its one ShareGPT c64 pass the only (b) setting not chosen within 2 %.
# This runs SmolLM2-135M-Instruct (real weights) vanilla, suffix:32 and ngram:4 at concurrency 16, 64 and 128,
# two fresh boots per configuration (passes A and B: a pass-to-pass replicate, never a prompt twice in one
# boot, because the suffix tree would then replay its own earlier answer), then pass C at 16/32 if time is left.
# ShareGPT prompts 600-2400 are new (calibration/gpu_real/make_data.py --sharegpt 2400; the first 600 are
# campaigns 1-3's). Each record now carries mean_in_flight (Little's law over the load's own requests), the
# concurrency the step actually ran at when a short load's last wave ramps down.
source "$(dirname "${BASH_SOURCE[0]}")/device_env.sh"  # set -u, env, the two models, host.json
H=$D/humaneval.jsonl; S=$D/sharegpt.jsonl
run() {  # $1 output folder, the rest: --load specs
  local out=$1; shift
  echo "== $out $(date +%T)"
  python3 calibration/gpu_real/real_campaign.py --model $SMOL --configs vanilla,suffix:32,ngram:4 \
    --warmup-load $S:32:500:564 "$@" \
    --max-tokens 256 --gmu 0.30 --max-model-len 4096 --boot-timeout 300 --server-cmd "$SERVER" \
    --data-dir $R/advisor-data --out $R/$out
}
run smol-h  --load $H:64:0:164  --load $S:16:600:664   --load $S:64:664:920   --load $S:128:920:1432
run smol-h2 --load $H:128:0:164 --load $S:16:1432:1496 --load $S:64:1496:1752 --load $S:128:1752:2264
run smol-h3 --load $H:16:0:48 --load $H:32:48:164 --load $S:32:2264:2392
echo "== all done $(date +%T)"
