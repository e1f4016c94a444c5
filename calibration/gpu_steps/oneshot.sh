# Last-minute single call: set up vLLM (c3 already copied to /root/stash), then run the grid jobs in
# the foreground until DEADLINE seconds from now; results copied into $OUT after every job.
T0=$(date +%s); DEADLINE=$((T0 + ${1:-480}))
bash /root/stash/run/setup.sh 2>&1 | tail -2
cp calibration/gpu_steps/gridbench.py /root/stash/run/
export PYTHONPATH=/tmp/site:/tmp/arctic VLLM_USE_FLASHINFER_SAMPLER=0 ARCTIC_INFERENCE_ENABLED=0 VLLM_PLUGINS= \
       VLLM_CACHE_ROOT=/root/vcache PYTHONUNBUFFERED=1 VLLM_ALLOW_INSECURE_SERIALIZATION=1
R=/root/results; mkdir -p $R; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $R/gpu.csv
G="python3 /root/stash/run/gridbench.py --results $R/grid.jsonl --boots $R/boots.jsonl"; M=/root/stash/models
run() {  # run NAME ARGS...: one boot, bounded by the deadline
  local left=$((DEADLINE - $(date +%s))); [ $left -lt 60 ] && { echo "skip $1 (${left}s left)"; return; }
  echo "=== $(date +%T) $1 (${left}s left)"; local n=$1; shift
  timeout $left $G "$@" > $R/$n.log 2>&1; echo "=== $(date +%T) $n rc=$?"
  nvidia-smi --query-compute-apps=pid --format=csv,noheader | xargs -r kill -9 2>/dev/null; sleep 1
  grep -h -i "Available KV cache memory\|Estimated CUDA graph memory\|Model loading took" $R/$n.log | cut -c1-200
  grep -h "^RESULT\|^BOOT" $R/$n.log > $R/$n.rows; grep -v "^RESULT\|^BOOT\|loggers.py" $R/$n.log | tail -c 20000 > $R/$n.tail
  tar czf "$OUT/results.tgz" -C /root results
}
run l8-k0  --model $M/Llama-3.1-8B-Instruct --spec none --conc 1,8,32,64 --reps 2
run l8-k32 --model $M/Llama-3.1-8B-Instruct --spec suffix:32 --drafts 12,8,4,2,1 --conc 1,8,32,64 --reps 1
run v2-k0  --model $M/DeepSeek-V2-Lite --spec none --conc 1,8,32,64 --reps 2
run v2-k32 --model $M/DeepSeek-V2-Lite --spec suffix:32 --drafts 12,4,2,1 --conc 1,8,32,64 --reps 1
run q3-k0  --model $M/Qwen3-30B-A3B --spec none --conc 1,8,64 --reps 1
run q3-k32 --model $M/Qwen3-30B-A3B --spec suffix:32 --drafts 12,4,1 --conc 1,8,64 --reps 1
tar czf "$OUT/results.tgz" -C /root results; ls -la $R
