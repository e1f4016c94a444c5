"""The GPU step grid (real vLLM 0.26.0 on an H200) against the step-cost model."""

from __future__ import annotations

import math
import statistics

from pathlib import Path

import pytest

from advisor.model.load import load_profile
from advisor.hardware.gpus import get_gpu
from advisor.calibrate import gpu_steps as g
from advisor.predict import host_profile as hp
from advisor.predict import stepcost as sc

CAL = Path(__file__).resolve().parent.parent / "calibration"


@pytest.fixture(scope="module")
def every_point():
    pts = [pt for folder in g.grid_dirs(CAL) for pt in g.load_points(folder)]
    assert pts, "the shipped grid is missing"
    return pts


@pytest.fixture(scope="module")
def points(every_point):
    """The H200 grids (the GPU the shipped constants were fitted on); other GPUs are their out-of-sample check."""
    return [pt for pt in every_point if pt.gpu == "H200"]


@pytest.fixture(scope="module")
def profiles(every_point):
    return {m: load_profile(g.MODEL_IDS[m]) for m in {pt.model for pt in every_point}}


def test_grid_has_plain_and_verification_points_with_provenance(points, profiles):
    """Issue 12's floor: >= 4 architectures x >= 4 draft lengths x >= 3 concurrencies, with provenance."""
    caps = {pt.draft_cap for pt in points}
    concs = {pt.concurrency for pt in points}
    assert 0 in caps and len(caps - {0}) >= 4, caps
    assert len(concs) >= 3, concs
    assert {g.arch_class(p) for p in profiles.values()} == {"dense", "gqa-moe", "mla-moe"}
    for model in {pt.model for pt in points}:
        mine = [pt for pt in points if pt.model == model]
        assert len({pt.draft_cap for pt in mine} - {0}) >= 4 and len({pt.concurrency for pt in mine}) >= 3, model
    assert all(pt.vllm_version == "0.26.0" and pt.gpu == "H200" and pt.source.endswith("grid.jsonl") for pt in points)
    readme = (CAL / "gpu_steps" / "README.md").read_text()
    assert "gridbench.py" in readme and "oneshot.sh" in readme


def test_shipped_spec_step_constants_are_the_fit_of_the_shipped_grid(points, profiles):
    """SPEC_STEP_FIXED_S / SPEC_STEP_PER_SEQ_S come from the measurements, not by hand: the grid the host
    profile names as its source (later machines' suffix steps are its out-of-sample check, below)."""
    source = hp.get("offline-grid").source
    mine = [pt for pt in points if pt.source == source]
    assert g.fit_spec_constants(mine, profiles) == (sc.SPEC_STEP_FIXED_S, sc.SPEC_STEP_PER_SEQ_S)
    assert hp.spec_costs("offline-grid") == (sc.SPEC_STEP_FIXED_S, sc.SPEC_STEP_PER_SEQ_S)


def test_plain_steps_predicted_within_5_percent_dense_8b_and_20_percent_gqa(points, profiles):
    """Plain decode steps: Llama-8B within 5 %, Qwen2.5-32B within 20 %, Qwen3-30B-A3B within 25 % at each
    concurrency and 5 % at the median. Qwen3-30B-A3B's routed experts are priced by the fused-MoE kernel's cost fitted
    on aiconfigurator's timings (advisor.predict.moe_kernel; this grid was not in that fit): 0.088 -> 0.031 median
    |ln|, but one token's step is 23 % high (the fit's fixed 38 us per layer against aiconfigurator's own 40 us timing
    of this small-expert shape at one token, where the form says 54 us). The MLA MoE (DeepSeek-V2-Lite) is not held
    to it: measured 3.4-5.1 ms flat in concurrency against 4.6-11.1 ms predicted (docs/predictor.md: likely dummy
    weights routing every sequence to the same experts)."""
    res = [r for r in g.predict_points([pt for pt in points if pt.agrees], profiles) if r.draft_cap == 0]
    assert {r.model for r in res} >= {"Llama-3.1-8B-Instruct", "Qwen2.5-32B-Instruct", "Qwen3-30B-A3B"}
    for r in res:
        bound = 0.05 if r.model.startswith("Llama") else 0.25 if r.arch_class == "gqa-moe" else 0.20
        if r.arch_class != "mla-moe":
            assert abs(r.step_ms_pred / r.step_ms_meas - 1) < bound, r
    gqa = [abs(math.log(r.step_ms_pred / r.step_ms_meas)) for r in res if r.arch_class == "gqa-moe"]
    assert statistics.median(gqa) < 0.05, gqa


