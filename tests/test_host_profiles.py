"""Host cost profiles (advisor/predict/host_profile.py), the seed host's inferred profile, the
gain decomposition, n-gram's own step cost and the published-results evaluation."""

from __future__ import annotations

import json
import math

import pytest

from advisor.domain.workload import Workload
from advisor.hardware.gpus import get_gpu
from advisor.model.load import load_profile
from advisor.predict import host_profile as hp
from advisor.predict import stepcost as sc
from advisor.predict.api import predict

LLAMA_8B = "meta-llama/Llama-3.1-8B-Instruct"


def test_seed_profile_is_what_the_seed_rows_imply():
    """The shipped seed-b200 suffix cost is the grid point host_infer picks from the seed rows (not by hand)."""
    from advisor.predict.dataset import default_profile_of, seed_observations
    from advisor.calibrate.host_infer import infer

    best = infer(seed_observations(replicates=True), default_profile_of())["best"]
    seed = hp.get("seed")
    assert (seed.suffix_step_s, seed.suffix_per_seq_s) == (best["suffix_step_s"], best["suffix_per_seq_s"])
    # and the H200 row is the grid's measurement (gpu_steps refits it; test_gpu_steps checks that)
    assert hp.spec_costs("offline-grid") == (sc.SPEC_STEP_FIXED_S, sc.SPEC_STEP_PER_SEQ_S) == (3.75e-3, 120e-6)


def test_match_by_fingerprint_then_gpu_then_none():
    h200 = hp.get("release")
    exact = hp.match("H200", h200.cpu_model, "0.26.0")
    assert exact.kind == "exact" and exact.profiles == [h200.id]
    assert hp.match("H200", "AMD EPYC", "0.26.1").kind == "gpu+vllm"
    part = hp.match("B200", None, "0.32")
    assert part.kind == "gpu" and part.profiles == ["seed-b200"] and "advisor probe" in part.note
    assert hp.match("H100").profiles == ["h100-vllm0.26.0"]  # measured (campaign 12), matched by GPU
    none = hp.match("A100")
    assert none.kind == "none" and set(none.profiles) == {p.id for p in hp.known()} and "advisor probe" in none.note


def test_unknown_host_spans_the_known_profiles_and_names_the_probe():
    p = load_profile(LLAMA_8B)
    w = Workload(corpus="sharegpt", concurrency=32)
    unknown = predict(p, get_gpu("A100"), 8, w, host_state="OFF")
    # each known profile priced at the unknown host's own K̄ (a given build brings its host class's K̄ prior
    # and fitted terms, an unknown host neither): its R is their geometric mean, its gain K̄ / R alone
    same = w.model_copy(update={"k_bar": unknown.k_bar, "k_bar_k": 32})
    given = {b: predict(p, get_gpu("A100"), 8, same, host_state="OFF", build=b) for b in [q.id for q in hp.known()]}
    assert unknown.host_match == "none" and unknown.host_spread > 0.1
    assert unknown.r == pytest.approx(math.exp(sum(math.log(g.r) for g in given.values()) / len(given)), rel=0.01)
    assert unknown.decomposition.fitted_factor == pytest.approx(1.0, abs=1e-4)
    assert unknown.gain == pytest.approx(unknown.k_bar / unknown.r, rel=0.01)
    assert given["seed-b200"].host_spread == 0.0 and given["seed-b200"].host_match == "given"
    assert any("advisor probe" in line for line in unknown.explanation)
    assert unknown.gain_high / unknown.gain_low > given["seed-b200"].gain_high / given["seed-b200"].gain_low


@pytest.mark.parametrize("gpu,tp,corpus,state", [("B200", 8, "humaneval", "OFF"), ("H200", 1, "sharegpt", None),
                                                 ("H100", 4, "mix", "ON"), ("B200", 8, None, None)])
def test_decomposition_multiplies_to_the_gain(gpu, tp, corpus, state):
    p = load_profile(LLAMA_8B)
    pred = predict(p, get_gpu(gpu), tp, Workload(corpus=corpus, concurrency=16), host_state=state)
    d = pred.decomposition
    assert d.k_bar / d.r * d.fitted_factor == pytest.approx(pred.gain, rel=2e-4)  # the printed parts, 4 decimals each
    assert set(d.sources) == {"k_bar", "r", "fitted_factor"} and pred.r == d.r


