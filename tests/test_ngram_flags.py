"""`recommend --ngram-k / --ngram-lookup` (issue #22 item 4): the n-gram candidates use the user's K
and window, the window reaches the launch only through vLLM's own speculative-config keys, and what
is not priced says so."""

from __future__ import annotations

import json

import pytest

from advisor.domain.decision import Decision, NgramParams
from advisor.vllm_facts import facts


def _spec_cfg(d, version=None):
    """The --speculative-config advisor.methods renders for ``d`` on ``version`` (None: the default line)."""
    from advisor.methods import speculative_config
    from advisor.vllm_facts import DEFAULT_VERSION, facts

    return speculative_config(d, facts(version or DEFAULT_VERSION))


LLAMA_8B = "meta-llama/Llama-3.1-8B-Instruct"


def test_ngram_window_renders_only_where_it_differs_from_vllms_default():
    assert NgramParams() == NgramParams(prompt_lookup_min=facts().ngram_prompt_lookup,
                                        prompt_lookup_max=facts().ngram_prompt_lookup)  # fmt: skip
    plain = Decision(speculative_method="ngram", num_speculative_tokens=4)
    assert _spec_cfg(plain) == {"method": "ngram", "num_speculative_tokens": 4}
    window = NgramParams(prompt_lookup_min=2, prompt_lookup_max=4)
    d = Decision(speculative_method="ngram", num_speculative_tokens=8, ngram=window)
    assert _spec_cfg(d) == {"method": "ngram", "num_speculative_tokens": 8, "prompt_lookup_min": 2,
                                      "prompt_lookup_max": 4}  # fmt: skip
    # a window on a suffix decision is not rendered (it is n-gram's)
    assert "prompt_lookup_min" not in _spec_cfg(Decision(speculative_method="suffix", num_speculative_tokens=32, ngram=window))
    with pytest.raises(ValueError, match="prompt_lookup_min=5 must be <= prompt_lookup_max=2"):
        NgramParams(prompt_lookup_min=5, prompt_lookup_max=2)


def test_recommend_searches_the_users_ngram_k_and_carries_the_window(run_cli):
    code, out, err = run_cli("recommend", LLAMA_8B, "--gpu", "H200", "--gpus", "1", "--concurrency", "1", "--corpus",
                             "sharegpt", "--ngram-k", "8", "--ngram-lookup", "2:4", "--json")  # fmt: skip
    assert code == 0, err
    rec = json.loads(out)
    ngram = [c for c in rec["candidates"] if c["speculative_method"] == "ngram"]
    assert ngram and {c["num_speculative_tokens"] for c in ngram} == {8}
    assert rec["decision"]["ngram"] == {"prompt_lookup_min": 2, "prompt_lookup_max": 4}
    line = next(t for t in rec["trace"] if t.startswith("n-gram as asked"))
    assert "K=8 (--ngram-k)" in line and "2..4 (--ngram-lookup)" in line and "NOT priced" in line
    # without the flags the search keeps the advisor's K and vLLM's window
    code, out, _ = run_cli("recommend", LLAMA_8B, "--gpu", "H200", "--gpus", "1", "--concurrency", "1", "--json")
    rec = json.loads(out)
    assert {c["num_speculative_tokens"] for c in rec["candidates"] if c["speculative_method"] == "ngram"} == {4}
    assert rec["decision"]["ngram"] == NgramParams().model_dump() and not any(t.startswith("n-gram as asked") for t in rec["trace"])


@pytest.mark.parametrize("bad", ["5:2", "0:3", "4", "a:b"])
def test_a_bad_lookup_window_is_a_usage_error(run_cli, bad):
    code, _, err = run_cli("recommend", LLAMA_8B, "--gpu", "H200", "--gpus", "1", "--ngram-lookup", bad)
    assert code != 0 and "--ngram-lookup" in err and "Traceback" not in err