def test_refit_beats_the_assumed_constants_out_of_sample():
    out = g.evaluate(CAL, load_profile)
    assert out["available"] and out["points"] >= 60 and len(out["models"]) >= 4
    lomo = out["r_median_abs_log_leave_one_model_out"]
    assert lomo is not None and out["leave_one_model_out_note"] is None
    assert lomo < out["r_median_abs_log_before_refit"] / 2
    assert out["r_median_abs_log_leave_one_concurrency_out"] < out["r_median_abs_log_before_refit"] / 2
    # the verdict is the two goals, computed, and names the classes that miss the bias goal
    bias = out["r_bias_leave_one_model_out_by_class"]
    assert set(bias) == {"dense", "gqa-moe", "mla-moe"}
    assert out["classes_biased_beyond_goal"] == sorted(c for c, b in bias.items() if abs(b) > g.GOAL_CLASS_BIAS)
    assert out["meets_goal"] == (lomo <= g.GOAL_MEDIAN_ABS_LOG_R and not out["classes_biased_beyond_goal"])


def test_points_whose_repetitions_disagree_are_listed_not_used():
    assert g.reps_agree([6.56, 6.52, 14.06]) and g.reps_agree([5.0])
    assert not g.reps_agree([17.9, 5.38]) and not g.reps_agree([-10.7, 18.9])
    out = g.evaluate(CAL, load_profile)
    assert out["excluded"] and all(len(e["rep_step_ms"]) >= 2 for e in out["excluded"])
    used = {(r["model"], r["k"], r["draft_cap"], r["concurrency"]) for r in out["table"]}
    assert not used & {(e["model"], e["k"], e["draft_cap"], e["concurrency"]) for e in out["excluded"]}


def test_planner_kv_cache_within_5_percent_of_real_vllm_for_every_boot():
    """Issue 12 goal: every model measured both ways, at K=0, 16 and 32, from vLLM's own log lines."""
    from advisor.calibrate.memory_measured import evaluate as mem_eval

    out = mem_eval(CAL, load_profile)
    assert out["available"] and len(out["models"]) >= 4 and {0, 16, 32} <= set(out["ks"])
    assert out["meets_goal"] and all(abs(r["rel_err"]) <= 0.05 for r in out["table"]), out["table"]


def test_seed_rows_keep_their_build_and_releases_pay_the_measured_costs():
    p = load_profile("meta-llama/Llama-3.1-8B-Instruct")
    gpu = get_gpu("H200")
    rel = sc.r_ratio(p, gpu, 1, concurrency=32, draft_tokens=4, context=1344, k=32)
    seed = sc.r_ratio(p, gpu, 1, concurrency=32, draft_tokens=4, context=1344, k=32, build="seed")
    serving = sc.r_ratio(p, gpu, 1, concurrency=32, draft_tokens=4, context=1344, k=32, build="serving-dummy")
    assert rel.spec.t_spec_fixed == sc.SPEC_STEP_FIXED_S and seed.spec.t_spec_fixed == 0.0
    assert serving.spec.t_spec_fixed == hp.get("serving-dummy").suffix_step_s  # the serving reference row
    assert serving.r > rel.r > seed.r
    assert rel.plain.total == seed.plain.total  # the plain step does not depend on the drafter


def test_ngram_steps_measured_and_the_profile_rests_on_them(points, profiles):
    """Campaign 11 (calibration/gpu_steps/h200-vllm0.26.0-c11): n-gram verification steps on two dense models.
    The offline-grid profile's n-gram per-sequence term is their fit; its per-step term is suffix's, because on the
    machine that measured both the two per-step fits agree within the loan-to-loan spread of suffix's own (3.75 ms
    on the first machine, 4.25 ms on this one)."""
    out = g.evaluate(CAL, load_profile)["ngram"]
    assert out["available"] and out["models"] == ["Llama-3.1-8B-Instruct", "Qwen2.5-32B-Instruct"]
    assert out["points"] >= 20
    step, per_seq = hp.spec_costs("offline-grid", "ngram")
    assert per_seq == out["fit"]["per_seq_s"] and step == hp.spec_costs("offline-grid", "suffix")[0]
    same = out["suffix_same_machine"]
    assert abs(out["fit"]["step_s"] - same["step_s"]) <= 0.5e-3
    # suffix's per-step term moved between machines more than n-gram's differs from it on one machine
    assert abs(out["fit"]["step_s"] - same["step_s"]) < same["step_s"] - sc.SPEC_STEP_FIXED_S + 1e-9
    assert out["r_median_abs_log_leave_one_model_out"] <= g.GOAL_MEDIAN_ABS_LOG_R
    assert out["r_median_abs_log_profile"] < out["r_median_abs_log_with_suffix_constants"]
    ng = [pt for pt in points if pt.method == "ngram"]
    assert {pt.k for pt in ng} == {5, 32} and {pt.concurrency for pt in ng} == {1, 4, 16, 64}


def test_suffix_constants_hold_on_another_machine_of_the_class():
    """The suffix grid re-measured on a later machine loan (campaign 11, Llama-3.1-8B, two boots) is predicted
    with the shipped constants, out of sample across machines."""
    out = g.evaluate(CAL, load_profile)["suffix_other_machines"]
    assert out["available"] and out["points"] >= 8
    assert out["r_median_abs_log"] <= g.GOAL_MEDIAN_ABS_LOG_R