def test_fitted_factor_is_the_fitted_terms_not_a_residual():
    """issue 42 item 5: the printed fitted factor is exp(the calibrated model's fitted terms), computed from them (on the
    seed host: the terms fitted there; elsewhere: none, so 1), and the gain is K̄ / R x that factor."""
    from advisor.predict.api import calibrated_model
    from advisor.predict.calibrated import RowInputs

    p = load_profile(LLAMA_8B)
    for gpu, tp in (("B200", 8), ("H200", 1)):
        pred = predict(p, get_gpu(gpu), tp, Workload(corpus="humaneval", concurrency=32), host_state="OFF", k=32)
        build = pred.host_profile
        row = calibrated_model().predict_row(RowInputs(profile=p, gpu=get_gpu(gpu), tp=tp, corpus="humaneval",
                                                       host_state="OFF", concurrency=32, k=32, build=build))  # fmt: skip
        assert pred.decomposition.fitted_factor == pytest.approx(math.exp(sum(row.terms.values())), abs=1e-4)
        assert (pred.decomposition.fitted_factor != 1.0) == row.fitted_applied == (gpu == "B200")
        assert pred.gain == pytest.approx(pred.decomposition.k_bar / pred.decomposition.r * pred.decomposition.fitted_factor, rel=2e-4)


def test_fitted_terms_apply_only_on_their_host_class():
    """The calibrated terms were fitted on the seed host's rows: on the measured H200 profile the
    gain is K̄ / R alone; on the seed host they apply."""
    p = load_profile(LLAMA_8B)
    w = Workload(corpus="sharegpt", concurrency=32)
    on_h200 = predict(p, get_gpu("H200"), 1, w, host_state="OFF", build="release")
    on_seed = predict(p, get_gpu("B200"), 8, w, host_state="OFF", build="seed")
    assert on_h200.decomposition.fitted_factor == pytest.approx(1.0, abs=1e-4)
    assert "none" in on_h200.decomposition.sources["fitted_factor"]
    assert abs(math.log(on_seed.decomposition.fitted_factor)) > 0.01


def test_base_models_do_not_get_the_llama_instruct_term():
    from advisor.predict.calibrated import FEATURES, population_features

    p = load_profile(LLAMA_8B)
    i = FEATURES.index("instruct_x_llama")
    assert population_features(p, "OFF", 0.1, 0.2)[i] == 1.0
    assert population_features(p.model_copy(update={"family": "base"}), "OFF", 0.1, 0.2)[i] == 0.0


def test_ngram_pays_its_own_step_cost():
    p = load_profile(LLAMA_8B)
    gpu = get_gpu("H200")
    shape = dict(seqs=32, tokens_per_seq=3, context=1000, spec=True, k=4)
    suffix = sc.step_cost(p, gpu, 1, sc.StepShape(**shape))
    ngram = sc.step_cost(p, gpu, 1, sc.StepShape(**shape, method="ngram"))
    prof = hp.get("release")
    assert suffix.t_draft == pytest.approx(prof.suffix_per_seq_s * 32)
    assert ngram.t_draft == pytest.approx(prof.ngram_per_seq_s * 32) and ngram.t_draft < suffix.t_draft
    assert ngram.t_spec_fixed == prof.ngram_step_s
    # behind `vllm serve` (the dummy-weight reference profile) an n-gram step costs far less host work than a suffix step
    serving = hp.get("serving-dummy")
    assert serving.ngram_step_s + 32 * serving.ngram_per_seq_s < 0.5 * (serving.suffix_step_s + 32 * serving.suffix_per_seq_s)


def test_published_rows_are_sourced_and_evaluated(tmp_path):
    from advisor.paths import data_path
    from advisor.calibrate import published
    from advisor.predict.dataset import default_profile_of

    rows = published.load(data_path("calibration"))
    assert rows and all(r.url.startswith("https://") and r.quote and r.assumed for r in rows)
    def quoted(r) -> bool:  # the figure is in the quote, or is the ratio of two figures quoted (TPOT, tok/s tables)
        import re

        if str(r.value).rstrip("0").rstrip(".") in r.quote.replace("x", "").replace("–", " ") or r.value == 1.0:
            return True
        if "slowdown" in r.quote and f"{1 / r.value:.1f}x slowdown" in r.quote:
            return True
        nums = [float(x) for x in re.findall(r"\d+\.?\d*", r.quote)]
        return any(b and abs(a / b / r.value - 1) < 5e-4 for a in nums for b in nums)

    assert all(quoted(r) for r in rows), [r for r in rows if not quoted(r)]
    # more than one source, and n-gram over plain among the methods (issue #22 (c))
    assert len({r.source for r in rows}) >= 3 and {"suffix", "ngram", "suffix_over_ngram"} <= {r.method for r in rows}
    out = published.evaluate(data_path("calibration"), default_profile_of())
    assert out["available"] and {"suffix", "ngram", "suffix_over_ngram"} <= set(out["by_method"])
    assert all(0 <= v["coverage_90"] <= 1 and v["rows"] > 0 for v in out["by_method"].values())
    assert published.evaluate(tmp_path, default_profile_of())["available"] is False


