"""The step-cost model's GEMM constants against the shipped H200 timings (calibration/layer_cost/)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from advisor.hardware.gpus import get_gpu
from advisor.predict import stepcost as sc

ROOT = Path(__file__).resolve().parents[1]
TIMINGS = ROOT / "calibration" / "layer_cost" / "h200_ctx2048.json"


def _compare():
    spec = importlib.util.spec_from_file_location("compare_layer_cost", ROOT / "scripts" / "compare_layer_cost.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _rms(constants) -> float:
    cmp = _compare()
    gpu = get_gpu("H200")
    points = cmp.gemm_points(json.loads(TIMINGS.read_text()))
    return cmp.rms_log_error(points, gpu.bandwidth_tbs * 1e12, gpu.bf16_tflops * 1e12, constants)


def test_timings_are_the_measured_ones():
    data = json.loads(TIMINGS.read_text())
    assert data["device"] == "NVIDIA H200" and len(data["rows"]) == 21
    t70 = {r["tokens_per_seq"]: r["t_gemms_s"] for r in data["rows"] if r["model"].endswith("70B-Instruct")}
    assert t70[33] / t70[1] == pytest.approx(5.21, abs=0.01)  # GEMM part of R at 33 tokens per sequence


def test_shipped_constants_fit_the_timings():
    shipped = (sc.WEIGHT_MEM_EFFICIENCY, sc.FLOP_EFFICIENCY, sc.GEMM_FLOOR_S)
    assert _rms(shipped) < 0.05
    assert _rms((0.80, 0.60, 0.0)) > 0.5  # the assumptions they replaced


def test_floor_lowers_r_for_small_models_most():
    from advisor.model.load import load_profile

    gpu = get_gpu("H200")
    rs = {}
    for model in ("meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-70B-Instruct"):
        p = load_profile(model)
        step = sc.step_cost(p, gpu, 8, sc.StepShape(seqs=32, tokens_per_seq=1, context=2048))
        rs[model] = sc.gemm_floor(p) / step.total
    assert rs["meta-llama/Llama-3.1-8B-Instruct"] > rs["meta-llama/Llama-3.1-70B-Instruct"] > 0.1


def test_fp8_efficiency_and_experts_touched_match_the_moe_fp8_timings():
    cmp = _compare()
    data = json.loads((ROOT / "calibration" / "layer_cost" / "h200_moe_fp8.json").read_text())
    gpu = get_gpu("H200")
    extra = cmp.extra_kinds(data, gpu.bandwidth_tbs * 1e12, gpu.fp8_tflops * 1e12)
    effs = [r["flop_efficiency"] for r in extra["fp8"] if r["flop_efficiency"]]
    assert effs and abs(sorted(effs)[len(effs) // 2] - sc.FP8_FLOP_EFFICIENCY) < 0.03
    for r in extra["moe"]:  # E·(1−(1−k/E)^t) against uniform random top-k routing
        assert r["experts_formula"] == pytest.approx(r["experts_touched"], rel=0.08), r


def test_piecewise_launch_cost_is_at_least_the_measured_proxy():
    for name in ("h200_graph_modes.json", "h200_graph_modes_70b.json"):
        rows = json.loads((ROOT / "calibration" / "layer_cost" / name).read_text())["rows"]
        for r in rows:
            assert 3.0 < r["per_layer_piecewise_us"] < 8.0  # graph pieces + eager attention, over one full graph
            assert r["per_layer_none_us"] > r["per_layer_piecewise_us"]
            assert sc.LAYER_LAUNCH_S["piecewise"] * 1e6 >= r["per_layer_piecewise_us"]  # the proxy is a lower bound
