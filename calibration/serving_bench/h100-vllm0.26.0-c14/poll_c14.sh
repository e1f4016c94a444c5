#!/usr/bin/env bash
# Poll run_c14.sh: snapshot /root/c14 into $OUT/c14.tgz every 15 s for up to $1 seconds, stop when done.
END=$(( $(date +%s) + ${1:-0} ))
while :; do
  [ -n "${OUT:-}" ] && tar czf $OUT/p.tgz -C /root c14 runs.out 2>/dev/null && mv -f $OUT/p.tgz $OUT/c14.tgz
  [ -e /root/c14.done ] && break; [ $(date +%s) -ge $END ] && break; sleep 15
done
cat /root/c14/boots.txt 2>/dev/null; tail -n 5 /root/runs.out
