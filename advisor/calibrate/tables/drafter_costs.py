"""Fit the host work of one drafter forward (EAGLE-3 head) on a host profile from a campaign's measured steps, and
write calibration/drafter_costs.csv (advisor.methods._drafted reads it).

Model: measured step - (verification + drafter roofline + rejection sampler, advisor.methods._drafted with no host
work per forward) = K x (fixed + per_seq x C): the host side of each of the K drafter forwards (eagle.py's propose
loop: metadata, slot mapping, sampling of the draft), a constant and a part per sequence. Least squares over every
EAGLE-3 point of the campaign (K x C). The draft-model points are NOT used: they check the term on another drafter.

    advisor calibrate rebuild drafter_costs [--check]   # from campaign 15 (H100, vLLM 0.26.0)
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from advisor.calibrate import manifests

OUTPUTS = ("drafter_costs.csv",)
INPUTS = "calibration/manifests.yaml drafter_costs_fit (campaign 15: its EAGLE-3 steps and predictions.json)"
FIELDS = ["host_profile", "gpu", "vllm", "forward_fixed_s", "forward_per_seq_s", "points", "rms_ln_step_before",
          "rms_ln_step_after", "source"]


def _steps(c15: Path) -> dict:
    out = {}
    for name in manifests.folders("drafter_costs_fit"):  # c15b after the first pass: its points replace the crashed ones
        for line in (c15 / name).read_text().splitlines():
            r = json.loads(line)
            out[r["spec"], r["conc"]] = r["step_ms"] / 1e3
    return out


def fit(cal: Path) -> dict:
    from advisor.hardware.gpus import get_gpu
    from advisor.methods import _drafted as dr
    from advisor.model.drafter import load_drafter
    from advisor.model.load import load_profile
    from advisor.predict.absolute import ReplicaLayout

    c15 = cal / manifests.root("drafter_costs_fit")
    pred = json.loads((c15 / "predictions.json").read_text())
    ctx = pred["context"]
    p, gpu = load_profile("meta-llama/Llama-3.1-8B-Instruct"), get_gpu(pred["gpu"])
    lay = ReplicaLayout(tp=1, dp=1, ep=False)
    head = load_drafter("yuhuili/EAGLE3-LLaMA3.1-Instruct-8B")
    steps = _steps(c15)
    xs, ys, before = [], [], []
    for (spec, c), meas in steps.items():
        if not spec.startswith("eagle3:"):
            continue
        k = int(spec.split(":")[1])
        plain_m = steps["none", c]
        _, verify, draft, _ = dr.drafted_step(p, head, gpu, lay, c, ctx, k, host=(0.0, 0.0))
        plain_p = dr.plain_step(p, gpu, lay, c, ctx)
        # in R terms: the measured extra over the measured plain step vs the predicted extra over the predicted one
        resid = (meas - plain_m) - (verify + draft - plain_p)
        xs.append((k, k * c))
        ys.append(resid)
        before.append(math.log((meas / plain_m) / ((verify + draft + k * dr.DRAFT_FORWARD_FIXED_S) / plain_p)))
    # least squares y = a*K + b*K*C
    s11 = sum(x[0] * x[0] for x in xs)
    s12 = sum(x[0] * x[1] for x in xs)
    s22 = sum(x[1] * x[1] for x in xs)
    t1 = sum(x[0] * y for x, y in zip(xs, ys))
    t2 = sum(x[1] * y for x, y in zip(xs, ys))
    det = s11 * s22 - s12 * s12
    a, b = (t1 * s22 - t2 * s12) / det, (s11 * t2 - s12 * t1) / det
    after = []
    for (spec, c), meas in steps.items():
        if spec.startswith("eagle3:"):
            k = int(spec.split(":")[1])
            _, verify, draft, _ = dr.drafted_step(p, head, gpu, lay, c, ctx, k, host=(a, b))
            after.append(math.log((meas / steps["none", c]) / ((verify + draft) / dr.plain_step(p, gpu, lay, c, ctx))))
    rms = lambda v: math.sqrt(sum(x * x for x in v) / len(v))  # noqa: E731
    return {"host_profile": f"{pred['gpu'].lower()}-vllm{pred['vllm']}", "gpu": pred["gpu"], "vllm": pred["vllm"], "forward_fixed_s": f"{a:.3e}",
            "forward_per_seq_s": f"{b:.3e}", "points": len(ys), "rms_ln_step_before": f"{rms(before):.3f}",
            "rms_ln_step_after": f"{rms(after):.3f}",
            "source": f"calibration/{manifests.root('drafter_costs_fit')} (EAGLE-3 K 1/3/5 x C 1/8/32/64, Llama-3.1-8B, dummy "
                      "weights); in sample for these points; the draft-model points and the published rows check it"}


def build(cal: Path) -> dict[str, str]:
    """{file name: text} of the table advisor.methods._drafted reads."""
    from advisor.calibrate.tables import csv_text

    return {OUTPUTS[0]: csv_text([fit(cal)], FIELDS)}
