#!/usr/bin/env bash
# Poll campaign.sh: `bash calibration/gpu_steps/poll.sh [SECONDS]` copies the results so far into $OUT
# (one tarball, replaced atomically) every 20 s for up to SECONDS (default: once), stopping early
# when the campaign is done, so a call cut at its limit still brings back what was measured.
END=$(( $(date +%s) + ${1:-0} ))
snap() {
  [ -n "${OUT:-}" ] || return 0
  tar czf "$OUT/partial.tgz" -C /root results $( [ -d /root/advisor-data ] && echo advisor-data ) 2>/dev/null \
    && mv -f "$OUT/partial.tgz" "$OUT/results.tgz"
}
while :; do
  snap
  grep -q "campaign done" /root/campaign.out 2>/dev/null && break
  [ "$(date +%s)" -ge "$END" ] && break
  sleep 20
done
tail -n 25 /root/campaign.out 2>/dev/null
for f in /root/results/*.log; do [ -e "$f" ] && echo "-- $f: $(grep -c '"step_ms"' /root/results/grid.jsonl 2>/dev/null) grid rows"; break; done
