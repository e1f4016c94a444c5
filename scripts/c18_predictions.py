#!/usr/bin/env python3
"""Pre-register campaign 18's predictions (issue 41): the draft-model step after the async-off term was added
(advisor.methods._drafted.async_off_costs; campaign 17 showed the miss, this campaign is its fresh check). Llama-3.1-8B
target, Llama-3.2-1B draft model at K=6 (a K no campaign ran) and prompt 2048 (a context no draft-model run had), one H100,
vLLM 0.26.0, dummy weights, device/stepbench.py, at 1, 8 and 32 sequences. Two predictions per point: the shipped model
(``step_ms``, async-off term on, as vLLM 0.26's facts say) and the model before the term (``step_ms_before``), so the
campaign shows what the term does on points it was not chosen on.

    python3 scripts/c18_predictions.py > calibration/serving_bench/h100-vllm0.26.0-c18/predictions.json
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
from advisor.predict.absolute import ReplicaLayout  # noqa: E402
from advisor.vllm_facts import facts  # noqa: E402

OUT_SHORT, OUT_LONG = 256, 1024
CONC = (1, 8, 32)
K, PROMPT, DRAFT, VLLM = 6, 2048, "meta-llama/Llama-3.2-1B-Instruct", "0.26"


def main() -> None:
    p, gpu = load_profile("meta-llama/Llama-3.1-8B-Instruct"), get_gpu("H100")
    lay = ReplicaLayout(tp=1, dp=1, ep=False)
    off = "draft_model" not in facts(VLLM).async_spec_methods
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    ctx = PROMPT + (OUT_SHORT + OUT_LONG) / 2
    rows = []
    for n in CONC:
        plain, verify, draft, notes = dr.drafted_step(p, load_drafter(DRAFT), gpu, lay, n, ctx, K, async_off=off)
        _, v0, d0, _ = dr.drafted_step(p, load_drafter(DRAFT), gpu, lay, n, ctx, K, async_off=False)
        rows.append({"spec": f"draft_model:{K}", "prompt_len": PROMPT, "conc": n, "context": ctx, "drafter": DRAFT,
                     "plain_ms": round(plain * 1e3, 3), "step_ms": round((verify + draft) * 1e3, 3),
                     "step_ms_before": round((v0 + d0) * 1e3, 3), "async_off": off, "notes": notes})
    json.dump({"campaign": "c18", "advisor_commit": commit, "gpu": "H100", "vllm": "0.26.0",
               "model": "meta-llama/Llama-3.1-8B-Instruct (bf16, dummy weights)", "out_short": OUT_SHORT,
               "out_long": OUT_LONG, "rows": rows}, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
