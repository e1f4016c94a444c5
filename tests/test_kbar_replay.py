"""The replay core on hand-made token sequences whose acceptance is known exactly."""

from __future__ import annotations

import sys

import pytest

from advisor.errors import DependencyError, UsageError
from advisor.kbar.replay import ReplayConfig, arctic_available, new_cache, replay
from advisor.kbar.stats import Counts, figures

needs_arctic = pytest.mark.skipif(
    not arctic_available(),
    reason="arctic_inference is not importable: run scripts/install_arctic.sh (the test script does)",
)


def _totals(stats):
    c = Counts()
    for s in stats:
        c.add(s)
    return c


class _Draft:
    def __init__(self, ids):
        self.token_ids = list(ids)


class OracleCache:
    """A stand-in cache that always drafts the next ``n`` recorded tokens (or a fixed wrong guess)."""

    def __init__(self, truth: dict, n: int, wrong: bool = False) -> None:
        self.truth, self.n, self.wrong = truth, n, wrong
        self.calls: list[tuple] = []

    def start_request(self, rid, prompt):
        self.calls.append(("start", rid, len(prompt)))

    def add_active_response(self, rid, toks):
        self.calls.append(("add", rid, len(toks)))

    def speculate(self, rid, pattern, max_spec_tokens, max_spec_factor, min_token_prob):  # keywords, as vLLM
        self.calls.append(("spec", rid, len(pattern)))
        seq, plen = self.truth[rid]
        done = self._emitted[rid]
        nxt = seq[plen + done : plen + done + min(self.n, max_spec_tokens)]
        return _Draft([-1] * len(nxt) if self.wrong else nxt)

    def stop_request(self, rid):
        self.calls.append(("stop", rid, 0))


def _oracle_run(response_len: int, n: int, wrong: bool = False, k: int = 32, **cfg):
    prompt, response = list(range(1000, 1010)), list(range(response_len))
    cache = OracleCache({0: (prompt + response, len(prompt))}, n, wrong)
    emitted = {0: 0}
    cache._emitted = emitted
    orig_add = cache.add_active_response

    def add(rid, toks):
        emitted[rid] += len(toks)
        orig_add(rid, toks)

    cache.add_active_response = add
    [st] = list(replay([(prompt, response)], ReplayConfig(num_speculative_tokens=k, **cfg), cache=cache))
    return st, cache


def test_counting_with_an_oracle_drafter():
    # 100 tokens, perfect 4-token drafts: prefill emits 1, then 5 tokens a step (4 accepted + bonus)
    # for 19 steps (96 tokens), then a last 4-token draft covers the final 4 tokens (no bonus: the
    # recorded response has ended).
    st, cache = _oracle_run(100, 4)
    assert (st.steps, st.drafts, st.draft_tokens, st.accepted) == (21, 20, 80, 80)
    assert st.accepted_per_pos == [20, 20, 20, 20] and st.draft_tokens_per_pos == [20, 20, 20, 20]
    f = figures(st.output_tokens, st.steps, st.drafts, st.draft_tokens, st.accepted)
    assert f["tokens_per_step"] == pytest.approx(100 / 21)
    assert f["mean_acceptance_length"] == pytest.approx(1 + 80 / 20)  # vLLM: 1 + accepted / drafts
    # vLLM's call order: start with the prompt, add the sampled ids, speculate; stop when done.
    assert cache.calls[:3] == [("start", 0, 10), ("add", 0, 1), ("spec", 0, 11)]
    assert cache.calls[3:5] == [("add", 0, 5), ("spec", 0, 16)]
    assert cache.calls[-2:] == [("add", 0, 4), ("stop", 0, 0)]


def test_wrong_drafts_are_counted_but_never_accepted():
    # One token a step; the oracle's drafts shrink to 2 and 1 tokens as the response runs out.
    st, _ = _oracle_run(50, 3, wrong=True)
    assert (st.steps, st.drafts, st.draft_tokens, st.accepted) == (50, 49, 47 * 3 + 2 + 1, 0)
    assert st.accepted_per_pos == []


