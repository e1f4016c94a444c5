"""Issue 40, item 4 (scoped): verify records become measured step corrections per host profile, model class, weights
dtype and TP (advisor.calibrate.step_corrections), applied by the runtime only where measured
(advisor.predict.step_correction), scored leave one model out beside no correction.

Campaign 14's runs (one H100, vLLM 0.26.0, dummy weights) are the committed records: the first pass and the step
ratios here are the ones calibration/serving_bench/h100-vllm0.26.0-c14/compare.md reports."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
Q30 = "Qwen/Qwen3-30B-A3B-FP8"
H100_026 = ("--gpu", "H100", "--gpus", "1", "--vllm-version", "0.26", "--prompt-len", "1024", "--output-len", "512")


def test_committed_records_match_a_rebuild():  # the table itself: tests/test_tables.py
    res = subprocess.run([sys.executable, str(ROOT / "scripts" / "c14_verify_records.py"), "--check"], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr


def _c14():
    from advisor.calibrate.step_corrections import committed_records
    from advisor.paths import data_path

    records, files, skipped = committed_records(data_path("calibration"))
    assert files == ["calibration/serving_bench/h100-vllm0.26.0-c14/verify_records.jsonl"] and skipped == []
    return records


def test_c14_records_carry_the_campaigns_figures():
    recs = {r.label: r for r in _c14()}
    assert sorted(recs) == ["dsv2l-t15", "dsv2l-t20", "l8-bf16-t15", "l8-bf16-t30", "q30-fp8-t15", "q30-fp8-t25"]  # l8-fp8 not run
    q = recs["q30-fp8-t25"]
    assert q.weights == "dummy" and q.host_gpu == "H100" and q.gpu == "H100" and q.vllm_version == "0.26.0"
    assert q.arch_class == "gqa-moe" and q.weights_dtype == "fp8" and q.sla_missed and q.model_id.endswith("Qwen3-30B-A3B-FP8")
    # compare.md: TPOT ln +0.182 / +0.131, the step diagnostic +0.159 / +0.140, DeepSeek-V2-Lite -0.463 / -0.826
    assert round(q.log_error("TPOT ms"), 3) == 0.182 and round(recs["q30-fp8-t15"].log_error("TPOT ms"), 3) == 0.131
    steps = {k: round(math.log(r.step_point()[1] / r.step_point()[0]), 3) for k, r in recs.items()}
    assert steps == {"l8-bf16-t30": 0.026, "l8-bf16-t15": 0.015, "q30-fp8-t25": 0.159, "q30-fp8-t15": 0.140,
                     "dsv2l-t20": -0.463, "dsv2l-t15": -0.826}  # fmt: skip


def test_fit_and_leave_one_model_out_on_c14():
    from advisor.calibrate.step_corrections import evaluate
    from advisor.paths import data_path

    v = evaluate(data_path("calibration"))
    assert v["records"] == 6 and v["step_points"] == 6 and v["left_out"] == [] and v["shipped_matches_fit"]
    rows = {(c["arch_class"], c["dtype"]): c for c in v["corrections"]}
    assert rows["dense", "bf16"]["factor"] == pytest.approx(math.exp((0.0258 + 0.0147) / 2), abs=2e-4) and rows["dense", "bf16"]["applied"]
    # Qwen3-30B-A3B-FP8's runs over the step the physics predicts now (the fused-MoE kernel's measured cost, 3a260a5):
    # +0.054 / +0.020 (over the answers as printed: +0.159 / +0.140, which gave x1.161 before that physics)
    assert rows["gqa-moe", "fp8"]["factor"] == pytest.approx(math.exp((0.054 + 0.020) / 2), abs=2e-3) and rows["gqa-moe", "fp8"]["applied"]
    dsv = rows["mla-moe", "bf16"]
    assert dsv["factor"] < 1 and not dsv["applied"] and "dummy weights, MoE" in dsv["why_not"]
    for g in v["leave_one_model_out"]["groups"]:  # one model per class: nothing held out, and it says so
        assert g["lomo_median_abs_log"] is None and g["lomo_empty"].startswith("one model only")
        assert g["baseline_median_abs_log"] is not None
    assert v["leave_one_model_out"]["pooled"]["runs"] == 0
    fp = v["first_pass"]
    assert set(fp) == {"dense bf16", "gqa-moe fp8", "mla-moe bf16"}
    assert fp["gqa-moe fp8"]["figures"]["TPOT ms"]["median_log"] == pytest.approx(0.156, abs=1e-3)


def _point(model: str, log: float, **kw):
    from advisor.calibrate.step_corrections import Point

    base = {"host_profile": "h100-vllm0.26.0", "arch_class": "dense", "dtype": "bf16", "tp": 1, "campaign": "c", "label": model,
            "weights": "real"}  # fmt: skip
    return Point(**{**base, **kw}, model=model, log_ratio=log)


def test_leave_one_model_out_holds_each_model_out_of_its_own_factor():
    from advisor.calibrate.step_corrections import fit, leave_one_model_out

    pts = [_point("a", 0.10), _point("a", 0.20), _point("b", 0.30), _point("c", -0.10),
           _point("x", -0.5, arch_class="gqa-moe", weights="dummy")]  # fmt: skip
    rows, _ = fit(pts, "test")
    dense = next(r for r in rows if r.arch_class == "dense")
    assert dense.factor == pytest.approx(math.exp((0.15 + 0.30 - 0.10) / 3), abs=1e-4)  # per-model means, then their mean
    moe = next(r for r in rows if r.arch_class == "gqa-moe")
    assert not moe.applied and moe.factor < 1
    lo = leave_one_model_out(pts)
    g = next(x for x in lo["groups"] if x["arch_class"] == "dense")
    pm = {m["model"]: m for m in g["per_model"]}
    assert pm["a"]["held_out_factor"] == pytest.approx(math.exp((0.30 - 0.10) / 2), abs=1e-4)  # fitted without a
    assert pm["a"]["lomo_median_abs_log"] == pytest.approx(statistics_median([abs(0.10 - 0.10), abs(0.20 - 0.10)]), abs=1e-4)
    assert pm["b"]["held_out_factor"] == pytest.approx(math.exp((0.15 - 0.10) / 2), abs=1e-4)
    assert g["lomo_empty"] is None and lo["pooled"]["runs"] == 4
    x = next(x for x in lo["groups"] if x["arch_class"] == "gqa-moe")
    assert x["lomo_empty"].startswith("one model only (x)") and x["per_model"][0]["held_out_note"] == "no other model in the group"


def statistics_median(xs):
    import statistics

    return statistics.median(xs)


def _shipped(cls: str, dtype: str) -> float:
    from advisor.predict import step_correction as stc

    return next(r.factor for r in stc.shipped() if (r.arch_class, r.dtype) == (cls, dtype))


def test_runtime_applies_a_row_only_where_measured():
    """decode_step inside applied(): x factor for the row's class, dtype and TP on one replica (dense: any DP); the
    physics alone elsewhere, and outside the block."""
    from advisor.hardware.gpus import get_gpu
    from advisor.model.load import load_profile
    from advisor.predict import step_correction as stc
    from advisor.predict.absolute import ReplicaLayout, decode_step
    from advisor.settings import Settings

    rows, how = stc.for_host("H100", None, "0.26")
    assert {(r.arch_class, r.dtype) for r in rows} == {("dense", "bf16"), ("gqa-moe", "fp8"), ("mla-moe", "bf16")}
    assert "CPU not verified" in how
    assert stc.for_host("H100", None, "0.32") == ((), "") and stc.for_host("H200", None, "0.26")[0] == ()
    q30, llama = load_profile(Q30, Settings()), load_profile("meta-llama/Llama-3.1-8B-Instruct", Settings())
    gpu = get_gpu("H100")
    one, two, dp2 = ReplicaLayout(tp=1), ReplicaLayout(tp=2), ReplicaLayout(tp=1, dp=2)
    bare = {k: decode_step(p, gpu, lay, 64, 1280)[0] for k, (p, lay) in {"q1": (q30, one), "q2": (q30, two), "qdp": (q30, dp2),
                                                                       "ldp": (llama, dp2)}.items()}  # fmt: skip
    with stc.applied(rows, how):
        t, notes = decode_step(q30, gpu, one, 64, 1280)
        f = _shipped("gqa-moe", "fp8")
        assert t == pytest.approx(bare["q1"] * f) and any(n.startswith(f"MEASURED step correction x{f:.2f} for gqa-moe fp8") for n in notes)
        assert decode_step(q30, gpu, two, 64, 1280)[0] == bare["q2"]  # TP 2 not measured
        assert decode_step(q30, gpu, dp2, 64, 1280)[0] == bare["qdp"]  # MoE over DP replicas not measured
        assert decode_step(llama, gpu, dp2, 64, 1280)[0] == pytest.approx(bare["ldp"] * _shipped("dense", "bf16"))  # dense replicas independent
    assert decode_step(q30, gpu, one, 64, 1280)[0] == bare["q1"]


def test_recommend_says_when_the_step_is_corrected(run_cli):
    code, out, err = run_cli("recommend", Q30, *H100_026, "--max-tpot-ms", "25")
    assert code == 0, err
    f = _shipped("gqa-moe", "fp8")
    assert f"term: MEASURED step correction x{f:.2f} for gqa-moe fp8 on host profile h100-vllm0.26.0 at TP 1 from campaign h100-vllm0.26.0-c14" in out
    code, out, _ = run_cli("recommend", Q30, *H100_026, "--max-tpot-ms", "25", "--json")
    rec = json.loads(out)
    sc = rec["prediction"]["step_correction"]
    assert sc["factor"] == f and sc["host_profile"] == "h100-vllm0.26.0" and rec["benchmark"]["answer"]["step_correction"] == f
    # the answer moved: campaign 14's uncorrected answer ran 192 in flight and missed TPOT <= 25 ms
    assert rec["prediction"]["offered_concurrency"] < 192 and rec["sla_met"] is True
    code, out, _ = run_cli("recommend", Q30, "--gpu", "H100", "--gpus", "1", "--max-tpot-ms", "25", "--json")  # vLLM 0.32: not measured
    assert "step_correction" not in json.loads(out)["prediction"] and "step correction" not in out
    code, out, _ = run_cli("recommend", "deepseek-ai/DeepSeek-V2-Lite", *H100_026, "--max-tpot-ms", "20", "--spec", "none")
    assert f"step correction x{_shipped('mla-moe', 'bf16'):.2f} measured for mla-moe bf16" in out and "NOT APPLIED: dummy weights, MoE" in out
    assert "MEASURED step correction" not in out


def test_the_users_rows_replace_the_shipped_ones(run_cli, isolated_home):
    from advisor.predict import step_correction as stc

    row = next(r for r in stc.shipped() if r.arch_class == "gqa-moe").model_copy(
        update={"factor": 1.5, "campaigns": "user store", "source": "user store test"})
    data = isolated_home / ".local" / "share" / "advisor"
    data.mkdir(parents=True)
    (data / stc.USER_FILE).write_text(stc.render_rows([row]))
    code, out, err = run_cli("recommend", Q30, *H100_026, "--max-tpot-ms", "25")
    assert code == 0, err
    assert "MEASURED step correction x1.50 for gqa-moe fp8 on host profile h100-vllm0.26.0 at TP 1 from campaign user store" in out
    (data / stc.USER_FILE).write_text("host_profile,arch_class\nx,quantum\n")
    code, out, err = run_cli("recommend", Q30, *H100_026, "--max-tpot-ms", "25")
    assert code == 0 and "step corrections: line 2 left out" in out + err and f"x{_shipped('gqa-moe', 'fp8'):.2f}" in out


def test_calibrate_fits_the_users_verify_runs(run_cli, isolated_home, monkeypatch, tmp_path):
    """verify on an H100 host (host_info stood in for) of an answer that already carried the shipped correction:
    calibrate re-predicts the step with the physics alone (the answer's running sequences and context), fits the user's row from the run and writes the data dir's step_corrections.csv."""
    from advisor.predict import step_correction as stc
    from advisor.probe import campaign

    code, out, err = run_cli("recommend", Q30, *H100_026, "--max-tpot-ms", "25", "--json")
    answer = json.loads(out)
    (cmd,) = answer["benchmark"]["commands"]
    c, step = cmd["load"]["max_concurrency"], answer["prediction"]["step_ms"]["value"]
    (tmp_path / "a.json").write_text(out)
    result = json.loads((ROOT / "calibration/serving_bench/h100-vllm0.26.0-c14/results/q30-fp8-t15.json").read_text())
    result.update(max_concurrency=c, num_prompts=cmd["num_prompts"], completed=cmd["num_prompts"],
                  total_input_tokens=1024 * cmd["num_prompts"], total_output_tokens=512 * cmd["num_prompts"],
                  median_itl_ms=step * 1.1, model_id=Q30)  # fmt: skip
    (tmp_path / "r.json").write_text(json.dumps(result))
    host = {"schema_version": 1, "gpus": [{"name": "NVIDIA H100 80GB HBM3"}], "cpu": {"model": "Intel(R) Xeon(R) Processor"},
            "versions": {"vllm": "0.26.0"}}  # fmt: skip
    monkeypatch.setattr(campaign, "host_info", lambda s: {"fingerprint": "cd" * 32, "host": host, "gpu": "H100", "gpus": 1})
    code, out, err = run_cli("verify", "--result", str(tmp_path / "r.json"), "--prediction", str(tmp_path / "a.json"))
    assert code in (0, 9), err
    code, out, err = run_cli("calibrate")
    assert code == 0, err
    f = 1.1 * _shipped("gqa-moe", "fp8")
    assert f"step correction x{f:.3f} for gqa-moe fp8 on host profile h100-vllm0.26.0 at TP 1 (1 verify run(s) of {Q30}; applied" in out
    (row,) = stc.read_rows((isolated_home / ".local" / "share" / "advisor" / stc.USER_FILE).read_text())
    assert row.factor == pytest.approx(f, abs=2e-4) and row.campaigns == "user store" and row.weights == "real"
    code, out, err = run_cli("recommend", Q30, *H100_026, "--max-tpot-ms", "25")
    assert f"MEASURED step correction x{f:.2f} for gqa-moe fp8" in out and "campaign user store" in out


def test_calibrate_evaluate_reports_the_verify_section(calibrate_evaluate_json):
    v = calibrate_evaluate_json["verify"]
    assert v["available"] and v["records"] == 6 and v["shipped_matches_fit"]
    assert all(g["lomo_empty"] for g in v["leave_one_model_out"]["groups"]) and v["baseline"].startswith("no correction")


def test_the_users_store_section_is_scored_the_same_way():
    from advisor.calibrate.step_corrections import user_section

    recs = [r.model_copy(update={"campaign": None}) for r in _c14()]
    u = user_section(recs)
    assert u["records"] == 6 and u["step_points"] == 6 and {c["campaigns"] for c in u["corrections"]} == {"user store"}
    assert [g["lomo_empty"] is not None for g in u["leave_one_model_out"]["groups"]] == [True, True, True]


def test_which_runs_measure_a_step():
    from advisor.probe.verify_record import used_for_correction

    r = next(x for x in _c14() if x.label == "q30-fp8-t25")
    assert used_for_correction(r) is None
    assert used_for_correction(r.model_copy(update={"method": "eagle3"})).startswith("method eagle3")
    assert used_for_correction(r.model_copy(update={"load_matched": False})).startswith("the run offered another load")
    assert "without a GPU" in used_for_correction(r.model_copy(update={"host_gpu": None}))
    assert "with H200" in used_for_correction(r.model_copy(update={"host_gpu": "H200"}))
    corrected = r.model_copy(update={"step_correction": 2.0})  # an answer that already carried x2: divided out
    assert corrected.step_point()[0] == pytest.approx(r.step_point()[0] / 2)


def test_the_physics_now_beside_the_answers_as_printed():
    """Campaign 14's runs against the model as it is now (its closed loop replayed at each run's own load, the fused-MoE
    kernel cost fitted on aiconfigurator's timings, not on these runs; no correction) beside the answers as printed:
    the FP8 MoE decode step moves from ln +0.149 to within 0.05 and its TPOT closer; the dense step does not move;
    every record carries the answer's shape."""
    from advisor.calibrate.step_corrections import evaluate
    from advisor.paths import data_path

    now = evaluate(data_path("calibration"))["physics_now"]
    assert now["records_without_shape"] == 0
    q, d = now["by_class"]["gqa-moe fp8"]["figures"], now["by_class"]["dense bf16"]["figures"]
    assert q["decode step ms"]["median_abs_log_as_printed"] == pytest.approx(0.1494, abs=1e-3)
    assert q["decode step ms"]["median_abs_log_now"] < 0.05
    assert q["TPOT ms"]["median_abs_log_now"] < q["TPOT ms"]["median_abs_log_as_printed"]
    assert d["decode step ms"]["median_log_now"] == pytest.approx(d["decode step ms"]["median_log_as_printed"], abs=1e-3)
    for figs in now["by_class"].values():
        assert set(figs["figures"]) == {"TPOT ms", "TTFT ms", "output tok/s", "decode step ms"}
