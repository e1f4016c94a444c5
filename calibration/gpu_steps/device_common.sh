#!/usr/bin/env bash
# Sourced by the device plans (oneshot.sh, moe_dense_plain.sh, campaign.sh) on the GPU machine, in the
# repo copy's root, after the c3 carry call copied .device/c3 to /root/stash (c1/c2 copied before).
# Sets vLLM 0.26.0 up once, then `run NAME GRIDBENCH-ARGS...` boots one engine bounded by $DEADLINE
# (seconds since the epoch) and copies every result so far into $OUT (when set) after each boot.
T0=$(date +%s); DEADLINE=${DEADLINE:-$((T0 + 480))}
GS_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bash /root/stash/run/setup.sh 2>&1 | tail -2
export PYTHONPATH=/tmp/site:/tmp/arctic VLLM_USE_FLASHINFER_SAMPLER=0 ARCTIC_INFERENCE_ENABLED=0 VLLM_PLUGINS='' \
       VLLM_CACHE_ROOT=/root/vcache PYTHONUNBUFFERED=1 VLLM_ALLOW_INSECURE_SERIALIZATION=1
R=/root/results; M=/root/stash/models; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $R/gpu.csv
G="python3 $GS_DIR/gridbench.py --results $R/grid.jsonl --boots $R/boots.jsonl"

save() {  # everything measured so far into $OUT (one tarball), if this call has one
  [ -n "${OUT:-}" ] && tar czf "$OUT/results.tgz" -C /root results $( [ -d /root/advisor-data ] && echo advisor-data ) 2>/dev/null
  return 0
}

run() {  # run NAME ARGS...: one engine boot of gridbench.py, bounded by the deadline
  local left=$((DEADLINE - $(date +%s))); [ $left -lt 60 ] && { echo "skip $1 (${left}s left)"; return; }
  echo "=== $(date +%T) $1 (${left}s left)"; local n=$1; shift
  timeout $left $G --boot $n "$@" > $R/$n.log 2>&1; echo "=== $(date +%T) $n rc=$?"
  nvidia-smi --query-compute-apps=pid --format=csv,noheader | xargs -r kill -9 2>/dev/null; sleep 1
  grep -h -i "Available KV cache memory\|Estimated CUDA graph memory\|Model loading took" $R/$n.log | cut -c1-200
  save
}
