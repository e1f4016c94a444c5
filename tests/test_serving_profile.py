"""The H200 serving profile of real-weight traffic (issue #22 item 4 on real outputs): the plain-step host
floor, the exact-only match, and that the shipped row is what the probe path fits to the committed runs."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from advisor.hardware.gpus import get_gpu
from advisor.predict import host_profile as hp
from advisor.predict.stepcost import StepShape, r_ratio, step_cost

ROOT = Path(__file__).resolve().parents[1]
SMOL = ROOT / ".cache" / "models" / "SmolLM2-135M-Instruct"
CPU = "Intel(R) Xeon(R) Processor"
FIELDS = ("suffix_step_s", "suffix_per_seq_s", "ngram_step_s", "ngram_per_seq_s", "async_off_step_s",
          "async_off_per_seq_s", "plain_floor_step_s", "plain_floor_per_seq_s")  # fmt: skip


def _profile_of():
    from advisor.predict.dataset import default_profile_of

    return default_profile_of()


def test_plain_step_is_the_larger_of_gpu_and_host_floor():
    serving = hp.get("serving")
    assert serving.plain_floor_step_s > 0 and serving.plain_floor_per_seq_s > 0
    p, gpu = _profile_of()("meta-llama/Llama-3.1-8B-Instruct"), get_gpu("H200")
    for seqs in (1, 8, 32, 256):
        gpu_only = step_cost(p, gpu, 1, StepShape(seqs=seqs, tokens_per_seq=1, context=2000))
        floored = step_cost(p, gpu, 1, StepShape(seqs=seqs, tokens_per_seq=1, context=2000, build="serving"))
        assert gpu_only.t_host_floor == 0.0
        assert floored.t_host_floor == pytest.approx(serving.plain_floor(seqs))
        assert floored.total == pytest.approx(max(gpu_only.total, serving.plain_floor(seqs)))
        # a verification step's host work is serialised (its per-step / per-sequence costs), never floored
        spec = step_cost(p, gpu, 1, StepShape(seqs=seqs, tokens_per_seq=3, context=2000, k=32, spec=True, build="serving"))
        assert spec.t_host_floor == 0.0 and spec.t_spec_fixed == serving.suffix_step_s
    # R divides by the floored plain step of the same profile
    rb = r_ratio(p, gpu, 1, concurrency=32, draft_tokens=2.0, context=2000, k=32, build="serving")
    assert rb.plain.t_host_floor == pytest.approx(serving.plain_floor(32))
    assert rb.r == pytest.approx(rb.spec.total / rb.plain.total)


def test_serving_profile_matches_only_its_own_host_class():
    serving, grid = hp.get("serving"), hp.get("offline-grid")
    assert serving.role == "exact" and serving.cpu_model == CPU and serving.gpu == "H200"
    assert hp.match("H200", CPU, "0.26.0").profiles == [serving.id]
    assert hp.match("H200", CPU, "0.26").kind == "exact"
    # another CPU, another vLLM line, or an unverified host: never this VM's serving measurement
    assert hp.match("H200", "AMD EPYC 9654 96-Core Processor", "0.26.0").profiles == [grid.id]
    assert hp.match("H200", CPU, "0.32.0").profiles == [grid.id]
    assert hp.match("H200").profiles == [grid.id]
    assert serving.id not in {p.id for p in hp.known()} and serving.id in {p.id for p in hp.listed()}
    assert serving.id not in hp.match("B200").profiles


def test_fit_plain_floor_reads_only_host_bound_vanilla_runs():
    from advisor.calibrate.records import read_jsonl_records
    from advisor.calibrate.host_infer import fit_plain_floor

    root = ROOT / "calibration" / "gpu_real" / "h200-vllm0.26.0"
    eight = [r for r in read_jsonl_records(root / "l8-dummy-k") if r.config == "vanilla"]
    assert fit_plain_floor(eight, _profile_of()) == {"step_s": 0.0, "per_seq_s": 0.0, "runs": 0, "gpu_bound_runs": 3}
    if not SMOL.is_dir():
        pytest.skip("SmolLM2-135M-Instruct not built (scripts/build_smollm2.py): its profile is read from it")
    of = _profile_of()

    def local(m):
        return of(str(SMOL)) if m.endswith("SmolLM2-135M-Instruct") else of(m)

    smol = [r for r in read_jsonl_records(root / "smol-k") if r.config == "vanilla"]
    fit = fit_plain_floor(smol + eight, local)
    assert fit["runs"] == 6 and fit["gpu_bound_runs"] == 3
    # the floor reproduces the host-bound runs' measured step (concurrency / throughput) within 30 %
    for r in smol:
        meas = r.concurrency / r.throughput_tok_s
        assert abs(math.log((fit["step_s"] + fit["per_seq_s"] * r.concurrency) / meas)) < 0.3


def test_shipped_serving_row_is_the_probe_path_fit_and_holds_out_by_corpus():
    """calibration/host_profiles.csv's h200-vllm0.26.0-serving is host_infer.serving_real_fit's fit of the committed
    real-weight runs, not typed in; fitted without one corpus it predicts the other's R (measured K̄, concurrency 1
    to 128) within the run-to-run noise the repeated boots measure (the row's suffix_run_sigma / ngram_run_sigma:
    one pass lands that far from another at the same setting), and the warmed 8B dummy-weight probe on the same host
    lands farther from real traffic's R than either held-out fit (the reason the row is fitted on real weights)."""
    if not SMOL.is_dir():
        pytest.skip("SmolLM2-135M-Instruct not built (scripts/build_smollm2.py): its profile is read from it")
    from advisor.calibrate.records import calibration_records, reader_with_hosts
    from advisor.paths import data_path
    from advisor.calibrate.host_infer import serving_real_fit

    cal = data_path("calibration")
    res = serving_real_fit(cal, _profile_of(), reader_with_hosts(calibration_records(cal)))
    assert res["available"] and not res["fit"]["at_grid_edge"]
    fit, shipped = res["fit"]["profile"], hp.get("serving")
    for f in FIELDS:
        assert getattr(shipped, f) == fit[f], f
    assert fit["cpu_model"] == shipped.cpu_model == CPU
    loco = res["leave_one_corpus_out"]
    assert sorted(loco) == ["humaneval", "sharegpt"]
    for held in loco.values():
        med = held["held_out"]["median_abs_log_r"]
        assert med["suffix"] < shipped.suffix_run_sigma and med["ngram"] < shipped.ngram_run_sigma
        assert held["profile"]["role"] == "exact" and held["profile"]["cpu_model"] == CPU
    # the noise itself: 18 (suffix) and 15 (n-gram) settings measured in 2 to 15 fresh boots (smol-r1/r2, smol-k/g,
    # smol-h..h7, smol-i1, smol-j1..j8)
    assert 0.15 < shipped.suffix_run_sigma < 0.4 and 0.15 < shipped.ngram_run_sigma < 0.4
    dummy = res["dummy_transfer"]["on_real_pairs"]["median_abs_log_r"]
    for m in ("suffix", "ngram"):
        assert dummy[m] > max(h["held_out"]["median_abs_log_r"][m] for h in loco.values()), m
    assert res["dummy_transfer"]["profile"]["suffix_step_s"] < shipped.suffix_step_s * 0.8  # 6.0 against 8.0 ms (9.0 before campaign 8)


