"""`calibrate --evaluate` scores the decision `recommend` makes (rules, probe band, planner), LOMO."""

from __future__ import annotations

import json

import pytest

from advisor.plan.evaluate_product import evaluate_product, product_decision
from advisor.predict.dataset import default_profile_of, seed_observations
from advisor.predict.evaluate import evaluate, lomo_fits
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


def test_probe_band_keeps_the_rule_default(setup, tmp_path):
    """default_on + a held-out P(win) in [0.30, 0.5): P(win) > 0.5 alone would say vanilla, recommend keeps suffix
    (and says it is unsure); below 0.30 the prediction turns it off."""
    pf, obs, fits = setup
    rules = _rules(tmp_path, "default_on")
    band = below = 0
    for o in (o for o in obs if o.source == "seed"):
        chose, unsure, p_win = product_decision(o, pf(o.model), fits[o.model], rules)
        if 0.30 <= p_win < 0.5:
            band += 1
            assert chose and unsure, (o.model, o.corpus, p_win)
        elif p_win < 0.30:
            below += 1
            assert not chose and not unsure
    assert band and below, "the seed sweep has held-out rows in the lower probe band and below it"


def test_calibrate_evaluate_json_has_the_product_score(capsys):
    from advisor.cli.app import main

    assert main(["calibrate", "--evaluate", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    product = out["lomo"]["product"]
    for state in ("OFF", "ON"):
        assert {"geo_frac", "min_frac", "accuracy", "rows", "unsure_rows"} <= product[state].keys()
        assert product[state]["rows"] == out["lomo"][state]["rows"]
        assert 0 < product[state]["min_frac"] <= product[state]["geo_frac"] <= 1
    assert "recommend" in product["method"] and "as shipped" in product["method"]
    own = out["lomo"]["product_own_build"]
    assert "measured on" in own["method"] and own["OFF"]["rows"] == product["OFF"]["rows"]