def test_seed_host_recommendation_agrees_with_the_seed_rows(run_cli):
    """Every seed row of Qwen2.5-32B-Instruct at host state OFF has suffix winning by x1.5 or more;
    recommend on that host class turns suffix on."""
    code, out, err = run_cli("recommend", "Qwen/Qwen2.5-32B-Instruct", "--gpu", "B200", "--gpus", "8", "--json")
    assert code == 0, err
    rec = json.loads(out)
    assert rec["decision"]["speculative_method"] == "suffix"
    assert rec["prediction"]["host_profile"] == "seed-b200" and rec["prediction"]["gain"] > 1.0


def test_seed_model_on_the_seed_host_follows_its_rows_per_host_state():
    """Qwen2.5-32B-Instruct, 8 x B200, every seed corpus: predicted at host state OFF suffix wins where every seed
    row has it winning (x1.47-2.16); with the host state unknown (``recommend --gpu B200`` from elsewhere) the
    gain is the blend of both states and lands within |ln| 0.2 of the seed's OFF/ON geometric mean."""
    import csv

    from advisor.paths import data_path
    from advisor.predict.dataset import default_profile_of

    p = default_profile_of()("Qwen/Qwen2.5-32B-Instruct")
    rows = [r for r in csv.DictReader((data_path("calibration") / "sweep_b200.csv").open()) if r["hf_id"] == p.id]
    assert len(rows) == 7
    for r in rows:
        w = Workload(corpus=r["corpus"], concurrency=32)
        off, on = (float(r["suf_off"]) / float(r["van_off"])), (float(r["suf_on"]) / float(r["van_on"]))
        assert off > 1.4 and predict(p, get_gpu("B200"), 8, w, host_state="OFF").gain > 1.25, r["corpus"]
        blend = predict(p, get_gpu("B200"), 8, w).gain
        assert abs(math.log(blend / math.sqrt(off * on))) < 0.2, r["corpus"]


def test_calibrate_fits_and_stores_a_probed_hosts_profile(tmp_path, run_cli):
    """A --dummy-weights vanilla + suffix:32 probe on a GPU host (the shipped H200 campaign) is enough
    for `advisor calibrate` to fit that host's profile (R = tokens per step / gain), store it in the
    data dir, and for predictions on that fingerprint to use it."""
    import shutil

    from advisor.cli.wiring import load_user_profiles
    from advisor.paths import data_path
    from advisor.settings import Settings

    src = data_path("calibration") / "gpu_probes" / "h200-vllm0.26.0" / "probes.sqlite"
    data = tmp_path / "data"
    data.mkdir()
    shutil.copy(src, data / "probes.sqlite")
    try:
        code, out, err = run_cli("--data-dir", str(data), "calibrate", "--json")
        assert code == 0, err
        rep = json.loads(out)["host_profiles"]
        (fit,) = rep["profiles"]
        prof = fit["profile"]
        assert prof["gpu"] == "H200" and prof["vllm_version"] == "0.26.0" and "MEASURED by advisor probe" in prof["provenance"]
        (pair,) = fit["pairs"]
        assert pair["r_fitted"] == pytest.approx(pair["r_measured"], rel=0.03)
        rows = load_user_profiles(Settings(data_dir=data))
        assert [r.id for r in rows] == [prof["id"]]
        m = hp.match("H200", prof["cpu_model"], "0.26.0")
        assert m.kind == "exact" and m.profiles == [prof["id"]]
        p = predict(load_profile(LLAMA_8B), get_gpu("H200"), 1, Workload(corpus="sharegpt", concurrency=32),
                    host_state="OFF", cpu_model=prof["cpu_model"], vllm_version="0.26.0")
        assert p.host_profile == prof["id"] and p.host_spread == 0.0
    finally:
        hp.use_user_profiles([])