def test_a_host_no_profile_matches_gets_no_host_classs_fitted_terms():
    """An A100 (no profile) is priced with every known profile's R, but the seed host's fitted terms and
    seed-implied K̄ priors are the seed host's: they do not apply to it (issue #22 item 5)."""
    from advisor.domain.workload import Workload
    from advisor.predict.api import predict

    p = _profile_of()("meta-llama/Llama-3.1-8B-Instruct")
    work = Workload(corpus="humaneval", concurrency=32)
    h100 = predict(p, get_gpu("A100"), 8, work, host_state="OFF")
    b200 = predict(p, get_gpu("B200"), 8, work, host_state="OFF")
    assert h100.host_match == "none" and len(h100.host_profile.split(",")) >= 2
    assert h100.decomposition.fitted_factor == pytest.approx(1.0, abs=0.01)
    assert "none: the fitted terms apply only" in h100.decomposition.sources["fitted_factor"]
    assert not h100.k_bar_source.startswith("prior humaneval/instruct (seed")
    # the seed host's own terms apply there: the gain-implied K̄ over the traffic's (same K̄ on both hosts: issue 42)
    assert b200.host_match == "gpu" and b200.k_bar == h100.k_bar and b200.k_bar_host is not None and h100.k_bar_host is None


def test_default_on_never_keeps_plain_decoding_off_and_no_predicted_loss_is_launched(run_cli):
    """A rule's default_on is advice (issue 39): no plain candidate is ruled out for a suffix candidate's sake, and
    every speculative candidate predicted to lose to plain decoding at its layout is ruled out with that reason
    (DeepSeek-R1-Distill-Qwen-7B, 8 x A100, swebench)."""
    import json

    code, out, err = run_cli("recommend", "deepseek-ai/DeepSeek-R1-Distill-Qwen-7B", "--gpu", "A100", "--gpus", "8",
                             "--corpus", "swebench", "--json")  # fmt: skip
    assert code == 0, err
    rec = json.loads(out)
    cands = [c for c in rec["candidates"] if c.get("prediction")]
    assert not [c for c in cands if c["speculative_method"] is None and not c["eligible"]
                and c["why_kind"] not in ("sla",)]  # fmt: skip
    for c in cands:
        g = (c["prediction"].get("speculative_gain") or {}).get("value")
        if c["speculative_method"] and g is not None and g < 1.0:
            assert not c["eligible"] and c["why_kind"] == "loses" and "predicted to lose" in c["why_not"]
    g = (rec["prediction"].get("speculative_gain") or {}).get("value")
    assert rec["decision"]["speculative_method"] is None or g >= 1.0


