"""Rules are checked against the facts the engine builds, and a condition has exactly one operator (or a range)."""

from __future__ import annotations

import pytest

from advisor.errors import DataError
from advisor.plan.recommend import build_facts, fact_names
from advisor.rules.loader import load_rules

RULE = "rules:\n  - id: r1\n    when: WHEN\n    then: {warning: fired}\n    rationale: r\n    source: s\n"


def _write(tmp_path, when):
    (tmp_path / "mine.yaml").write_text(RULE.replace("WHEN", when))
    return tmp_path


def test_misspelt_fact_fails_at_load_with_the_closest_name(run_cli, tmp_path):
    d = _write(tmp_path, "{model.param_total_b: {gte: 7}}")
    code, _, err = run_cli("--rules-dir", str(d), "recommend", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100", "--gpus", "1")
    assert code == 5 and "mine.yaml" in err and "rule r1" in err and "'model.param_total_b'" in err
    assert "did you mean 'model.params_total_b'" in err


@pytest.mark.parametrize("when, needle", [("{model.arch: {}}", "needs an operator"),
                                          ("{model.arch: {eq: dense, ne: moe}}", "exactly one operator"),
                                          ("{model.params_total_b: {gt: 1, gte: 2}}", "exactly one operator")])
def test_condition_operators(tmp_path, when, needle):
    with pytest.raises(DataError, match=needle):
        load_rules([_write(tmp_path, when)])


def test_a_range_is_one_condition(tmp_path):
    rules = load_rules([_write(tmp_path, "{model.params_total_b: {gte: 6.5, lte: 420}}")], facts=fact_names())
    assert any(r.id == "r1" for r in rules)


def test_bundled_rules_only_test_facts_the_engine_builds():
    load_rules(facts=fact_names())  # raises on an unknown fact


def test_fact_names_are_what_build_facts_builds():
    from advisor.model.load import load_profile
    from advisor.domain.host import HostContext
    from advisor.domain.workload import Workload

    for model in ("deepseek-ai/DeepSeek-R1", "meta-llama/Llama-3.1-8B-Instruct"):
        facts = build_facts(load_profile(model), HostContext(gpu="B200", gpus=8, origin="test"), Workload(corpus="mix"))
        assert set(facts) == fact_names()
