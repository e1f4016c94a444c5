"""``estimate_kbar``: read a trace, tokenize it, replay it through the suffix cache, summarise.

The one entry point for ``advisor kbar`` and for the predictor (``advisor recommend --corpus``).
Streaming end to end: records are read, tokenized in small batches and fed to the replay only as
slots free up, so memory is bounded by the suffix cache (``max_cached_requests`` responses) plus
one small column of counts per request.
"""

from __future__ import annotations

import itertools
import queue
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from advisor.errors import DataError, UsageError
from advisor.kbar.formats import FORMATS, ReadStats, Sample, iter_samples
from advisor.kbar.ngram import NgramConfig, default_k, lookup_bounds, replay_ngram
from advisor.kbar.replay import ReplayConfig, new_cache, replay
from advisor.rules.policy import load_policy
from advisor.vllm_facts import facts as _vllm
from advisor.kbar.stats import (
    Counts,
    bootstrap,
    figures,
    per_position,
    relative_half_width,
)
from advisor.kbar.tokenize import KbarTokenizer, load_tokenizer

_BATCH = 64  # samples tokenized per call (tokenizers' batch encode runs on both cores)
StopKind = Literal["until_ci", "max_requests"]
"""What stops a replay before the corpus ends: K̄'s interval narrow enough (--until-ci), or --max-requests."""


class KbarResult(BaseModel):
    """What replaying a corpus through suffix decoding gave. Figures are None when undefined."""

    model_config = ConfigDict(extra="forbid")

    corpus: str
    method: str = Field(description="suffix (Arctic Inference's cache) or ngram (vLLM's prompt lookup)")
    own_outputs: bool = Field(description="True: every replayed response is the model's own output "
                              "(generation records, e.g. advisor probe --save-responses), not a reference response")
    replayed_config: str | None = Field(description="the probe configuration whose outputs were replayed "
                                        "(generation files holding several), else None")
    formats: dict[str, int] = Field(description="requests replayed per detected record format")
    tokenizer: str = Field(description="what tokenized the corpus, and where it came from")
    tokenizer_fallback: bool = Field(description="True: not the target model's tokenizer (approximate)")
    k: int
    params: dict[str, float | int | None]
    mean_acceptance_length: float | None = Field(description="1 + accepted / drafts, as vLLM reports it")
    tokens_per_step: float | None = Field(description="K̄: output tokens / all steps (empty drafts included)")
    acceptance_rate: float | None = Field(description="accepted / drafted tokens")
    per_position: list[float] = Field(description="acceptance rate at draft positions 1..K (per draft)")
    ci_low: float | None = Field(description="lower bound of tokens_per_step's bootstrap interval")
    ci_high: float | None
    ci: dict[str, tuple[float, float] | None] = Field(description="bootstrap intervals of the three figures")
    ci_level: float
    requests: int
    records: int
    skipped: dict[str, int]
    tokens: int = Field(description="output (response) tokens replayed")
    prompt_tokens: int
    steps: int
    drafts: int
    draft_tokens: int
    accepted_tokens: int
    stopped_early: bool
    stop_reason: StopKind | None = Field(description="until_ci, max_requests, or None (whole corpus)")
    elapsed_s: float
    prepare_s: float = Field(description="seconds spent reading and tokenizing")
    replay_s: float = Field(description="seconds spent in the suffix-cache replay")
    notes: list[str]


@dataclass
class Progress:
    bytes_read: int
    total_bytes: int
    requests: int
    tokens: int
    tokens_per_step: float | None


@dataclass
class _State:
    stop: bool = False
    stopped_by: StopKind | None = None
    """What stopped feeding requests early (None: the whole corpus, so far)."""
    fed: int = 0
    prepare_s: float = 0.0
    formats: Counter = field(default_factory=Counter)
    """Formats of the requests actually fed (the reader runs ahead of the replay)."""
    read_upto: tuple[int, Counter] = (0, Counter())
    """(records, skipped) as the reader had them after the batch being fed: a stop mid-file
    reports the reading up to there (to a batch), not the read-ahead."""


