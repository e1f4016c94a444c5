#!/usr/bin/env python3
"""Pre-register campaign 15's predictions (issue 41): the decode step of Llama-3.1-8B-Instruct on one H100 (vLLM
0.26.0, dummy weights, the offline engine of device/stepbench.py) plain, with an EAGLE-3 head (yuhuili's 1-layer
head) at K = 1, 3, 5, and with Llama-3.2-1B-Instruct as a draft model at K = 3, at 1, 8, 32 and 64 sequences.

What is predicted is the *step* (advisor.methods._drafted.drafted_step: verification of 1 + K tokens + K drafter
forwards + rejection sampler), which is what the stepbench differencing measures whatever the acceptance (dummy weights
accept next to nothing; the step count comes from vLLM's accepted-token counter). R = step / plain step.

    python3 scripts/c15_predictions.py > calibration/serving_bench/h100-vllm0.26.0-c15/predictions.json
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from advisor.hardware.gpus import get_gpu  # noqa: E402
from advisor.methods import _drafted as dr  # noqa: E402
from advisor.model.drafter import load_drafter  # noqa: E402
from advisor.model.load import load_profile  # noqa: E402
from advisor.predict.absolute import ReplicaLayout, decode_step  # noqa: E402

PROMPT, OUT_SHORT, OUT_LONG = 1024, 256, 1024
CONTEXT = PROMPT + (OUT_SHORT + OUT_LONG) / 2
"""Mean context of the decode steps the differencing keeps (positions 1024+256 .. 1024+1024)."""
CONC = (1, 8, 32, 64)
RUNS = [("none", None, None), ("eagle3", 3, "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"),
        ("draft_model", 3, "meta-llama/Llama-3.2-1B-Instruct"), ("eagle3", 1, "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"),
        ("eagle3", 5, "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B")]
"""Boot order = priority: a run the device time does not reach is reported as not run, never replaced."""


def main() -> None:
    p = load_profile("meta-llama/Llama-3.1-8B-Instruct")
    gpu = get_gpu("H100")
    lay = ReplicaLayout(tp=1, dp=1, ep=False)
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    rows = []
    for method, k, ref in RUNS:
        for n in CONC:
            if method == "none":
                step = decode_step(p, gpu, lay, n, CONTEXT)[0]
                rows.append({"spec": "none", "conc": n, "step_ms": round(step * 1e3, 3), "r": 1.0})
                continue
            d = load_drafter(ref)
            plain, verify, draft, _ = dr.drafted_step(p, d, gpu, lay, n, CONTEXT, k)
            rows.append({"spec": f"{method}:{k}", "drafter": ref, "conc": n, "step_ms": round((verify + draft) * 1e3, 3),
                         "verify_ms": round(verify * 1e3, 3), "draft_ms": round(draft * 1e3, 3),
                         "plain_ms": round(plain * 1e3, 3), "r": round((verify + draft) / plain, 4)})
    json.dump({"campaign": "c15", "advisor_commit": commit, "gpu": "H100", "vllm": "0.26.0",
               "context": CONTEXT, "prompt_len": PROMPT, "out_short": OUT_SHORT, "out_long": OUT_LONG,
               "model": "meta-llama/Llama-3.1-8B-Instruct (bf16, dummy weights)",
               "constants": {"DRAFT_FORWARD_FIXED_S": dr.DRAFT_FORWARD_FIXED_S, "REJECTION_S": dr.REJECTION_S},
               "rows": rows}, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
