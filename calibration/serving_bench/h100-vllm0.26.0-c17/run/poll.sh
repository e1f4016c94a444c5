#!/usr/bin/env bash
# snapshot /root/c17 into $OUT every 15 s for up to $1 seconds; stop when the campaign is done
END=$(( $(date +%s) + ${1:-0} ))
while :; do
  [ -n "${OUT:-}" ] && tar czf $OUT/p.tgz -C /root c17 runs.out 2>/dev/null && mv -f $OUT/p.tgz $OUT/c17.tgz
  [ -e /root/c17.done ] && break; [ $(date +%s) -ge $END ] && break; sleep 15
done
cat /root/c17/boots.txt 2>/dev/null; tail -n 8 /root/runs.out 2>/dev/null
