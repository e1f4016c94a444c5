#!/usr/bin/env bash
# The whole #12 grid in the background (one machine holds 30 minutes; a call 10): start it with
#   DEADLINE=$(( $(date +%s) + 1500 )) setsid nohup bash calibration/gpu_steps/campaign.sh > /root/campaign.out 2>&1 < /dev/null &
# in the c3 call, then poll with `bash calibration/gpu_steps/poll.sh` in calls back to back (each may
# sleep first): every poll copies the results so far into $OUT. Boots in priority order.
. "$(dirname "$0")/device_common.sh"
REPO="$(cd "$GS_DIR/../.." && pwd)"
run q3-k0    --model $M/Qwen3-30B-A3B --spec none --conc 1,8,32,64 --reps 2
run q3-k32   --model $M/Qwen3-30B-A3B --spec suffix:32 --drafts 12,4,2,1 --conc 1,8,32,64 --reps 2
run v2-k0    --model $M/DeepSeek-V2-Lite --spec none --conc 1,8,32,64 --reps 2
run v2-k32   --model $M/DeepSeek-V2-Lite --spec suffix:32 --drafts 12,4,2,1 --conc 1,8,32,64 --reps 2
probe() {  # advisor probe (the product's campaign) against real `vllm serve`, dummy weights, a 2,048-token BPE
  local P=/root/probe-models/Llama-3.1-8B-Instruct
  mkdir -p $P && cp $M/Llama-3.1-8B-Instruct/config.json $P/
  python3 -c "import sys; sys.path.insert(0, '$REPO/tests/vllm_helpers'); from make_tiny_llama import train_tokenizer; from pathlib import Path; train_tokenizer(Path('$P'))"
  python3 -c "
import json, sysconfig, pathlib
with open('/root/probe-prompts.jsonl', 'w') as f:
    for p in sorted(pathlib.Path(sysconfig.get_paths()['stdlib']).glob('*.py'))[120:400]:
        t = p.read_text(errors='ignore')[:1600]
        if len(t) > 400: f.write(json.dumps({'prompt': 'Continue this code:\n' + t}) + '\n')"
  (cd "$REPO" && PYTHONPATH=$REPO:$PYTHONPATH timeout $(( DEADLINE - $(date +%s) < 480 ? DEADLINE - $(date +%s) : 480 )) python3 -m advisor --data-dir /root/advisor-data \
     probe $P --corpus /root/probe-prompts.jsonl --configs vanilla,suffix:32 --duration 25 --concurrency 32 --max-tokens 512 \
     --ignore-eos --api completions --server-cmd "python3 -m vllm.entrypoints.openai.api_server" --dummy-weights \
     --gpu-memory-utilization 0.85 --max-model-len 4096 --boot-timeout 240 --json > $R/probe.json
   PYTHONPATH=$REPO:$PYTHONPATH python3 -m advisor --data-dir /root/advisor-data host --json > $R/host.json)
  save
}
[ $((DEADLINE - $(date +%s))) -gt 300 ] && probe
run q32-k0   --model $M/Qwen2.5-32B-Instruct --spec none --conc 1,8,64 --reps 2 --out-short 96 --out-long 384
run q32-k32  --model $M/Qwen2.5-32B-Instruct --spec suffix:32 --drafts 12,4,2,1 --conc 1,8,64 --reps 1 --out-short 96 --out-long 384
run l8-k32r  --model $M/Llama-3.1-8B-Instruct --spec suffix:32 --drafts 12,8,4,2,1 --conc 1,8,32,64 --reps 2
VLLM_USE_DEEP_GEMM=0 run v3l8-k0  --model $M/DeepSeek-V3-8L --spec none --conc 1,8,32,64 --reps 2
VLLM_USE_DEEP_GEMM=0 run v3l8-k32 --model $M/DeepSeek-V3-8L --spec suffix:32 --drafts 12,4,2,1 --conc 1,8,32,64 --reps 2
run l8-k16   --model $M/Llama-3.1-8B-Instruct --spec suffix:16 --drafts 12 --conc 8 --reps 1
save; echo "=== $(date +%T) campaign done"
