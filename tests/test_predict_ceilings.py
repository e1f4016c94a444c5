"""Hindsight ceilings of the evaluation: exact on hand-made rows, and bounding LOMO on the seed."""

from __future__ import annotations

import math

import pytest

from advisor.calibrate.ceilings import additive_in_sample, ceilings, per_model_constant, state_flips
from advisor.predict.dataset import Observation, seed_observations


def obs(model: str, corpus: str, state: str, van: float, suf: float) -> Observation:
    return Observation(model=model, label=model, corpus=corpus, family="instruct", host_state=state,
                       vanilla_tps=van, suffix_tps=suf, source="seed")  # fmt: skip


def test_per_model_constant_picks_the_better_constant():
    rows = [obs("a", "x", "OFF", 100, 200), obs("a", "y", "OFF", 100, 90), obs("b", "x", "OFF", 100, 50)]
    res = per_model_constant(rows)["OFF"]
    # a: suffix (fracs 1, 0.9) beats vanilla (0.5, 1); b: vanilla
    assert res["geo_frac"] == pytest.approx(round(0.9 ** (1 / 3), 4))
    assert res["min_frac"] == pytest.approx(0.9)
    assert res["accuracy"] == pytest.approx(round(2 / 3, 4))


def test_additive_fit_is_exact_when_the_data_are_additive():
    rows = []
    for m, a in (("a", 0.3), ("b", -0.2), ("c", 0.05)):
        for c, b in (("x", 0.0), ("y", -0.2), ("z", 0.25)):
            rows.append(obs(m, c, "OFF", 100, 100 * math.exp(a + b)))
    res = additive_in_sample(rows)["OFF"]
    assert res["geo_frac"] == 1.0 and res["accuracy"] == 1.0


def test_state_flips_flags_only_clear_opposite_winners():
    rows = [obs("a", "x", "OFF", 100, 150), obs("a", "x", "ON", 140, 120),  # host term can explain
            obs("b", "x", "OFF", 100, 60), obs("b", "x", "ON", 100, 127),  # against it
            obs("c", "x", "OFF", 100, 105), obs("c", "x", "ON", 100, 80)]  # OFF within the margin  # fmt: skip
    flips = {f["model"]: f for f in state_flips(rows)}
    assert set(flips) == {"a", "b"}
    assert flips["b"]["against_host_term"] and not flips["a"]["against_host_term"]


def test_seed_ceilings_bound_the_issue_targets():
    rows = [o for o in seed_observations(replicates=False)]
    res = ceilings(rows)
    # Knowing every model's own effect, a model+corpus shape reaches 0.998 OFF but only ~0.985 ON,
    # and R1 humaneval ON (suffix 1.27x where OFF lost 0.60x) holds every such policy's ON minimum at 0.788.
    assert res["additive_in_sample"]["OFF"]["geo_frac"] == pytest.approx(0.998, abs=1e-3)
    assert res["additive_in_sample"]["ON"]["geo_frac"] == pytest.approx(0.9853, abs=1e-3)
    assert res["additive_in_sample"]["ON"]["min_frac"] == pytest.approx(0.7884, abs=1e-4)
    assert res["per_model_constant"]["OFF"]["geo_frac"] < 0.99
    against = [f for f in res["state_flips"] if f["against_host_term"]]
    assert [(f["model"], f["corpus"]) for f in against] == [("DeepSeek-R1 (671B MoE)", "humaneval")]
