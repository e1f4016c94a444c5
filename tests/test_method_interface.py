"""A speculative method is one module under advisor/methods/ plus its name in each vLLM line's facts
(VllmFacts.spec_methods): a dummy method added that way is searched, priced, ranked, launched and rendered with no
other file touched."""

from __future__ import annotations

import json
import textwrap

import pytest

import advisor.methods as methods
from advisor import vllm_facts
from advisor.domain.decision import Decision
from advisor.hardware.gpus import get_gpu
from advisor.model.load import load_profile
from advisor.plan.choose import choose
from advisor.plan.layout import LayoutQuery, score
from advisor.render.flags import serve_flags

TOY = textwrap.dedent('''
    """A toy method for the interface test: 1.6 tokens per step at a step 1.1x plain."""
    from advisor.domain.prediction import Band
    from advisor.methods.base import GainEstimate, common_config


    class Toy:
        id = "toy"
        title = "toy drafting"
        order = 9
        uses_drafter = False

        def vllm_name(self, vf):
            return "toy_spec"

        def needs(self, profile, drafter, vf):
            return None

        def ks(self, profile, drafter, *, k_fixed, k_rules, policy, query, vf=None):
            return [2]

        def estimate(self, ctx, k, n, context):
            return GainEstimate(gain=Band(value=1.6 / 1.1, low=1.3, high=1.6), k_bar=1.6, r=1.1, notes=["toy: ASSUMED"])

        def tokens_per_seq(self, k, vf):
            return 1.0 + k

        def speculative_config(self, decision, vf):
            return common_config(decision, self.vllm_name(vf))

        def extra_memory(self, profile, drafter):
            return 0, 0


    METHOD = Toy()
''')


@pytest.fixture
def toy_method(tmp_path, monkeypatch):
    (tmp_path / "toy.py").write_text(TOY)  # the one module
    monkeypatch.setattr(methods, "__path__", [*methods.__path__, str(tmp_path)])
    monkeypatch.setattr(methods, "_LOADED", {})
    real = vllm_facts.facts

    def with_toy(version=vllm_facts.DEFAULT_VERSION):  # the one facts entry: the line's SpeculativeConfig takes "toy_spec"
        f = real(version)
        return f.model_copy(update={"spec_methods": (*f.spec_methods, "toy_spec")})

    for mod in ("advisor.vllm_facts", "advisor.render.flags"):
        monkeypatch.setattr(f"{mod}.facts", with_toy)
    yield
    methods._LOADED.clear()


def _planner(profile, decision):
    return True, 200_000, "fits"


def test_a_new_method_is_one_module_and_one_facts_entry(toy_method):
    assert "toy" in methods.ids()
    p, gpu = load_profile("meta-llama/Llama-3.1-8B-Instruct"), get_gpu("H100")
    cands = score(p, gpu, 1, Decision(max_model_len=4096), concurrency=1, query=LayoutQuery(), suffix_gain=lambda *a: None,
                  planner=_planner, k_rules=32)  # fmt: skip
    toy = [c for c in cands if c.method == "toy"]
    assert toy and toy[0].figures is not None and toy[0].k_bar == 1.6 and toy[0].r == 1.1
    choice = choose(cands, policy="open", rule=None, query=LayoutQuery())
    assert choice.chosen.method == "toy"  # suffix and n-gram decline without a predictor; toy gains x1.45
    d = Decision(speculative_method="toy", num_speculative_tokens=2)
    flags = serve_flags(d, "0.34")
    assert json.loads(flags[flags.index("--speculative-config") + 1]) == {"method": "toy_spec", "num_speculative_tokens": 2}


def test_a_method_the_line_lacks_is_not_searched_nor_rendered(tmp_path, monkeypatch):
    (tmp_path / "toy.py").write_text(TOY)
    monkeypatch.setattr(methods, "__path__", [*methods.__path__, str(tmp_path)])
    monkeypatch.setattr(methods, "_LOADED", {})
    try:
        p, gpu = load_profile("meta-llama/Llama-3.1-8B-Instruct"), get_gpu("H100")
        cands = score(p, gpu, 1, Decision(max_model_len=4096), concurrency=1, query=LayoutQuery(),
                      suffix_gain=lambda *a: None, planner=_planner, k_rules=32)  # fmt: skip
        assert not [c for c in cands if c.method == "toy"]  # no facts entry: no vLLM line has it
        from advisor.errors import UsageError

        with pytest.raises(UsageError, match="not one vLLM 0.34 has"):
            serve_flags(Decision(speculative_method="toy", num_speculative_tokens=2), "0.34")
    finally:
        methods._LOADED.clear()
