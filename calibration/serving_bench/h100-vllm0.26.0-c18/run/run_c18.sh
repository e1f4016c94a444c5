#!/usr/bin/env bash
# Campaign 17 (issue 41): the draft-model step against K (diagnostic after campaign 16); see
# calibration/serving_bench/h100-vllm0.26.0-c18. One boot per configuration, in this order, until the deadline.
set -u
R=/root/c18; M=/root/stash/models; H=/root/stash/c16models; mkdir -p $R
DEADLINE=${DEADLINE:-$(( $(date +%s) + 250 ))}
export PYTHONPATH=/tmp/site VLLM_USE_FLASHINFER_SAMPLER=0 VLLM_CACHE_ROOT=/root/vcache PYTHONUNBUFFERED=1 ARCTIC_INFERENCE_ENABLED=0 VLLM_PLUGINS=''
{ date -u; python3 -c "import torch, vllm; print('torch', torch.__version__, 'vllm', vllm.__version__)"; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; lscpu | head -20; } > $R/host.txt 2>&1
T=$M/Llama-3.1-8B-Instruct
PLAN="draft_model:6 $H/Llama-3.2-1B-Instruct"
while read -r spec draft; do
  left=$(( DEADLINE - $(date +%s) ))
  [ $left -lt 100 ] && { echo "=== $(date +%T) SKIP $spec: ${left}s left" | tee -a $R/boots.txt; continue; }
  tag=${spec//:/_}
  echo "=== $(date +%T) run $spec ${left}s left" | tee -a $R/boots.txt
  extra=""; [ "$draft" != "-" ] && extra="--draft $draft"
  timeout $left python3 /root/stash/c18run/stepbench.py --model $T --spec $spec $extra --conc 1,8,32 --prompt-len 2048 \
     --results $R/steps.jsonl > $R/$tag.log 2>&1
  echo "=== $(date +%T) $spec rc=$?" | tee -a $R/boots.txt
  grep RESULT $R/$tag.log | tee -a $R/boots.txt
  nvidia-smi --query-compute-apps=pid --format=csv,noheader | xargs -r kill -9 2>/dev/null; sleep 2
done <<< "$PLAN"
echo "=== $(date +%T) campaign done" | tee -a $R/boots.txt; touch /root/c18.done
