#!/usr/bin/env bash
# Campaign 14 on the GPU machine (one H100, vLLM 0.26.0 in /tmp/site, dummy weights): for each model, boot the
# OpenAI server ONCE with the flags of its pre-registered boot answer (predictions.json, rendered Launch line +
# env, plus --load-format dummy and the word-level tokenizer), wait for /health, run `vllm bench serve` closed
# loop at each pre-registered concurrency (3C prompts), stop the server, next model. Bounded by $DEADLINE.
# Results: /root/c14/<id>.json (bench), <boot>.server.log, boots.txt, host facts; /root/c14.done at the end.
set -u
R=/root/c14; M=/root/stash/models; mkdir -p $R
DEADLINE=${DEADLINE:-$(( $(date +%s) + 1100 ))}
export PYTHONPATH=/tmp/site VLLM_USE_FLASHINFER_SAMPLER=0 VLLM_CACHE_ROOT=/root/vcache PYTHONUNBUFFERED=1
# the answers' env (decision.env, identical for all eight answers)
export ARCTIC_INFERENCE_ENABLED=0 PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True VLLM_PLUGINS=''
{ date -u; uname -a; nproc; free -g; python3 -V; python3 -c "import torch, vllm; print('torch', torch.__version__, 'vllm', vllm.__version__)"; } > $R/host.txt 2>&1
lscpu > $R/lscpu.txt; nvidia-smi > $R/nvidia-smi.txt
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv > $R/gpu.csv
for d in $M/*/; do python3 /root/stash/run/mktok.py ${d%/} >> $R/host.txt 2>&1; done

# boot-id model-dir max_num_seqs min-seconds-needed "load-id:C ..."
PLAN="l8-bf16-t30 Llama-3.1-8B-Instruct 192 300 l8-bf16-t30:192,l8-bf16-t15:64
q30-fp8-t25 Qwen3-30B-A3B-FP8 192 420 q30-fp8-t25:192,q30-fp8-t15:48
dsv2l-t20 DeepSeek-V2-Lite 192 330 dsv2l-t20:192,dsv2l-t15:64
l8-fp8-t25 Meta-Llama-3.1-8B-Instruct-FP8 192 270 l8-fp8-t25:192,l8-fp8-t12:64"
# fallback set (predictions in ../h200-vllm0.26.0-c14/), used only when the machine is an H200
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 && PLAN="l8-bf16-t25 Llama-3.1-8B-Instruct 192 300 l8-bf16-t25:192,l8-bf16-t12:64
q30-fp8-t20 Qwen3-30B-A3B-FP8 192 420 q30-fp8-t20:192,q30-fp8-t12:64
dsv2l-t15 DeepSeek-V2-Lite 192 330 dsv2l-t15:192,dsv2l-t12:64
l8-fp8-t20 Meta-Llama-3.1-8B-Instruct-FP8 192 270 l8-fp8-t20:192,l8-fp8-t12:96"

while read -r boot dir seqs need loads; do
  left=$(( DEADLINE - $(date +%s) ))
  [ $left -lt $need ] && { echo "=== $(date +%T) SKIP $boot: ${left}s left < ${need}s" | tee -a $R/boots.txt; continue; }
  D=$M/$dir; t0=$(date +%s)
  echo "=== $(date +%T) boot $boot ($dir) ${left}s left" | tee -a $R/boots.txt
  setsid python3 -m vllm.entrypoints.openai.api_server --model $D --load-format dummy --host 127.0.0.1 --port 8011 \
    --tensor-parallel-size 1 --gpu-memory-utilization 0.85 --max-model-len 16384 --max-num-seqs $seqs \
    --max-num-batched-tokens 16384 --compilation-config '{"cudagraph_mode":"FULL_AND_PIECEWISE"}' \
    > $R/$boot.server.log 2>&1 < /dev/null &
  SP=$!; up=0
  while [ $(date +%s) -lt $DEADLINE ] && kill -0 $SP 2>/dev/null; do
    curl -sf http://127.0.0.1:8011/health > /dev/null && { up=1; break; }; sleep 3
  done
  echo "=== $(date +%T) $boot up=$up boot_s=$(( $(date +%s) - t0 ))" | tee -a $R/boots.txt
  if [ $up = 1 ]; then
    for lc in ${loads//,/ }; do
      id=${lc%%:*}; C=${lc##*:}; left=$(( DEADLINE - $(date +%s) ))
      [ $left -lt 45 ] && { echo "=== SKIP load $id (${left}s left)" | tee -a $R/boots.txt; continue; }
      echo "=== $(date +%T) bench $id C=$C" | tee -a $R/boots.txt
      timeout $left python3 -m vllm.entrypoints.cli.main bench serve --backend vllm --base-url http://127.0.0.1:8011 \
        --model $D --tokenizer $D --dataset-name random --random-input-len 1024 --random-output-len 512 \
        --num-prompts $((3 * C)) --max-concurrency $C --ignore-eos --percentile-metrics ttft,tpot,itl,e2el \
        --save-result --result-dir $R --result-filename $id.json > $R/$id.bench.log 2>&1
      echo "=== $(date +%T) bench $id rc=$?" | tee -a $R/boots.txt
      curl -s http://127.0.0.1:8011/metrics > $R/$id.metrics.txt 2>/dev/null
    done
  fi
  kill -TERM -$SP 2>/dev/null; sleep 5; kill -KILL -$SP 2>/dev/null
  nvidia-smi --query-compute-apps=pid --format=csv,noheader | xargs -r kill -9 2>/dev/null; sleep 2
  grep -h -i "Available KV cache memory\|GPU KV cache size\|Maximum concurrency\|Model loading took\|Graph capturing finished\|torch.compile takes\|init engine" \
    $R/$boot.server.log | cut -c1-220 > $R/$boot.excerpt.txt
  cat $R/$boot.excerpt.txt
done <<< "$PLAN"
echo "=== $(date +%T) campaign done" | tee -a $R/boots.txt; touch /root/c14.done