@dataclass
class _Batch:
    pairs: list[tuple[np.ndarray, np.ndarray]]
    formats: list[str]
    records: int
    skipped: Counter


_DONE = object()


class _Prefetch:
    """Reads and tokenizes in a background thread, a few batches ahead of the replay.

    The tokenizer's batch encode runs in Rust without the GIL, so on two cores most of it
    overlaps the replay. The queue is bounded (memory) and the thread stops when told to.
    """

    def __init__(self, samples: Iterator[Any], read: ReadStats, tok: KbarTokenizer, eos: int | None,
                 depth: int = 8, append_eos: bool = True) -> None:  # fmt: skip
        self._samples, self._read, self._tok = samples, read, tok
        self._eos = [] if eos is None else [eos]
        self._append = append_eos
        self.tokenized = 0
        """Samples that went through the tokenizer (the others carried vLLM's own token ids)."""
        self._queue: queue.Queue = queue.Queue(maxsize=depth)
        self._halt = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kbar-prefetch", daemon=True)
        self._thread.start()

    def _put(self, item: Any) -> bool:
        while not self._halt.is_set():
            try:
                self._queue.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def _run(self) -> None:
        try:
            while not self._halt.is_set():
                samples = list(itertools.islice(self._samples, _BATCH))
                if not samples:
                    break
                read = _Batch([], [s.format for s in samples], self._read.records, Counter(self._read.skipped))
                read.pairs = self._pairs(samples)
                if not self._put(read):
                    return
        except BaseException as exc:  # noqa: BLE001 - handed to the consuming thread, re-raised there
            self._put(exc)
            return
        self._put(_DONE)

    def _pairs(self, samples: list[Sample]) -> list[tuple[np.ndarray, np.ndarray]]:
        """Token ids of each sample: vLLM's own when recorded (EOS already among them when generated),
        else tokenized, ending with EOS when the model stopped on it (``Sample.eos``; unknown: ``append_eos``)."""
        text = [s for s in samples if s.prompt_ids is None or s.response_ids is None]
        self.tokenized += len(text)
        encoded = iter(self._tok.encode_pairs([(s.prompt, s.response) for s in text])) if text else iter(())
        out = []
        for s in samples:
            if s.prompt_ids is not None and s.response_ids is not None:
                p, r = s.prompt_ids, s.response_ids
            else:
                p, r = next(encoded)
                if r and (s.eos if s.eos is not None else self._append):
                    r = r + self._eos
            out.append((np.asarray(p, dtype=np.int32), np.asarray(r, dtype=np.int32)))
        return out

    def batches(self) -> Iterator[_Batch]:
        while True:
            item = self._queue.get()
            if item is _DONE:
                return
            if isinstance(item, BaseException):
                raise item
            yield item

    def close(self) -> None:
        self._halt.set()
        self._thread.join(timeout=5)


def _feed(prefetch: _Prefetch, state: _State, skipped: Counter, *, max_requests: int | None,
          max_model_len: int | None) -> Iterator[tuple[np.ndarray, np.ndarray]]:  # fmt: skip
    """Tokenized (prompt, response) pairs, pulled lazily; stops when ``state.stop`` is set."""
    t0 = time.perf_counter()
    for batch in prefetch.batches():
        state.prepare_s += time.perf_counter() - t0
        state.read_upto = (batch.records, batch.skipped)
        for (prompt, response), fmt in zip(batch.pairs, batch.formats):
            if not len(response):
                skipped["empty_response"] += 1
                continue
            if max_model_len is not None:
                if len(prompt) + 1 > max_model_len:
                    skipped["prompt_too_long"] += 1
                    continue
                response = response[: max_model_len - len(prompt)]
            if state.stop:
                return
            if max_requests is not None and state.fed >= max_requests:
                state.stop, state.stopped_by = True, "max_requests"
                return
            state.fed += 1
            state.formats[fmt] += 1
            yield prompt, response
        t0 = time.perf_counter()


