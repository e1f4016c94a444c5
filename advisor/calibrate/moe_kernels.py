"""The fused-MoE kernel's cost per layer, fitted from NVIDIA aiconfigurator's measured vLLM 0.24.0 timings (issue 40,
item 4: "fused-MoE expert streaming at the measured efficiency per batch"): the lab's side of
advisor.predict.moe_kernel.

Input: ``calibration/moe_kernels/aiconfigurator_vllm0.24.0_moe.csv`` (scripts/extract_aiconfigurator_moe.py from the
``aiconfigurator-core==0.12.0`` wheel): one timed ``moe`` op per row: GPU, weights dtype (the Triton kernel vLLM runs
for it), tokens, hidden size, intermediate size, top-k, experts, MoE TP and EP sizes, routing, latency.

The form, per GPU and dtype, is the step model's own roofline terms with one fixed cost added:

    latency = fixed + bytes / bandwidth x bytes_mult + flops / peak x flops_mult

``bytes``: the expert weights one rank reads: min(local experts, tokens x top-k / EP) experts (aiconfigurator's
``balanced`` routing spreads the tokens evenly) of 3 x hidden x (intermediate / TP) parameters at the format's bytes
(bf16 2, block FP8 1, MXFP4 4.25 bits); ``flops``: 2 x tokens x top-k / EP x 3 x hidden x (intermediate / TP); peak
and bandwidth are the GPU spec's (advisor.hardware.gpus; FP8 peak for FP8, BF16 for the others, W4A16 computing in
BF16). Fitted by least squares on relative error over the ``balanced`` rows with EP 1 (every TP size), tokens up to
1,024. Held out and reported per row: the same shapes with skewed routing (``power_law_1.2``), EP > 1, and the other
GPU's balanced rows predicted with this GPU's coefficients.

What it finds (the shipped table): a fixed ~35 us (bf16), ~43 us (block FP8), ~38 us (MXFP4) per MoE layer where the
step model charged two grouped-GEMM floors (16 us), bytes at 1.03-1.08x the ideal stream (MXFP4 1.3-1.7x) and the
FLOPs added, not overlapped. EP > 1 is 15-50 % slower than the form says (not applied there).
"""

from __future__ import annotations

import csv
import math
import statistics
from pathlib import Path

import numpy as np

from advisor.predict.moe_kernel import FORMAT_BYTES

INPUT = "moe_kernels/aiconfigurator_vllm0.24.0_moe.csv"
SOURCE = ("NVIDIA aiconfigurator-core 0.12.0 (PyPI wheel, Apache-2.0) systems/data/{h100_sxm,h200_sxm}/moe/vllm/0.24.0/"
          "moe_perf.parquet, extracted by scripts/extract_aiconfigurator_moe.py")  # fmt: skip
FIT_DISTRIBUTION = "balanced"
HELD_OUT_DISTRIBUTION = "power_law_1.2"


def read_rows(calibration_dir: Path) -> list[dict]:
    with (calibration_dir / INPUT).open(encoding="utf-8", newline="") as fh:
        return [{k: (v if k in ("gpu", "dtype", "distribution") else float(v)) for k, v in r.items()} for r in csv.DictReader(fh)]


def _design(rows: list[dict], gpu: str, dtype: str) -> np.ndarray:
    from advisor.hardware.gpus import get_gpu

    spec = get_gpu(gpu)
    bw = spec.bandwidth_tbs * 1e12
    peak = (spec.fp8_tflops if dtype == "fp8" and spec.fp8_tflops else spec.bf16_tflops) * 1e12  # MoeKernelCost.peak_flops
    out = []
    for r in rows:
        local = r["num_experts"] / r["moe_ep_size"]
        routed = r["num_tokens"] * r["topk"] / r["moe_ep_size"]
        per_expert = 3 * r["hidden_size"] * r["inter_size"] / r["moe_tp_size"]
        out.append((1.0, min(local, routed) * per_expert * FORMAT_BYTES[dtype] / bw, 2 * routed * per_expert / peak))
    return np.array(out)


def _latency(rows: list[dict]) -> np.ndarray:
    return np.array([r["latency_ms"] * 1e-3 for r in rows])


def _log_errors(coef: np.ndarray, rows: list[dict], gpu: str, dtype: str) -> list[float]:
    if not rows:
        return []
    return [math.log(p / y) for p, y in zip(_design(rows, gpu, dtype) @ coef, _latency(rows))]


def _med(xs: list[float], absolute: bool = False) -> float | None:
    return round(statistics.median(abs(x) for x in xs) if absolute else statistics.median(xs), 4) if xs else None


def fit(rows: list[dict]) -> list[dict]:
    """One row per (GPU, dtype) of the input: the coefficients, their in-sample fit and the held-out figures."""
    out = []
    groups = sorted({(r["gpu"], r["dtype"]) for r in rows})
    for gpu, dtype in groups:
        mine = [r for r in rows if (r["gpu"], r["dtype"]) == (gpu, dtype)]
        train = [r for r in mine if r["distribution"] == FIT_DISTRIBUTION and r["moe_ep_size"] == 1]
        y = _latency(train)
        a = _design(train, gpu, dtype)
        coef = np.linalg.lstsq(a / y[:, None], np.ones(len(y)), rcond=None)[0]
        skewed = [r for r in mine if r["distribution"] == HELD_OUT_DISTRIBUTION and r["moe_ep_size"] == 1]
        ep = [r for r in mine if r["distribution"] == FIT_DISTRIBUTION and r["moe_ep_size"] > 1]
        others = [(g, [r for r in rows if (r["gpu"], r["dtype"]) == (g, dtype) and r["distribution"] == FIT_DISTRIBUTION
                       and r["moe_ep_size"] == 1]) for g in sorted({r["gpu"] for r in rows}) if g != gpu]  # fmt: skip
        other_err = [e for g, rs in others for e in _log_errors(coef, rs, g, dtype)]
        ins = _log_errors(coef, train, gpu, dtype)
        out.append({
            "gpu": gpu, "dtype": dtype, "fixed_us": round(float(coef[0]) * 1e6, 2), "bytes_mult": round(float(coef[1]), 4),
            "flops_mult": round(float(coef[2]), 4), "points": len(train),
            "shapes": len({(r["hidden_size"], r["inter_size"], r["topk"], r["num_experts"]) for r in train}),
            "in_sample_median_abs_log": _med(ins, True), "in_sample_median_log": _med(ins),
            "power_law_median_log": _med(_log_errors(coef, skewed, gpu, dtype)),
            "power_law_median_abs_log": _med(_log_errors(coef, skewed, gpu, dtype), True),
            "ep_median_log": _med(_log_errors(coef, ep, gpu, dtype)), "ep_points": len(ep),
            "other_gpu": ";".join(g for g, _ in others), "other_gpu_median_abs_log": _med(other_err, True),
            "applies": "EP 1 (experts sliced over TP): EP > 1 measured slower than this form (ep_median_log)",
            "provenance": "MEASURED by NVIDIA aiconfigurator (vLLM 0.24.0 fused_moe Triton kernel), FITTED here: "
                          "fixed + bytes/bandwidth x bytes_mult + flops/peak x flops_mult per MoE layer",
            "source": SOURCE,
        })  # fmt: skip
    return out
