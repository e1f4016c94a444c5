# One device call (c3 carried, c1/c2 already copied to /root/stash): plain decode steps of a GQA MoE
# (Qwen3-30B-A3B) and a bigger dense model (Qwen2.5-32B) at TP 1, for the absolute figures of the
# layout search (docs/layout.md). Results go to $OUT after every job. Usage: bash THIS DEADLINE_S
T0=$(date +%s); DEADLINE=$((T0 + ${1:-480}))
bash /root/stash/run/setup.sh 2>&1 | tail -2
cp calibration/gpu_steps/gridbench.py /root/stash/run/
export PYTHONPATH=/tmp/site:/tmp/arctic VLLM_USE_FLASHINFER_SAMPLER=0 ARCTIC_INFERENCE_ENABLED=0 VLLM_PLUGINS= \
       VLLM_CACHE_ROOT=/root/vcache PYTHONUNBUFFERED=1 VLLM_ALLOW_INSECURE_SERIALIZATION=1
R=/root/results; mkdir -p $R; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $R/gpu.csv
G="python3 /root/stash/run/gridbench.py --results $R/grid.jsonl --boots $R/boots.jsonl"; M=/root/stash/models
run() {
  local left=$((DEADLINE - $(date +%s))); [ $left -lt 60 ] && { echo "skip $1 (${left}s left)"; return; }
  echo "=== $(date +%T) $1 (${left}s left)"; local n=$1; shift
  timeout $left $G "$@" > $R/$n.log 2>&1; echo "=== $(date +%T) $n rc=$?"
  nvidia-smi --query-compute-apps=pid --format=csv,noheader | xargs -r kill -9 2>/dev/null; sleep 1
  grep -h "^RESULT\|^BOOT" $R/$n.log > $R/$n.rows; grep -v "^RESULT\|^BOOT\|loggers.py" $R/$n.log | tail -c 20000 > $R/$n.tail
  cp $R/grid.jsonl $R/boots.jsonl $OUT/ 2>/dev/null; cp $R/$n.tail $OUT/ 2>/dev/null
}
run q3-k0  --model $M/Qwen3-30B-A3B --spec none --conc 1,8,32,64 --reps 2
run q32-k0 --model $M/Qwen2.5-32B-Instruct --spec none --conc 1,8,32,64 --reps 1
ls -la $R