def test_max_model_len_caps_drafts_like_vllm():
    # Drafts are capped at max_model_len - num_tokens - 1 (suffix_decoding.py:83-85).
    st, _ = _oracle_run(20, 8, max_model_len=10 + 12)
    assert max(i + 1 for i, v in enumerate(st.draft_tokens_per_pos) if v) <= 8
    assert st.output_tokens == 20


def test_config_bounds_mirror_vllm():
    for bad in ({"num_speculative_tokens": 0}, {"max_tree_depth": 0}, {"max_cached_requests": -1},
                {"max_spec_factor": -0.5}, {"min_token_prob": 1.5}, {"concurrency": 0}):  # fmt: skip
        with pytest.raises(UsageError):
            ReplayConfig(**bad)


def test_missing_arctic_names_the_install_script(monkeypatch):
    monkeypatch.setitem(sys.modules, "arctic_inference.suffix_decoding", None)
    with pytest.raises(DependencyError, match="scripts/install_arctic.sh"):
        new_cache(ReplayConfig())


@needs_arctic
def test_verbatim_repeat_of_the_prompt_exact_counts():
    """Response == prompt (100 distinct tokens); everything the suffix cache drafts is known.

    After p emitted tokens the context ends with a1..ap, found in the prompt (continuation
    a(p+1)..) and at the end of the local tree (no continuation): probability 1/2 per token, so
    the score is 0.5 x draft length. A match of m tokens allows min(K, m) tokens (max_spec_factor
    1.0) within the remaining tree depth 24 - m: drafts of 1, 3, 7, then 12 = min(m, 24 - m) at
    m = 12. Steps: prefill (1 token), then 1+1, 3+1, 7+1, 6 x (12+1), and a last 12-token draft of
    which the 7 remaining tokens are accepted: 11 steps, 10 drafts, 95 drafted, 90 accepted.
    """
    prompt = list(range(100, 200))
    [st] = list(replay([(prompt, prompt)]))
    assert (st.output_tokens, st.steps, st.drafts, st.draft_tokens, st.accepted) == (100, 11, 10, 95, 90)
    assert st.draft_tokens_per_pos == [10, 9, 9, 8, 8, 8, 8, 7, 7, 7, 7, 7]
    assert st.accepted_per_pos == [10, 9, 9, 8, 8, 8, 8, 6, 6, 6, 6, 6]


@needs_arctic
def test_no_overlap_means_no_drafts():
    prompt, response = list(range(100, 200)), list(range(300, 420))
    [st] = list(replay([(prompt, response)]))
    assert (st.steps, st.drafts, st.draft_tokens, st.accepted) == (120, 0, 0, 0)
    f = figures(st.output_tokens, st.steps, st.drafts, st.draft_tokens, st.accepted)
    assert f == {"tokens_per_step": 1.0, "mean_acceptance_length": None, "acceptance_rate": None}


@needs_arctic
def test_global_tree_serves_later_requests_and_concurrency_interleaves():
    a, b = list(range(100, 130)), list(range(500, 560))  # no overlap between prompt and response
    reqs = [(a, b), (list(range(700, 730)), b)]  # the second request answers the same as the first
    first, second = list(replay(reqs))
    assert first.drafts == 0  # nothing cached yet
    assert second.accepted > 40  # the first response is in the global tree
    # Two in flight: the second request sees the first's tokens only as they are generated.
    c1, c2 = list(replay(reqs, ReplayConfig(concurrency=2)))
    assert c1.drafts == 0 and c2.accepted < second.accepted


@needs_arctic
def test_memory_is_bounded_by_max_cached_requests():
    cfg = ReplayConfig(max_cached_requests=3)
    cache = new_cache(cfg)
    reqs = [(list(range(i, i + 20)), list(range(i + 1000, i + 1040))) for i in range(0, 400, 40)]
    out = list(replay(reqs, cfg, cache=cache))
    assert len(out) == 10
    assert len(cache.cached_requests) == 3 and len(cache.active_requests) == 0