def _one_config(samples: Iterator[Sample], read: ReadStats, chosen: list[str | None]) -> Iterator[Sample]:
    """Only the samples of one probe configuration (``chosen[0]``; None: the first one seen), so a
    generation file holding several configurations' outputs of the same prompts is replayed once.
    The others are counted as skipped ``other_config``."""
    for s in samples:
        if s.config is not None:
            if chosen[0] is None:
                chosen[0] = s.config
            if s.config != chosen[0]:
                read.skipped["other_config"] += 1
                continue
        yield s


def _settled(counts: Counts, target: float, level: float, seed: int) -> bool:
    """The --until-ci stop rule: a tight interval AND no drift between the two halves so far.

    The global tree warms up as requests go by, so K̄ of a prefix of the trace drifts upward; a
    bootstrap interval over requests does not see that drift (on ShareGPT the first 200 requests
    give an interval of +-5% that excludes the whole trace's K̄, 13% higher). Requiring the later
    half's K̄ to agree with the earlier half's within target/2 stops later and halves that bias.
    """
    tok, steps = counts.column("output_tokens"), counts.column("steps")
    point = tok.sum() / steps.sum()
    half = counts.n // 2
    if half == 0 or steps[:half].sum() == 0 or steps[half:].sum() == 0:
        return False
    drift = abs(tok[half:].sum() / steps[half:].sum() - tok[:half].sum() / steps[:half].sum()) / point
    if drift > target / 2:
        return False
    ci = bootstrap(counts, resamples=200, level=level, seed=seed)["tokens_per_step"]
    return relative_half_width(ci, point) <= target


