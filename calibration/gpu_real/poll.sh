#!/usr/bin/env bash
# Poll the background campaign on the GPU machine: wait up to $1 seconds (returning early once it
# says "all done"), copying the results so far into $OUT every 10 s, so that a call cut short by
# the device budget still brings back everything up to its last 10 s.
T=${1:-60}
snap() { tar czf "$OUT/results.tgz.tmp" -C /root results 2>/dev/null && mv "$OUT/results.tgz.tmp" "$OUT/results.tgz"
         cp /root/runs.out "$OUT/runs.out" 2>/dev/null; }
# returns early, too, when no campaign script is running any more (one that failed at once must not burn the budget)
for _ in $(seq 1 $((T / 10))); do
  grep -q "== all done" /root/runs.out 2>/dev/null && break
  pgrep -f "device_run|real_campaign" >/dev/null || { echo "poll: no campaign running"; break; }
  sleep 10; snap
done
snap
tail -n 40 /root/runs.out
