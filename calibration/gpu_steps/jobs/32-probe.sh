# advisor probe (the product's own campaign) against real `vllm serve` 0.26.0, dummy weights,
# a 2,048-token BPE tokenizer (tests/vllm_helpers/make_tiny_llama.py) in the model dir.
set -x
R=/root/advisor-repo; P=/root/probe-models/Llama-3.1-8B-Instruct
mkdir -p $P && cp /root/stash/models/Llama-3.1-8B-Instruct/config.json $P/
python3 -c "import sys; sys.path.insert(0, '$R/tests/vllm_helpers'); from make_tiny_llama import train_tokenizer; from pathlib import Path; train_tokenizer(Path('$P'))"
python3 - <<'PY'
import json, sysconfig, pathlib
files = sorted(pathlib.Path(sysconfig.get_paths()["stdlib"]).glob("*.py"))[120:400]
with open("/root/probe-prompts.jsonl", "w") as f:
    for p in files:
        t = p.read_text(errors="ignore")[:1600]
        if len(t) > 400:
            f.write(json.dumps({"prompt": "Continue this code:\n" + t}) + "\n")
PY
cd $R && PYTHONPATH=$R:$PYTHONPATH python3 -m advisor --data-dir /root/advisor-data probe $P \
  --corpus /root/probe-prompts.jsonl --configs vanilla,suffix:32 --duration 25 --concurrency 32 \
  --max-tokens 512 --ignore-eos --api completions --server-cmd "python3 -m vllm.entrypoints.openai.api_server" \
  --extra-args "--load-format dummy" --gpu-memory-utilization 0.85 --max-model-len 4096 --boot-timeout 400 --json \
  > /root/results/probe.json
echo "probe rc=$?"
PYTHONPATH=$R:$PYTHONPATH python3 -m advisor --data-dir /root/advisor-data host --json > /root/results/host.json
cp /root/advisor-data/probes.sqlite /root/results/ 2>/dev/null; ls -la /root/advisor-data /root/advisor-data/campaigns/*
