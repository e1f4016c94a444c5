"""The real leave-one-model-out evaluation, its baselines, and no leakage of the held-out model."""

from __future__ import annotations

import pytest

from advisor.predict import kbar_prior as kp
from advisor.predict.calibrated import fit
from advisor.predict.dataset import default_profile_of, seed_observations
from advisor.predict.kbar_prior import implied_kbar_rows
from advisor.calibrate.evaluate import evaluate

R1 = "deepseek-ai/DeepSeek-R1"


@pytest.fixture(scope="module")
def profile_of():
    return default_profile_of()


@pytest.fixture(scope="module")
def result(profile_of):
    return evaluate(profile_of)


def test_baselines_reproduce_the_reference_figures(result):
    b = result["baselines"]
    assert b["always_suffix"]["OFF"]["geo_frac"] == pytest.approx(0.923, abs=6e-4)
    assert b["always_suffix"]["ON"]["geo_frac"] == pytest.approx(0.898, abs=6e-4)
    assert b["writeup_tree"]["OFF"]["geo_frac"] == pytest.approx(0.998, abs=6e-4)
    assert b["writeup_tree"]["ON"]["geo_frac"] == pytest.approx(0.978, abs=6e-4)
    assert result["lomo"]["OFF"]["rows"] == 70 and result["lomo"]["ON"]["rows"] == 63  # 405B-FP8 has no ON suffix


def test_lomo_scores(result):
    # Measured 2026-11-29: OFF 0.9915, ON 0.9741 (docs/CHANGELOG.md); 0.9937 / 0.9784 at 8bf15f0. The OFF target (0.99) is met; ON
    # (0.985) and "no row below 0.90" are not (see the ceilings). One coin-flip row with frac 0.51
    # moves OFF by 1 % (exp(ln 0.51 / 70) = 0.990): the guard leaves that much room.
    lomo = result["lomo"]
    assert lomo["OFF"]["geo_frac"] >= 0.98
    assert lomo["ON"]["geo_frac"] >= 0.97
    assert lomo["OFF"]["geo_frac"] > result["baselines"]["always_suffix"]["OFF"]["geo_frac"]
    assert lomo["ON"]["geo_frac"] > result["baselines"]["writeup_tree"]["ON"]["geo_frac"] - 0.005
    for key in ("min_frac", "accuracy"):
        assert key in lomo["OFF"] and key in lomo["ON"]


def test_deepseek_r1_held_out_is_served_without_speculation_where_confident(result):
    rows = result["per_model"]["DeepSeek-R1 (671B MoE)"]["rows"]
    assert len(rows) == 14  # 7 corpora × OFF, ON
    unsure = [r for r in rows if 0.30 <= r["p_win"] <= 0.70]  # recommend's probe band
    assert len(unsure) <= 2 and all(r["corpus"] == "mix" for r in unsure)  # mix: the distills' K̄ prior
    for r in rows:
        if r not in unsure:
            assert not r["chose_suffix"] and r["predicted_gain"] < 1, r


def test_held_out_model_does_not_inform_its_own_prediction(profile_of):
    obs = seed_observations()
    held = fit(obs, profile_of, exclude_model=R1)
    assert R1 not in held.model_effects
    assert held.n_obs == sum(1 for o in obs if o.model != R1)
    # its rows changed → the held-out prediction must not move
    doctored = [o.model_copy(update={"suffix_tps": o.suffix_tps * 3}) if o.model == R1 else o for o in obs]
    again = fit(doctored, profile_of, exclude_model=R1)
    assert again.coef == held.coef and again.priors == held.priors


def test_shipped_kbar_priors_match_the_seed(profile_of):
    derived = {(p.corpus, p.family_group): p.k_bar for p in kp.derive(implied_kbar_rows(seed_observations(), profile_of), "x")}
    shipped = {(p.corpus, p.family_group): p.k_bar for p in kp.shipped_priors()}
    assert shipped.keys() == derived.keys()
    for key, value in derived.items():
        assert shipped[key] == pytest.approx(value, rel=1e-3), key


def test_calibrate_cli_evaluate_json(calibrate_evaluate_json):
    out = calibrate_evaluate_json
    for state in ("OFF", "ON"):
        for key in ("geo_frac", "min_frac", "accuracy"):
            assert key in out["lomo"][state]
    assert {"always_suffix", "always_vanilla", "writeup_tree"} <= set(out["baselines"])
    assert "Llama-3.1-8B-Instruct" in out["per_model"]
    ceil = out["ceilings"]["additive_in_sample"]
    for state in ("OFF", "ON"):  # hindsight with every model's own effect bounds what LOMO reaches
        assert ceil[state]["geo_frac"] >= out["lomo"][state]["geo_frac"]


def test_calibrate_cli_without_probes(tmp_path, capsys, monkeypatch):
    from advisor.cli.app import main

    monkeypatch.setenv("ADVISOR_DATA_DIR", str(tmp_path))
    assert main(["calibrate"]) == 0
    assert "seed rows" in capsys.readouterr().out
