#!/usr/bin/env bash
# Campaign 15 (issue 41): decode step of Llama-3.1-8B-Instruct on one H100, vLLM 0.26.0, dummy weights, offline
# engine (stepbench.py: two output lengths differenced, steps counted from vLLM's accepted-token counter), plain and
# with drafters, in the pre-registered order; a run the deadline does not reach is reported as not run.
set -u
R=/root/c15; M=/root/stash/models; H=/root/stash/c15models; mkdir -p $R
DEADLINE=${DEADLINE:-$(( $(date +%s) + 1000 ))}
export PYTHONPATH=/tmp/site:/tmp/arctic VLLM_USE_FLASHINFER_SAMPLER=0 VLLM_CACHE_ROOT=/root/vcache PYTHONUNBUFFERED=1 ARCTIC_INFERENCE_ENABLED=0 VLLM_PLUGINS=''
{ date -u; nproc; python3 -c "import torch, vllm; print('torch', torch.__version__, 'vllm', vllm.__version__)"; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv; } > $R/host.txt 2>&1
T=$M/Llama-3.1-8B-Instruct
PLAN="none -
eagle3:3 $H/EAGLE3-LLaMA3.1-Instruct-8B
draft_model:3 $H/Llama-3.2-1B-Instruct
eagle3:1 $H/EAGLE3-LLaMA3.1-Instruct-8B
eagle3:5 $H/EAGLE3-LLaMA3.1-Instruct-8B"
while read -r spec draft; do
  left=$(( DEADLINE - $(date +%s) ))
  [ $left -lt 150 ] && { echo "=== $(date +%T) SKIP $spec: ${left}s left" | tee -a $R/boots.txt; continue; }
  tag=${spec//:/_}
  echo "=== $(date +%T) run $spec ${left}s left" | tee -a $R/boots.txt
  extra=""; [ "$draft" != "-" ] && extra="--draft $draft"
  timeout $left python3 /root/stash/c15run/stepbench.py --model $T --spec $spec $extra --conc 1,8,32,64 \
     --results $R/steps.jsonl > $R/$tag.log 2>&1
  echo "=== $(date +%T) $spec rc=$?" | tee -a $R/boots.txt
  grep RESULT $R/$tag.log | tee -a $R/boots.txt
  nvidia-smi --query-compute-apps=pid --format=csv,noheader | xargs -r kill -9 2>/dev/null; sleep 2
done <<< "$PLAN"
echo "=== $(date +%T) campaign done" | tee -a $R/boots.txt; touch /root/c15.done