def estimate_kbar(
    path: Path | str,
    tokenizer: KbarTokenizer | str | None = None,
    k: int | None = None,
    *,
    method: str = "suffix",
    prompt_lookup_min: int | None = None,
    prompt_lookup_max: int | None = None,
    config: str | None = None,
    concurrency: int = 1,
    max_requests: int | None = None,
    until_ci: float | None = None,
    check_every: int = 200,
    fmt: str = "auto",
    max_tree_depth: int = _vllm().suffix_max_tree_depth,
    max_cached_requests: int = _vllm().suffix_max_cached_requests,
    max_spec_factor: float = _vllm().suffix_max_spec_factor,
    min_token_prob: float = _vllm().suffix_min_token_prob,
    max_model_len: int | None = None,
    resamples: int = 1000,
    ci_level: float = 0.95,
    seed: int = 0,
    append_eos: bool = True,
    offline: bool = True,
    cache_dir: Path | None = None,
    allow_fallback: bool = False,
    on_progress: Callable[[Progress], None] | None = None,
) -> KbarResult:
    """Estimate suffix decoding's (or, ``method="ngram"``, n-gram's) K̄ on the trace at ``path``.

    ``method``: ``suffix`` replays Arctic Inference's cache (advisor.kbar.replay); ``ngram`` replays
    vLLM's prompt-lookup proposer (advisor.kbar.ngram) with ``prompt_lookup_min``/``max`` (None:
    vLLM's defaulting) and K = ``k``. ``k`` None: the method's default K (suffix: rules/policy/decider.yaml
    ``num_speculative_tokens``; n-gram: advisor.kbar.ngram.default_k). ``config``: in a generation file holding several probe
    configurations' outputs, replay this one's (None: the first one in the file).

    ``tokenizer``: a loaded ``KbarTokenizer``, or a spec for ``load_tokenizer`` (model id, model
    dir, tokenizer.json, ``builtin``; None = the labelled fallback). ``until_ci``: stop feeding new
    requests once the relative half-width of K̄'s bootstrap interval is at most this and K̄ no longer
    drifts (``_settled``), checked every ``check_every`` finished requests (requests in flight
    still finish). ``append_eos``: end each response with the tokenizer's EOS token, which the
    model generates (one more step) and vLLM adds to the suffix tree like any sampled token; turn
    it off for traces cut at max_tokens.
    """
    t_start = time.perf_counter()
    if max_requests is not None and max_requests < 1:
        raise UsageError(f"--max-requests must be >= 1, got {max_requests}")
    if until_ci is not None and not 0 < until_ci < 1:
        raise UsageError(f"--until-ci must be in (0, 1), got {until_ci}")
    if check_every < 1:
        raise UsageError(f"--check-every must be >= 1, got {check_every}")
    if seed < 0:
        raise UsageError(f"--seed must be >= 0 (a bootstrap seed), got {seed}")
    if fmt != "auto" and fmt not in FORMATS:
        raise UsageError(f"unknown --format {fmt!r}; expected auto or one of {', '.join(FORMATS)}")
    if not Path(path).is_file():
        raise UsageError(f"corpus file not found: {path}")
    if method not in ("suffix", "ngram"):
        raise UsageError(f"--method must be suffix or ngram, not {method!r}")
    lookup = lookup_bounds(prompt_lookup_min, prompt_lookup_max)
    if k is None:
        k = default_k() if method == "ngram" else load_policy().num_speculative_tokens
    if method == "ngram":
        ngram_cfg = NgramConfig(num_speculative_tokens=k, prompt_lookup_min=lookup[0], prompt_lookup_max=lookup[1],
                                max_model_len=max_model_len)  # fmt: skip

        def run_replay(feed):
            return replay_ngram(feed, ngram_cfg)
    else:
        cfg = ReplayConfig(
            num_speculative_tokens=k, max_tree_depth=max_tree_depth, max_cached_requests=max_cached_requests,
            max_spec_factor=max_spec_factor, min_token_prob=min_token_prob, concurrency=concurrency,
            max_model_len=max_model_len,
        )  # fmt: skip
        cache = new_cache(cfg)  # fails fast, before any reading, when Arctic Inference is missing

        def run_replay(feed):
            return replay(feed, cfg, cache)
    tok = tokenizer if isinstance(tokenizer, KbarTokenizer) else load_tokenizer(
        tokenizer, offline=offline, cache_dir=cache_dir, allow_fallback=allow_fallback)  # fmt: skip

    read = ReadStats()
    extra_skips: Counter = Counter()
    state = _State()
    counts = Counts()
    chosen: list[str | None] = [config]
    samples = _one_config(iter_samples(path, fmt, read), read, chosen)
    eos = tok.eos_id
    prefetch = _Prefetch(samples, read, tok, eos, append_eos=append_eos)
    feed = _feed(prefetch, state, extra_skips, max_requests=max_requests, max_model_len=max_model_len)
    last_report = 0.0
    check_s = 0.0
    t_loop = time.perf_counter()
    try:
        for s in run_replay(feed):
            counts.add(s)
            if until_ci is not None and not state.stop and counts.n % check_every == 0:
                t_check = time.perf_counter()
                if _settled(counts, until_ci, ci_level, seed):
                    state.stop, state.stopped_by = True, "until_ci"
                check_s += time.perf_counter() - t_check
            if on_progress is not None and (now := time.monotonic()) - last_report >= 0.1:
                last_report = now
                steps = counts.total("steps")
                on_progress(Progress(read.bytes_read, read.total_bytes, counts.n, counts.total("output_tokens"),
                                     counts.total("output_tokens") / steps if steps else None))  # fmt: skip
    finally:
        prefetch.close()
    if on_progress is not None:
        steps = counts.total("steps")
        on_progress(Progress(read.bytes_read if state.stop else read.total_bytes, read.total_bytes, counts.n,
                             counts.total("output_tokens"), counts.total("output_tokens") / steps if steps else None))  # fmt: skip

    loop_s = time.perf_counter() - t_loop
    records, read_skips = state.read_upto if state.stop else (read.records, read.skipped)
    skipped = dict(sorted((read_skips + extra_skips).items()))
    if counts.n == 0:
        expected = ", ".join(FORMATS)
        raise DataError(
            f"no usable requests in {path}: {records} records read, skipped {skipped or 'none'} "
            f"(formats understood: {expected}; see docs/kbar.md)"
        )
    cis = bootstrap(counts, resamples=resamples, level=ci_level, seed=seed)
    totals = {c: counts.total(c) for c in ("output_tokens", "steps", "drafts", "draft_tokens", "accepted", "prompt_tokens")}
    fig = figures(totals["output_tokens"], totals["steps"], totals["drafts"], totals["draft_tokens"], totals["accepted"])
    elapsed = time.perf_counter() - t_start
    notes = [tok.note] if tok.note else []
    ids_only = prefetch.tokenized == 0
    if ids_only:
        notes.append("every request carried vLLM's own token ids: replayed as recorded, the tokenizer was not used")
    elif tok.fallback:
        notes.append("tokenized with the built-in fallback tokenizer, not the target model's: K̄ is approximate")
    if state.stopped_by == "until_ci":
        notes.append(f"stopped early after {counts.n} requests (K̄'s relative CI half-width <= {until_ci} and "
                     "stable between halves); later requests would see a warmer global tree, so this K̄ can "
                     "still be a few % low (ShareGPT: -6 to -8%); replay the whole trace for the final figure")  # fmt: skip
    if append_eos and eos is None:
        notes.append("the tokenizer names no EOS token: responses replayed without one")
    if fig["mean_acceptance_length"] is None:
        notes.append(f"{'n-gram' if method == 'ngram' else 'suffix decoding'} proposed no draft at all on this corpus")
    own = bool(state.formats) and set(state.formats) == {"generation"}
    if own and chosen[0] is not None:
        notes.append(f"replayed the outputs of configuration {chosen[0]} (the file holds others: --config picks)"
                     if skipped.get("other_config") else f"replayed the outputs of configuration {chosen[0]}")  # fmt: skip
    if method == "ngram" and concurrency > 1:
        notes.append("n-gram drafts from each request's own tokens only: concurrency does not change its K̄")
    tps_ci = cis["tokens_per_step"]
    params: dict[str, float | int | None] = (
        {"prompt_lookup_min": lookup[0], "prompt_lookup_max": lookup[1]} if method == "ngram" else {
            "max_tree_depth": max_tree_depth, "max_cached_requests": max_cached_requests,
            "max_spec_factor": max_spec_factor, "min_token_prob": min_token_prob})  # fmt: skip
    params.update({"concurrency": concurrency, "max_model_len": max_model_len,
                   "eos_token_id": eos if append_eos else None})  # fmt: skip
    return KbarResult(
        corpus=str(path),
        method=method,
        own_outputs=own,
        replayed_config=chosen[0] if own else None,
        formats=dict(state.formats),
        tokenizer="none needed (vLLM's token ids as recorded)" if ids_only else tok.label,
        tokenizer_fallback=tok.fallback and not ids_only,
        k=k,
        params=params,
        mean_acceptance_length=fig["mean_acceptance_length"],
        tokens_per_step=fig["tokens_per_step"],
        acceptance_rate=fig["acceptance_rate"],
        per_position=per_position(counts, k),
        ci_low=tps_ci[0] if tps_ci else None,
        ci_high=tps_ci[1] if tps_ci else None,
        ci=cis,
        ci_level=ci_level,
        requests=counts.n,
        records=records,
        skipped=skipped,
        tokens=totals["output_tokens"],
        prompt_tokens=totals["prompt_tokens"],
        steps=totals["steps"],
        drafts=totals["drafts"],
        draft_tokens=totals["draft_tokens"],
        accepted_tokens=totals["accepted"],
        stopped_early=state.stopped_by is not None,
        stop_reason=state.stopped_by,
        elapsed_s=elapsed,
        prepare_s=state.prepare_s,
        replay_s=max(0.0, loop_s - state.prepare_s - check_s),
        notes=notes,
    )
