#!/usr/bin/env python3
"""Set the GPU timings of scripts/measure_layer_cost.py beside the step-cost model and fit its constants.

    python scripts/compare_layer_cost.py calibration/layer_cost/h200_ctx2048.json [--json]

For the four GEMMs of one layer share (QKV, O, gate/up, down; the timings' ``t_gemms_s``) the model
says ``max(bytes / (bandwidth · e_mem), flops / (peak · e_flop)) + kernels · floor``. This prints, per
model and tokens per sequence, the measured time, the time under the constants in
advisor/predict/stepcost.py, and under the (e_mem, e_flop, floor) that fit the timings best (least
squares on log time, grid search); and the GEMM part of R (time at T / time at T = 1), measured
and modelled. Attention is reported but not fitted: torch's SDPA is not vLLM's decode kernel.
"""

from __future__ import annotations

import argparse
import json
import math
import sys

GEMM_KERNELS = 4
"""QKV, O, gate/up and down projections: four GEMM launches per layer (SiLU·mul rides along)."""


def gemm_bytes_flops(shape: dict, tokens: int) -> tuple[float, float]:
    h, nh, nkv, d, inter = shape["hidden"], shape["heads"], shape["kv_heads"], shape["head_dim"], shape["intermediate"]
    params = h * (nh + 2 * nkv) * d + nh * d * h + h * 2 * inter + inter * h
    acts = tokens * (h * 4 + (nh + 2 * nkv) * d + nh * d + 3 * inter) * 2  # inputs and outputs, bf16
    return params * 2 + acts, 2.0 * params * tokens


def gemm_points(data: dict) -> list[tuple[dict, float, float, float]]:
    """(row, bytes, FLOPs, measured seconds) of every dense GEMM timing."""
    shapes = {s["model"]: s for s in data["shapes"]}
    return [(r, *gemm_bytes_flops(shapes[r["model"]], r["seqs"] * r["tokens_per_seq"]), r["t_gemms_s"]) for r in data["rows"]]


def rms_log_error(points: list, bw: float, peak: float, constants: tuple[float, float, float]) -> float:
    """Root-mean-square log error of model_time with (e_mem, e_flop, floor) against the timings."""
    return math.sqrt(sum(math.log(model_time(b, f, bw, peak, *constants) / t) ** 2 for _, b, f, t in points) / len(points))


def model_time(nbytes: float, flops: float, bw: float, peak: float, e_mem: float, e_flop: float, floor: float) -> float:
    return max(nbytes / (bw * e_mem), flops / (peak * e_flop)) + GEMM_KERNELS * floor


