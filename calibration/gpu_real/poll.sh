#!/usr/bin/env bash
# Poll the background campaign on the GPU machine: wait up to $1 seconds (returning early once it
# says "all done"), then copy the results so far into $OUT.
T=${1:-60}
for _ in $(seq 1 $((T / 10))); do grep -q "== all done" /root/runs.out 2>/dev/null && break; sleep 10; done
tar czf "$OUT/results.tgz" -C /root results 2>/dev/null
cp /root/runs.out "$OUT/runs.out" 2>/dev/null
tail -n 40 /root/runs.out
