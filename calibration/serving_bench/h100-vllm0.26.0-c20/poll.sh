#!/usr/bin/env bash
# snapshot /root/c20 into $OUT every 15 s for up to $1 seconds; stop when the campaign is done
END=$(( $(date +%s) + ${1:-0} ))
while :; do
  [ -n "${OUT:-}" ] && tar czf $OUT/p.tgz -C /root c20 runs.out 2>/dev/null && mv -f $OUT/p.tgz $OUT/c20.tgz
  [ -e /root/c20.done ] && break; [ $(date +%s) -ge $END ] && break; sleep 15
done
tail -n 12 /root/c20/boots.txt 2>/dev/null; tail -n 5 /root/runs.out 2>/dev/null
