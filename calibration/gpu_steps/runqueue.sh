#!/bin/bash
# Queue runner on the GPU machine: runs /root/queue/*.sh one at a time in name order, each job's
# output in /root/results/NAME.log, until /root/queue/STOP exists and the queue is empty. Later
# device calls may drop more jobs into /root/queue (they run in name order among those left).
Q=/root/queue; R=/root/results; mkdir -p "$Q" "$R"
export PYTHONPATH=/tmp/site:/tmp/arctic VLLM_USE_FLASHINFER_SAMPLER=0 ARCTIC_INFERENCE_ENABLED=0 VLLM_PLUGINS= \
       VLLM_CACHE_ROOT=/root/vcache PYTHONUNBUFFERED=1 VLLM_ALLOW_INSECURE_SERIALIZATION=1
while true; do
  next=$(ls "$Q"/*.sh 2>/dev/null | sort | head -1)
  if [ -z "$next" ]; then [ -e "$Q/STOP" ] && break; sleep 3; continue; fi
  name=$(basename "$next" .sh); mv "$next" "$Q/$name.running"
  echo "=== $(date +%T) start $name" >> "$R/queue.log"
  timeout "${JOB_TIMEOUT:-540}" bash "$Q/$name.running" > "$R/$name.log" 2>&1; rc=$?
  echo "=== $(date +%T) end $name rc=$rc" >> "$R/queue.log"
  mv "$Q/$name.running" "$Q/$name.done"
  nvidia-smi --query-compute-apps=pid --format=csv,noheader | xargs -r kill -9 2>/dev/null; sleep 2
done
echo "=== $(date +%T) queue stopped" >> "$R/queue.log"
