"""The GPU step grid (real vLLM 0.26.0 on an H200) against the step-cost model."""

from __future__ import annotations

from pathlib import Path

import pytest

from advisor.model.load import load_profile
from advisor.hardware.gpus import get_gpu
from advisor.predict import gpu_steps as g
from advisor.predict import stepcost as sc

CAL = Path(__file__).resolve().parent.parent / "calibration"


@pytest.fixture(scope="module")
def points():
    pts = [pt for folder in g.grid_dirs(CAL) for pt in g.load_points(folder)]
    assert pts, "the shipped grid is missing"
    return pts


@pytest.fixture(scope="module")
def profiles(points):
    return {m: load_profile(g.MODEL_IDS[m]) for m in {pt.model for pt in points}}


def test_grid_has_plain_and_verification_points_with_provenance(points):
    caps = {pt.draft_cap for pt in points}
    concs = {pt.concurrency for pt in points}
    assert 0 in caps and len(caps - {0}) >= 4, caps
    assert len(concs) >= 3, concs
    assert all(pt.vllm_version == "0.26.0" and pt.gpu == "H200" and pt.source.endswith("grid.jsonl") for pt in points)
    readme = (CAL / "gpu_steps" / "README.md").read_text()
    assert "gridbench.py" in readme and "oneshot.sh" in readme


def test_shipped_spec_step_constants_are_the_fit_of_the_shipped_grid(points, profiles):
    """SPEC_STEP_FIXED_S / SPEC_STEP_PER_SEQ_S come from the measurements, not by hand."""
    assert g.fit_spec_constants(points, profiles) == (sc.SPEC_STEP_FIXED_S, sc.SPEC_STEP_PER_SEQ_S)
    assert sc.SPEC_STEP_COSTS["release"] == (sc.SPEC_STEP_FIXED_S, sc.SPEC_STEP_PER_SEQ_S)


def test_plain_steps_predicted_within_5_percent(points, profiles):
    res = g.predict_points(points, profiles)
    plain = [r for r in res if r.draft_cap == 0]
    assert plain and all(abs(r.step_ms_pred / r.step_ms_meas - 1) < 0.05 for r in plain), plain


def test_refit_beats_the_assumed_constants_out_of_sample():
    out = g.evaluate(CAL, load_profile)
    assert out["available"] and out["points"] >= 20
    assert out["r_median_abs_log_leave_one_concurrency_out"] < out["r_median_abs_log_before_refit"] / 2
    assert out["r_median_abs_log_in_sample"] <= out["r_median_abs_log_leave_one_concurrency_out"]
    # one model measured: leave-one-model-out cannot be computed yet, and the report says so
    assert out["r_median_abs_log_leave_one_model_out"] is None and "second measured model" in out["leave_one_model_out_note"]


def test_seed_rows_keep_their_build_and_releases_pay_the_measured_costs():
    p = load_profile("meta-llama/Llama-3.1-8B-Instruct")
    gpu = get_gpu("H200")
    rel = sc.r_ratio(p, gpu, 1, concurrency=32, draft_tokens=4, context=1344)
    seed = sc.r_ratio(p, gpu, 1, concurrency=32, draft_tokens=4, context=1344, build="seed")
    assert rel.spec.t_spec_fixed == sc.SPEC_STEP_FIXED_S and seed.spec.t_spec_fixed == 0.0
    assert rel.r > seed.r
    assert rel.plain.total == seed.plain.total  # the plain step does not depend on the drafter