def test_impossible_repetitions_exclude_their_point():
    """More than 1 + K tokens per sequence per step cannot happen: the differencing failed (uncapped K=32 n-gram
    drafts overshoot max_tokens), and the point is listed, not used."""
    assert g.rep_valid(6.02, 5) and not g.rep_valid(6.33, 5) and not g.rep_valid(46.5, 32) and g.rep_valid(1.0, 0)
    out = g.evaluate(CAL, load_profile)
    impossible = [e for e in out["excluded"] if any(t > 33.7 for t in e["rep_tokens_per_seq"])]
    assert impossible and all(e["method"] == "ngram" and e["draft_cap"] == 32 for e in impossible)
    used = {(r["model"], r["method"], r["k"], r["draft_cap"], r["concurrency"], r["source"])
            for r in out["ngram"]["table"]}
    assert not used & {(e["model"], e["method"], e["k"], e["draft_cap"], e["concurrency"], e["source"])
                       for e in impossible}


def test_another_gpu_is_predicted_out_of_sample_and_its_profile_is_its_fit():
    """Campaign 12 (calibration/gpu_steps/h100-vllm0.26.0-c12): the same engine, vLLM and VM class on one H100.
    Out of sample, the plain step from the H200-measured GEMM constants and the H100's datasheet lands within 5 %,
    and the H200 profile's suffix constants predict the H100's suffix R without bias (the serialised host work
    carried across the GPU type); the shipped H100 profile is the fit of its own grid, and an H100 matches it."""
    out = g.evaluate(CAL, load_profile)["other_gpu"]
    h100 = out["by_gpu"]["H100"]
    assert out["available"] and out["fitted_gpu"] == "H200"
    assert h100["models"] == ["Llama-3.1-8B-Instruct", "Qwen2.5-7B-Instruct"]
    assert h100["plain_points"] >= 8 and h100["plain_median_abs_log_step"] <= 0.05
    suf, ng = h100["suffix"], h100["ngram"]
    assert suf["points"] >= 20 and ng["points"] >= 20
    assert abs(suf["r_median_log_shipped_profile"]) <= 0.05 and suf["r_median_abs_log_shipped_profile"] <= 0.2
    assert ng["r_median_abs_log_leave_one_model_out"] <= g.GOAL_MEDIAN_ABS_LOG_R
    prof = hp.get("h100-vllm0.26.0")
    assert prof.gpu == "H100" and prof.role == "host" and prof.source == h100["sources"][0]
    assert (prof.suffix_step_s, prof.suffix_per_seq_s) == (suf["fit"]["step_s"], suf["fit"]["per_seq_s"])
    assert (prof.ngram_step_s, prof.ngram_per_seq_s) == (ng["fit"]["step_s"], ng["fit"]["per_seq_s"])
    assert hp.match("H100").profiles == [prof.id] and "MEASURED" in prof.provenance


def test_folder_gpu_reads_the_catalog_name_from_nvidia_smi(tmp_path):
    (tmp_path / "gpu.csv").write_text("name, driver_version, memory.total [MiB]\nNVIDIA H100 80GB HBM3, 580, 81559 MiB\n")
    assert g.folder_gpu(tmp_path) == "H100"
    (tmp_path / "gpu.csv").write_text("name, memory.total [MiB]\nNVIDIA H200, 143771 MiB\nNVIDIA H100 80GB HBM3, 1\n")
    assert g.folder_gpu(tmp_path) == "unknown"  # a mixed host is no one GPU's measurement
    (tmp_path / "gpu.csv").write_text("name\nSome Future GPU\n")
    assert g.folder_gpu(tmp_path) == "unknown"


def test_the_printed_plain_step_band_is_computed_per_class_from_the_shipped_grids():
    """The text output's plain-step accuracy is the class's own on that GPU, read from calibration/class_accuracy.csv
    (which a rebuild from the grids reproduces), and says where it was not measured (issue 42: no constant claim)."""
    from advisor.report.text import band_note as _band_note
    from advisor.predict.class_accuracy import lookup

    # the table is its rebuild: tests/test_tables.py (advisor calibrate rebuild class_accuracy --check)
    dense = lookup("H200", "dense")
    note = _band_note("H200", "TP 1", "dense")
    assert f"largest {math.expm1(dense.plain_max_abs_log) * 100:.0f}%" in note and "not measured" not in note
    mla = _band_note("H200", "TP 1", "mla-moe")
    assert f"median {math.expm1(lookup('H200', 'mla-moe').plain_median_abs_log) * 100:.0f}%" in mla
    far = _band_note("B200", "TP 8", "dense")
    assert "plain step not measured for dense on B200" in far and far.endswith("B200 TP 8 is not measured")
    assert "not measured for gqa-moe on H100" in _band_note("H100", "TP 1", "gqa-moe")
