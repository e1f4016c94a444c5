#!/bin/bash
# On the GPU machine, in the call that carries .device/c3 (the parts of c1 and c2 already copied
# to /root/stash by the two calls before): assemble vLLM 0.26.0 into /tmp/site, install the
# dependency wheels there, build Arctic Inference's suffix cache into /tmp/arctic, and smoke-test.
# Afterwards:  export PYTHONPATH=/tmp/site:/tmp/arctic VLLM_USE_FLASHINFER_SAMPLER=0
set -u
S=/root/stash
mkdir -p /tmp/site /tmp/arctic /tmp/abuild
if [ ! -f /tmp/site/.vllm ]; then
  cat $S/vllm.part.* | tar xJf - -C /tmp/site && touch /tmp/site/.vllm || { echo "vllm unpack failed"; exit 1; }
fi
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
  $(ls $S/deps/*.whl | grep -v -e nanobind -e grpcio_tools) 2>&1 | grep -v "WARNING: Target directory" | tail -3
cd /tmp && PYTHONPATH=/tmp/site:/tmp/arctic python3 -c "
import vllm; 
print('vllm', vllm.__version__, 'and arctic_inference suffix cache: ready')"
