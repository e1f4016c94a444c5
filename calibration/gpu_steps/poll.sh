# One poll of the GPU queue: results so far into $OUT (one tarball), a short status on stdout.
R=/root/results
tar czf "$OUT/results.tgz" -C / root/results root/advisor-data 2>/dev/null
cat $R/queue.log; for f in $R/*.log; do echo "-- $f: $(grep -c RESULT $f) results"; done
grep -h -i "Available KV cache memory\|Estimated CUDA graph memory\|Model loading took\|Traceback\|Error" $R/*.log | cut -c1-220 | tail -25