def test_ngram_is_priced_on_the_host_suffix_matched():
    """On the serving profile's own host class both CPU proposers are priced with its costs: the n-gram candidate's
    notes name the profile suffix's prediction matched, not the GPU-only match."""
    from advisor.domain.workload import Workload
    from advisor.methods.ngram import same_host as _same_host
    from advisor.predict.api import predict

    p = _profile_of()("meta-llama/Llama-3.1-8B-Instruct")
    sp = predict(p, get_gpu("H200"), 1, Workload(corpus="sharegpt", concurrency=8), host_state="OFF", cpu_model=CPU,
                 vllm_version="0.26.0")  # fmt: skip
    assert sp.host_profile == hp.get("serving").id and _same_host(sp) == sp.host_profile
    unmatched = predict(p, get_gpu("A100"), 1, Workload(corpus="sharegpt", concurrency=8), host_state="OFF")
    assert "," in unmatched.host_profile and _same_host(unmatched) is None


def test_run_to_run_sigma_pools_the_settings_measured_in_several_boots():
    """host_infer.run_to_run_sigma: the pooled standard deviation of ln R over settings (campaign and
    configuration) with two or more passes; a setting measured once says nothing about the spread."""
    from types import SimpleNamespace as NS

    from advisor.calibrate.host_infer import run_to_run_sigma

    def pair(cid, config, ln_r):
        return NS(suf=NS(campaign_id=cid, config=config), r_meas=math.exp(ln_r))

    pairs = [pair("a", "suffix:32", 0.0), pair("a", "suffix:32", 0.2),                                 # ss 0.02, 1 dof
             pair("b", "suffix:32", 0.1), pair("b", "suffix:32", 0.1), pair("b", "suffix:32", 0.4),    # ss 0.06, 2 dof
             pair("c", "suffix:32", 3.0),                                                              # once: left out
             pair("a", "ngram:4", 0.5)]  # fmt: skip
    got = run_to_run_sigma(pairs)
    assert set(got) == {"suffix"}
    assert got["suffix"] == {"sigma": round(math.sqrt(0.08 / 3), 3), "dof": 3, "settings": 2}


def test_predictions_on_the_serving_host_carry_its_run_to_run_spread():
    """The serving row's measured run-to-run spread widens the interval of suffix (predict's sigma, in quadrature)
    and n-gram (ngram_gain's band) on that host class, and moves neither central value; the R source says so."""
    from advisor.domain.prediction import INTERVAL_Z
    from advisor.domain.workload import Workload
    from advisor.predict import kbar_prior as kp
    from advisor.predict.absolute import ReplicaLayout, ngram_gain
    from advisor.predict.api import predict

    serving = hp.get("serving")
    assert serving.suffix_run_sigma > 0.1 and serving.ngram_run_sigma > 0.1
    quiet = serving.model_copy(update={"id": "serving-without-run-sigma-test", "aliases": "", "suffix_run_sigma": 0.0,
                                       "ngram_run_sigma": 0.0})  # fmt: skip
    hp.register(quiet)
    p, gpu = _profile_of()("meta-llama/Llama-3.1-8B-Instruct"), get_gpu("H200")
    work = Workload(corpus="sharegpt", concurrency=32)
    noisy = predict(p, gpu, 1, work, host_state="OFF", build=serving.id)
    calm = predict(p, gpu, 1, work, host_state="OFF", build=quiet.id)
    assert noisy.gain == calm.gain
    s_noisy, s_calm = (math.log(x.gain_high / x.gain) / INTERVAL_Z for x in (noisy, calm))
    assert s_noisy == pytest.approx(math.hypot(s_calm, serving.suffix_run_sigma), abs=2e-3)
    assert f"run to run sigma(ln R) {serving.suffix_run_sigma:.2f}" in noisy.decomposition.sources["r"]
    assert "run to run" not in calm.decomposition.sources["r"]
    own = kp.KbarChoice(k_bar=1.6, low=1.5, high=1.7, k=4, source="measured (test)", kind="measured")
    (bn, _, notes), (bc, _, _) = (ngram_gain(p, gpu, ReplicaLayout(tp=1), 32, 2000.0, 4, 2.5, build=b, ngram=own)
                                  for b in (serving.id, quiet.id))  # fmt: skip
    assert bn.value == bc.value and bn.low < bc.low and bn.high > bc.high
    assert math.log(bn.high / bn.value) == pytest.approx(math.hypot(math.log(bc.high / bc.value), INTERVAL_Z * serving.ngram_run_sigma))
    assert any("run to run" in n for n in notes)
