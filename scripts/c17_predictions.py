#!/usr/bin/env python3
"""Pre-register campaign 17's predictions (issue 41, a diagnostic of the draft-model step against K):
campaign 16 measured the Llama-3.2-1B draft model at K=5 2.4x slower than campaign 15's K=3 at one sequence (26.0 vs
10.8 ms), nearly flat in concurrency. Llama-3.1-8B-Instruct on one H100 (vLLM 0.26.0, dummy weights,
device/stepbench.py, prompt 1024): plain, then the draft model at K = 3, 5, 4, 1, 7 (one boot each), at 1, 8 and 32
sequences. Predicted with the shipped model (calibration/drafter_costs.csv included); nothing fitted on campaign 16.

    python3 scripts/c17_predictions.py > calibration/serving_bench/h100-vllm0.26.0-c17/predictions.json
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

OUT_SHORT, OUT_LONG = 256, 1024
CONC = (1, 8, 32)
D = "meta-llama/Llama-3.2-1B-Instruct"
RUNS = [("none", None, None, 1024)] + [("draft_model", k, D, 1024) for k in (3, 5, 4, 1, 7)]
"""(method, K, drafter, prompt length), in boot order; a run the device time does not reach is reported as not run."""


def main() -> None:
    p, gpu = load_profile("meta-llama/Llama-3.1-8B-Instruct"), get_gpu("H100")
    lay = ReplicaLayout(tp=1, dp=1, ep=False)
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    rows = []
    for method, k, ref, prompt in RUNS:
        ctx = prompt + (OUT_SHORT + OUT_LONG) / 2
        for n in CONC:
            spec = "none" if method == "none" else f"{method}:{k}"
            plain = decode_step(p, gpu, lay, n, ctx)[0]
            row = {"spec": spec, "prompt_len": prompt, "conc": n, "context": ctx, "plain_ms": round(plain * 1e3, 3)}
            if method == "none":
                row.update(step_ms=round(plain * 1e3, 3), r=1.0)
            else:
                _, verify, draft, notes = dr.drafted_step(p, load_drafter(ref), gpu, lay, n, ctx, k)
                row.update(drafter=ref, step_ms=round((verify + draft) * 1e3, 3), verify_ms=round(verify * 1e3, 3),
                           draft_ms=round(draft * 1e3, 3), r=round((verify + draft) / plain, 4), host=notes[0])
            rows.append(row)
    json.dump({"campaign": "c17", "advisor_commit": commit, "gpu": "H100", "vllm": "0.26.0",
               "model": "meta-llama/Llama-3.1-8B-Instruct (bf16, dummy weights)", "out_short": OUT_SHORT,
               "out_long": OUT_LONG, "rows": rows}, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
