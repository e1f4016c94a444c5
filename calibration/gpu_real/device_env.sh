# Sourced by the device_run*.sh scripts on the GPU machine (project root, after setup.sh): the
# environment vLLM 0.26.0 + Arctic Inference run with, the real model built from the GGUF parts in /root/stash,
# the 8B-shaped dummy model, and this host's `advisor host --json`. Defines R, SERVER, D, SMOL, L8 and start_timelines.
set -u
R=/root/results
mkdir -p $R /root/models
export PYTHONPATH=/tmp/site:/tmp/arctic:$PWD VLLM_USE_FLASHINFER_SAMPLER=0 ARCTIC_INFERENCE_ENABLED=0 VLLM_PLUGINS= \
       VLLM_CACHE_ROOT=/root/vcache PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
SERVER="python3 -m vllm.entrypoints.openai.api_server"
D=/root/stash/data
SMOL=/root/models/SmolLM2-135M-Instruct
if [ -z "${NO_SMOL:-}" ] && [ ! -f $SMOL/.advisor-built ]; then  # NO_SMOL=1: a campaign without the real model (no GGUF carried)
  # the GGUF travels in 32 MiB parts gs.aa.. (session 9 on: the working tree grew past what 48 MiB halves allow),
  # or as the two halves smol.part.a/.b of sessions 5-8
  mkdir -p /root/gguf && if ls /root/stash/gs.* >/dev/null 2>&1; then cat /root/stash/gs.*; \
    else cat /root/stash/smol.part.a /root/stash/smol.part.b; fi > /root/gguf/SmolLM2-135M-Instruct.Q4_1.gguf
  python3 scripts/build_smollm2.py --gguf /root/gguf/SmolLM2-135M-Instruct.Q4_1.gguf --out $SMOL || exit 1
fi
L8=/root/models/Llama-3.1-8B-Instruct
[ -n "${NO_SMOL:-}" ] || { mkdir -p $L8 && cp catalog/models/meta-llama/Llama-3.1-8B-Instruct/config.json $L8/ \
  && cp $SMOL/tokenizer.json $SMOL/tokenizer_config.json $L8/; }
python3 -m advisor --data-dir $R/advisor-data host --json > $R/host.json 2>$R/host.err
start_timelines() {  # campaigns 5 on: the host's CPU speed per core and the GPU's clocks, beside the loads
  nproc > $R/nproc.txt; lscpu > $R/lscpu.txt 2>&1
  python3 calibration/gpu_real/cpu_timeline.py --out $R/cpu_timeline.jsonl --seconds 3000 &
  nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,utilization.gpu \
    --format=csv -lms 1000 > $R/gpu_timeline.csv 2>&1 &
}