def test_real_probe_evaluation_scores_the_chosen_option(tmp_path):
    """Evaluation (b) reads records.jsonl under calibration/, asks the predictor for each option
    without the measured K̄, and scores the chosen one against the best measured."""
    from advisor.calibrate.records import calibration_records
    from advisor.calibrate import real_probes
    from advisor.predict.dataset import default_profile_of
    from advisor.probe.record import ProbeRecord

    cal = tmp_path / "calibration" / "gpu_real" / "h200"
    cal.mkdir(parents=True)
    base = dict(campaign_id="c-test", model=LLAMA_8B, outcome="ok", gpu="H200", gpus=1, corpus="sharegpt",
                concurrency=8, vllm_version="0.26.0", host_fingerprint="f" * 64, started_at="2026-12-01T00:00:00+00:00")
    recs = [ProbeRecord(**base, config="vanilla", throughput_tok_s=1000.0),
            ProbeRecord(**base, config="suffix:32", throughput_tok_s=900.0, tokens_per_step=1.6),
            ProbeRecord(**base, config="ngram:4", throughput_tok_s=1100.0, tokens_per_step=1.4),
            ProbeRecord(**{**base, "campaign_id": "c-dummy"}, config="vanilla", throughput_tok_s=1.0, weights="dummy")]
    (cal / "records.jsonl").write_text("".join(r.model_dump_json() + "\n" for r in recs))
    out = real_probes.evaluate(calibration_records(tmp_path / "calibration"), tmp_path / "calibration", default_profile_of())
    assert out["available"] and out["campaigns"] == 1
    (row,) = out["rows"]
    assert row["options"]["vanilla"] == {"predicted": 1.0, "measured": 1.0, "passes": 1}
    assert row["options"]["ngram:4"]["measured"] == 1.1 and row["options"]["suffix:32"]["measured"] == 0.9
    best = max(o["measured"] for o in row["options"].values())
    assert row["chosen_frac"] == pytest.approx(row["options"][row["chosen"]]["measured"] / best, rel=1e-3)
    assert row["within_2pct"] == (row["chosen"] == "ngram:4")
    # a miss names its margin over the passes behind it; one setting measured once: no pass-to-pass noise to excuse it
    assert [(m["best"], m["passes"], m["within_noise"]) for m in out["misses"]] == ([] if row["within_2pct"] else [("ngram:4", 1, False)])
    assert not real_probes.evaluate(calibration_records(tmp_path / "nothing"), tmp_path / "nothing", default_profile_of())["available"]


def test_serving_profile_is_the_probe_path_fit_and_loses_to_the_offline_grid_held_out():
    """The serving-dummy reference row is what `calibrate`'s probe path (profile_from_probes) fits to
    the `vllm serve` campaign calibration/gpu_real/h200-vllm0.26.0 (Llama-3.1-8B shape, dummy weights,
    suffix:32 + ngram:4 + vanilla without async scheduling), not typed in. Held out on SmolLM2-135M's
    real-weight pairs it predicts R worse than the offline grid, which is why the product keeps the
    grid (docs/predictor.md); no host is ever matched to the reference row."""
    from advisor.calibrate.records import read_jsonl_records
    from advisor.paths import data_path
    from advisor.predict.dataset import default_profile_of
    from advisor.calibrate.host_infer import serving_fit

    res = serving_fit(data_path("calibration"), default_profile_of(), read_jsonl_records)
    assert res["available"] and not res["fit"]["at_grid_edge"]
    fit, shipped = res["fit"]["profile"], hp.get("serving-dummy")
    for f in ("suffix_step_s", "suffix_per_seq_s", "ngram_step_s", "ngram_per_seq_s", "async_off_step_s", "async_off_per_seq_s"):
        assert getattr(shipped, f) == fit[f], f
    # the fit reproduces the R it was fitted on within 6 %, and async-off is a share of each method's per-step cost
    assert all(abs(math.log(p["r_fitted"] / p["r_measured"])) < 0.11 for p in res["fit"]["pairs"])
    assert 0 < shipped.async_off_step_s < min(shipped.ngram_step_s, shipped.suffix_step_s)
    assert shipped.ngram_step_s < shipped.suffix_step_s / 3
    assert shipped.role == "reference" and shipped.id not in {p.id for p in hp.known()}
    assert shipped.id not in hp.match("H100").profiles and hp.match("H200").profiles == [hp.get("offline-grid").id]
    # held out: every SmolLM2 pair of both passes, each against its own pass's vanilla
    if not res["held_out"]["available"]:
        pytest.skip(f"held-out model not here: {res['held_out'].get('reason')} (scripts/build_smollm2.py)")
    held = res["held_out"]["serving_profile"]
    assert len(held["rows"]) == 24 and set(held["median_abs_log_r"]) == {"suffix", "ngram"}
    assert res["held_out"]["offline_grid_profile_as_shipped"]["median_abs_log_r"]["suffix"] < held["median_abs_log_r"]["suffix"]


def test_async_off_fit_reads_the_no_async_vanilla_runs():
    from advisor.calibrate.records import read_jsonl_records as read_records
    from advisor.paths import data_path
    from advisor.calibrate.host_infer import async_off_pairs, fit_async_off

    root = data_path("calibration") / "gpu_real" / "h200-vllm0.26.0"
    recs = read_records(root / "l8-dummy") + read_records(root / "l8-dummy-noasync")
    (pairs,) = async_off_pairs(recs).values()
    assert sorted(v.concurrency for v, _ in pairs) == [1, 8, 32]
    a, b = fit_async_off(pairs)
    assert 1.5e-3 < a < 2.2e-3 and 0 <= b < 3e-5  # +1.9 ms per step at c1 (README: 5.03 -> 6.91 ms)
