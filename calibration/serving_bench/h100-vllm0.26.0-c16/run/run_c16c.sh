#!/usr/bin/env bash
# Campaign 16, third attempt (issue 41): the two runs the second attempt did not reach, at C 1, 8, 32 as pre-registered.
# Campaign 16 (issue 41): out-of-sample check of the drafter host term; see calibration/serving_bench/h100-vllm0.26.0-c16.
set -u
R=/root/c16; M=/root/stash/models; H=/root/stash/c16models; mkdir -p $R
DEADLINE=${DEADLINE:-$(( $(date +%s) + 1100 ))}
export PYTHONPATH=/tmp/site VLLM_USE_FLASHINFER_SAMPLER=0 VLLM_CACHE_ROOT=/root/vcache PYTHONUNBUFFERED=1 ARCTIC_INFERENCE_ENABLED=0 VLLM_PLUGINS=''
{ date -u; python3 -c "import torch, vllm; print('torch', torch.__version__, 'vllm', vllm.__version__)"; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; } > $R/host.txt 2>&1
T=$M/Llama-3.1-8B-Instruct
PLAN="eagle3:3 $H/EAGLE3-mpe131072 4096
draft_model:5 $H/Llama-3.2-1B-Instruct 1024"
while read -r spec draft plen; do
  left=$(( DEADLINE - $(date +%s) ))
  [ $left -lt 60 ] && { echo "=== $(date +%T) SKIP $spec: ${left}s left" | tee -a $R/boots.txt; continue; }
  tag=${spec//:/_}_$plen
  echo "=== $(date +%T) run $spec prompt $plen ${left}s left" | tee -a $R/boots.txt
  extra=""; [ "$draft" != "-" ] && extra="--draft $draft"
  timeout $left python3 /root/stash/c16run/stepbench.py --model $T --spec $spec $extra --conc 1,8,32 --prompt-len $plen \
     --results $R/steps.jsonl > $R/$tag.log 2>&1
  echo "=== $(date +%T) $spec rc=$?" | tee -a $R/boots.txt
  grep RESULT $R/$tag.log | tee -a $R/boots.txt
  nvidia-smi --query-compute-apps=pid --format=csv,noheader | xargs -r kill -9 2>/dev/null; sleep 2
done <<< "$PLAN"
echo "=== $(date +%T) campaign done" | tee -a $R/boots.txt; touch /root/c16.done