def extra_kinds(data: dict, bw: float, fp8_peak: float) -> dict:
    """FP8 GEMM FLOP efficiency (rows of ≥ 288 tokens, floor removed) and, for MoE blocks, experts
    touched against E·(1−(1−k/E)^t) and the grouped GEMMs' effective bandwidth."""
    from advisor.predict import stepcost as sc

    shapes = {s["model"]: s for s in data["shapes"]}
    out: dict = {"fp8": [], "moe": []}
    for r in data.get("fp8_rows", []):
        b, f = gemm_bytes_flops(shapes[r["model"]], r["seqs"] * r["tokens_per_seq"])
        t = r["t_gemms_s"] - GEMM_KERNELS * sc.GEMM_FLOOR_S
        out["fp8"].append({"model": r["model"], "tokens_per_seq": r["tokens_per_seq"], "measured_us": round(r["t_gemms_s"] * 1e6, 1),
                           "flop_efficiency": round(f / t / fp8_peak, 3) if r["tokens_per_seq"] >= 9 else None})  # fmt: skip
    for r in data.get("moe_rows", []):
        s = shapes[r["model"]]
        per = (s["hidden"] * 3 * s["expert_intermediate"]) * 2
        formula = sc.experts_touched(s["experts"], s["top_k"], r["seqs"] * r["tokens_per_seq"])
        out["moe"].append({"model": r["model"], "tokens_per_seq": r["tokens_per_seq"], "measured_us": round(r["t_moe_s"] * 1e6, 1),
                           "experts_touched": r["experts_touched"], "experts_formula": round(formula, 1),
                           "bandwidth_share": round(r["experts_touched"] * per / r["t_moe_s"] / bw, 3)})  # fmt: skip
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("timings", help="JSON written by scripts/measure_layer_cost.py")
    ap.add_argument("--gpu", default="H200", help="Spec-table GPU the timings were taken on (default H200).")
    ap.add_argument("--json", action="store_true", help="Print one JSON object.")
    args = ap.parse_args()
    from advisor.hardware.gpus import get_gpu
    from advisor.predict import stepcost as sc

    with open(args.timings) as fh:
        data = json.load(fh)
    gpu = get_gpu(args.gpu)
    bw, peak = gpu.bandwidth_tbs * 1e12, gpu.bf16_tflops * 1e12
    if not data["rows"]:
        print(json.dumps(extra_kinds(data, bw, (gpu.fp8_tflops or gpu.bf16_tflops) * 1e12), indent=1))
        return 0
    pts = gemm_points(data)

    def loss(e_mem: float, e_flop: float, floor: float) -> float:
        return rms_log_error(pts, bw, peak, (e_mem, e_flop, floor))

    grid = [(em / 100, ef / 100, fl * 1e-6) for em in range(30, 101, 2) for ef in range(30, 101, 2) for fl in range(0, 21)]
    best = min(grid, key=lambda g: loss(*g))
    current = (sc.WEIGHT_MEM_EFFICIENCY, sc.FLOP_EFFICIENCY, sc.GEMM_FLOOR_S)
    rows = []
    base: dict[str, tuple[float, float, float]] = {}
    for r, b, f, t in pts:
        m_cur = model_time(b, f, bw, peak, *current)
        m_fit = model_time(b, f, bw, peak, *best)
        if r["tokens_per_seq"] == 1:
            base[r["model"]] = (t, m_cur, m_fit)
        t1, c1, f1 = base[r["model"]]
        rows.append({"model": r["model"], "tokens_per_seq": r["tokens_per_seq"], "measured_us": round(t * 1e6, 1),
                     "model_current_us": round(m_cur * 1e6, 1), "model_fitted_us": round(m_fit * 1e6, 1),
                     "r_measured": round(t / t1, 3), "r_current": round(m_cur / c1, 3), "r_fitted": round(m_fit / f1, 3),
                     "attention_us": round(r["t_attention_s"] * 1e6, 1), "layer_us": round(r["t_layer_s"] * 1e6, 1)})  # fmt: skip
    out = {"timings": args.timings, "device": data["device"], "gpu_spec": gpu.name,
           "current": {"e_mem": current[0], "e_flop": current[1], "kernel_floor_us": round(current[2] * 1e6, 1), "rms_log_error": round(loss(*current), 3)},
           "fitted": {"e_mem": best[0], "e_flop": best[1], "kernel_floor_us": round(best[2] * 1e6, 1), "rms_log_error": round(loss(*best), 3)},
           "rows": rows, **extra_kinds(data, bw, (gpu.fp8_tflops or gpu.bf16_tflops) * 1e12)}  # fmt: skip
    if args.json:
        print(json.dumps(out, indent=1))
        return 0
    print(f"{data['device']}: {len(pts)} GEMM timings, {args.timings}")
    for name in ("current", "fitted"):
        c = out[name]
        print(f"  {name:<8} e_mem {c['e_mem']:.2f}  e_flop {c['e_flop']:.2f}  floor {c['kernel_floor_us']:.1f} us/GEMM  rms log error {c['rms_log_error']:.3f}")
    print(f"\n  {'model':<34} {'T':>3} {'measured':>9} {'current':>8} {'fitted':>8}   {'R meas':>6} {'R cur':>6} {'R fit':>6}")
    for r in out["fp8"]:
        eff = f"FLOP efficiency {r['flop_efficiency']:.2f}" if r["flop_efficiency"] else ""
        print(f"  fp8 {r['model']:<40} T={r['tokens_per_seq']:>2} {r['measured_us']:>8.1f} us {eff}")
    for r in out["moe"]:
        print(f"  moe {r['model']:<40} T={r['tokens_per_seq']:>2} {r['measured_us']:>8.1f} us  experts {r['experts_touched']:>3} "
              f"(formula {r['experts_formula']:>5.1f})  bandwidth share {r['bandwidth_share']:.2f}")
    for r in rows:
        print(f"  {r['model']:<34} {r['tokens_per_seq']:>3} {r['measured_us']:>9.1f} {r['model_current_us']:>8.1f} {r['model_fitted_us']:>8.1f}"
              f"   {r['r_measured']:>6.2f} {r['r_current']:>6.2f} {r['r_fitted']:>6.2f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
