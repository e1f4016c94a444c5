#!/usr/bin/env bash
# One poll of campaign.sh: results so far into $OUT (one tarball), a short status on stdout.
#   sleep N; bash calibration/gpu_steps/poll.sh      (each device call; N well under the call limit)
[ -n "${OUT:-}" ] && tar czf "$OUT/results.tgz" -C /root results $( [ -d /root/advisor-data ] && echo advisor-data ) 2>/dev/null
tail -n 20 /root/campaign.out 2>/dev/null
for f in /root/results/*.log; do [ -e "$f" ] && echo "-- $f: $(grep -c RESULT "$f") results"; done
