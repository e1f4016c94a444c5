#!/usr/bin/env bash
# snapshot /root/c18 into $OUT every 15 s for up to $1 seconds; stop when the campaign is done
END=$(( $(date +%s) + ${1:-0} ))
while :; do
  [ -n "${OUT:-}" ] && tar czf $OUT/p.tgz -C /root c18 runs.out 2>/dev/null && mv -f $OUT/p.tgz $OUT/c18.tgz
  [ -e /root/c18.done ] && break; [ $(date +%s) -ge $END ] && break; sleep 15
done
cat /root/c18/boots.txt 2>/dev/null; tail -n 8 /root/runs.out 2>/dev/null
