"""`calibrate --evaluate` scores the decision `recommend` makes (rules, probe band, planner), LOMO."""

from __future__ import annotations

import json

import pytest

from advisor.calibrate.evaluate_product import evaluate_product
from advisor.predict.dataset import default_profile_of, seed_observations
from advisor.calibrate.evaluate import evaluate, lomo_fits
from advisor.rules.loader import load_rules


@pytest.fixture(scope="module")
def setup():
    pf = default_profile_of()
    obs = seed_observations(replicates=True)
    return pf, obs, lomo_fits(pf, obs)


def _rules(tmp_path, policy):
    (tmp_path / "all.yaml").write_text(
        f"rules:\n  - id: everything\n    priority: 99\n    then: {{speculation: {policy}}}\n    rationale: r\n    source: s\n")
    return load_rules([tmp_path])


@pytest.mark.parametrize("policy, baseline", [("forbidden", "always_vanilla"), ("required", "always_suffix")])
def test_the_rules_are_in_the_scored_path(setup, tmp_path, policy, baseline):
    pf, obs, fits = setup
    product = evaluate_product(pf, observations=obs, fits=fits, rules=_rules(tmp_path, policy))
    base = evaluate(pf, observations=obs, fits=fits)["baselines"][baseline]
    for state in ("OFF", "ON"):
        assert product[state]["geo_frac"] == base[state]["geo_frac"]
        assert product[state]["min_frac"] == base[state]["min_frac"]


def test_probe_band_launches_the_predicted_better_and_says_it_is_unsure(setup, tmp_path):
    """default_on + a held-out P(win) in the probe band [0.30, 0.70]: the rules' default no longer keeps suffix on
    (issue 39: rules constrain only with required / forbidden); what is launched is the candidate predicted faster,
    a suffix candidate predicted to lose is never launched, and the output names the probe that settles it."""
    from advisor.calibrate.evaluate_product import product_recommendation, suffix_p_win

    pf, obs, fits = setup
    rules = _rules(tmp_path, "default_on")
    band = below = 0
    for o in (o for o in obs if o.source == "seed"):
        rec = product_recommendation(o, pf(o.model), fits[o.model], rules)
        p_win, unsure = suffix_p_win(rec), rec.probe_plan is not None
        if p_win is None:
            continue
        launched = rec.decision.speculative_method
        gain = rec.prediction.speculative_gain.value if rec.prediction and rec.prediction.speculative_gain else None
        assert launched is None or gain is None or gain >= 1.0, (o.model, o.corpus, launched, gain)
        hard = any(f["set"].get("speculation") in ("forbidden", "required") for f in rec.rules_fired)
        if 0.30 <= p_win <= 0.70 and not hard:  # a rule that forbids or requires (a measurement) leaves nothing to probe
            band += 1
            assert unsure, (o.model, o.corpus, p_win)
        elif p_win < 0.30:
            below += 1
            assert launched != "suffix"
            assert not unsure or "fitted terms multiply" in rec.probe_plan.reason, rec.probe_plan.reason
    assert band and below, "the seed sweep has held-out rows in the probe band and below it"


def test_calibrate_evaluate_json_has_the_product_score(calibrate_evaluate_json):
    out = calibrate_evaluate_json
    product = out["lomo"]["product"]
    for state in ("OFF", "ON"):
        assert {"geo_frac", "min_frac", "accuracy", "rows", "unsure_rows"} <= product[state].keys()
        assert product[state]["rows"] == out["lomo"][state]["rows"]
        assert 0 < product[state]["min_frac"] <= product[state]["geo_frac"] <= 1
    assert "recommend" in product["method"] and "as shipped" in product["method"]
    own = out["lomo"]["product_own_build"]
    assert "measured on" in own["method"] and own["OFF"]["rows"] == product["OFF"]["rows"]


@pytest.mark.parametrize("model, corpus, state", [
    ("meta-llama/Llama-3.1-8B-Instruct", "mix", "OFF"),
    ("Qwen/Qwen2.5-72B-Instruct", "humaneval", "OFF"),
    ("deepseek-ai/DeepSeek-R1", "mix", "ON"),
    ("deepseek-ai/DeepSeek-R1-Distill-Qwen-32B", "humaneval", "ON"),
])  # fmt: skip
def test_the_scored_decision_is_what_the_cli_prints(setup, run_cli, monkeypatch, model, corpus, state):
    """lomo.product scores the decision `advisor recommend` prints for the row: the same host, state,
    traffic and (here) the shipped fit give the same method, K and layout through both."""
    from advisor.domain.host import HostContext
    from advisor.hardware import resolve
    from advisor.calibrate.evaluate_product import product_recommendation

    pf, obs, _ = setup
    o = next(o for o in obs if o.source == "seed" and o.model == model and o.corpus == corpus and o.host_state == state)
    scored = product_recommendation(o, pf(model), None, load_rules()).decision
    host = HostContext(gpu=o.gpu or "B200", gpus=o.tp, origin="command line", dsa_enabled=state == "ON")
    monkeypatch.setattr(resolve, "resolve_host", lambda *_a, **_k: host)
    code, out, err = run_cli("recommend", model, "--gpu", host.gpu, "--gpus", str(o.tp), "--corpus", corpus,
                             "--concurrency", str(o.concurrency), "--json")  # fmt: skip
    assert code == 0, err
    printed = json.loads(out)["decision"]
    keys = ("speculative_method", "num_speculative_tokens", "tensor_parallel_size", "data_parallel_size",
            "enable_expert_parallel", "max_num_seqs", "gpu_memory_utilization", "max_model_len")  # fmt: skip
    assert {k: printed[k] for k in keys} == {k: getattr(scored, k) for k in keys}
