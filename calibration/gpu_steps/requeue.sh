# Refresh the queue from the repo copy: jobs not yet started are replaced, dropped ones removed.
rm -rf /root/advisor-repo && mkdir -p /root/advisor-repo && cp -r . /root/advisor-repo/ 2>/dev/null
cp calibration/gpu_steps/gridbench.py /root/stash/run/
for f in /root/queue/*.sh; do [ -e "calibration/gpu_steps/jobs/$(basename $f)" ] || rm -f "$f"; done
for f in calibration/gpu_steps/jobs/*.sh; do n=$(basename $f .sh); [ -e /root/queue/$n.running ] || [ -e /root/queue/$n.done ] || cp $f /root/queue/; done
ls /root/queue
