"""A method whose vLLM line turns async scheduling off pays the host profile's async-off cost per step (campaigns 15-17:
vLLM 0.26 logs "Async scheduling not supported with draft_model-based speculative decoding" in every draft-model
boot); where the line keeps it on (EAGLE heads; the draft model from 0.32) nothing is added."""

from __future__ import annotations

import json

import pytest

L70 = "meta-llama/Llama-3.3-70B-Instruct"
L8 = "meta-llama/Llama-3.1-8B-Instruct"


def _notes(run_cli, model: str, spec: str, version: str) -> list[str]:
    code, out, err = run_cli("recommend", model, "--gpu", "H100", "--gpus", "4", "--spec", spec, "--vllm-version", version,
                             "--json")  # fmt: skip
    assert code == 0, err
    return json.loads(out)["prediction"]["figure_notes"]


@pytest.mark.parametrize("spec,version,off", [("draft_model", "0.26", True), ("draft_model", "0.32", False),
                                              ("eagle3", "0.32", False)])
def test_async_off_is_priced_where_the_line_turns_it_off(run_cli, spec, version, off):
    from advisor.vllm_facts import facts

    assert (spec not in facts(version).async_spec_methods) is off
    model = L70 if spec == "draft_model" else L8
    notes = _notes(run_cli, model, spec, version)
    priced = [n for n in notes if n.startswith("async scheduling off")]
    assert bool(priced) is off, notes
    if off:
        assert "MEASURED on h200-vllm0.26.0-serving" in priced[0] and "carried" in priced[0]
