"""The closed loop a user benchmarks, simulated step by step (pure): ``vllm bench serve --max-concurrency C
--num-prompts N --random-input-len P --random-output-len O --ignore-eos`` against one replica.

Poisson arrivals (advisor.predict.serving) are not what that benchmark offers: it sends C requests at once,
and each time one ends it sends the next, so with fixed lengths the requests run in waves. This module plays
vLLM V1's scheduler (vllm/v1/core/sched/scheduler.py ``schedule``; the same in 0.26 and 0.32) over such a
load, with the step model's costs:

- every step has a token budget ``max_num_batched_tokens`` (M); the RUNNING requests are scheduled first, in the
  order they were admitted, each taking what it still needs (a decoding request its 1 + drafted tokens, a
  request whose prompt is still being prefilled the next chunk of it, up to the budget left); then WAITING
  requests are admitted in arrival order while a slot (``max_num_seqs``, the KV cache's requests) and budget
  remain, each with a first chunk of its prompt (chunked prefill, V1's default);
- a step costs the plain decode step at its decoding requests plus its prefill tokens at the marginal prefill
  cost (the operating-point model's terms: advisor.predict.absolute.decode_step, prefill_marginal);
- a request's first token comes at the end of the step that schedules the last chunk of its prompt (vLLM samples
  there); each later step it emits ``gain`` tokens (1 plain; a speculative method's tokens per step over its
  step-time ratio, as the operating-point model prices it); it ends after O tokens, and the client sends the next
  request at that moment (ASSUMED: no client or API-server overhead; a c=1 run measures it).

Figures are what ``vllm bench serve`` reports over all N requests: mean and median TTFT, mean TPOT
((end − first token) / (O − 1) per request) and output tok/s (N·O over the makespan).

With ``--random-range-ratio`` (recommend's ``--length-spread``) each request has its own prompt and output length
(:func:`spread_lengths`, the benchmark's own draws); :func:`simulate` then plays the same rules request by request
(:func:`_simulate_requests`): requests end one by one, so the waves break up after the first.
"""

from __future__ import annotations

import functools
import math
import statistics
from collections import deque
from typing import Callable, Sequence

from pydantic import BaseModel, ConfigDict, Field

MIN_PROMPTS = 200
LIFETIMES = 10
"""``vllm bench serve --num-prompts`` = max(LIFETIMES x requests in flight, MIN_PROMPTS) (advisor.render.bench, which
emits the command, and this simulation share them). A closed loop of C requests with fixed lengths runs in waves of
C, so the first wave's ramp and the last one's drain weigh 2 of 10 in the means; an open loop at R/s holds
L = R x (TTFT + O x TPOT) requests and reaches that level after about one lifetime. 200 keeps the p99 off the single
slowest request at small loads."""


def bench_prompts(in_flight: float) -> int:
    """``--num-prompts`` for a run holding ``in_flight`` requests (closed loop: its concurrency)."""
    return max(LIFETIMES * math.ceil(max(1.0, in_flight)), MIN_PROMPTS)


MAX_SIMULATED_IN_FLIGHT = 4096
"""Most requests in flight per replica the simulation plays (a closed loop beyond it is not simulated: None)."""

CLIENT_OVERHEAD_S = 0.0
"""ASSUMED: per-request time the client and vLLM's API server add before the engine sees a request."""


class ClosedLoopRun(BaseModel):
    """One simulated benchmark run of one replica."""

    model_config = ConfigDict(extra="forbid")

    requests: int = Field(ge=1)
    mean_ttft_ms: float
    median_ttft_ms: float
    p99_ttft_ms: float
    mean_tpot_ms: float
    output_tok_s: float
    """Output tokens per second of this replica over the makespan."""
    steps: int


def _report(ttfts: list[float], tpots: list[float], done: int, out_tokens: float, t: float, steps: int) -> ClosedLoopRun:
    """What the benchmark reports of a played loop: TTFT mean, median and p99, mean TPOT, output tok/s over the makespan."""
    ttfts.sort()
    return ClosedLoopRun(
        requests=done, mean_ttft_ms=round(statistics.fmean(ttfts) * 1e3, 1), median_ttft_ms=round(statistics.median(ttfts) * 1e3, 1),
        p99_ttft_ms=round(ttfts[min(len(ttfts) - 1, int(0.99 * len(ttfts)))] * 1e3, 1),
        mean_tpot_ms=round(statistics.fmean(tpots) * 1e3, 2) if tpots else 0.0,
        output_tok_s=round(out_tokens / t, 1) if t > 0 else 0.0, steps=steps,
    )  # fmt: skip


def simulate(step_of: Callable[[int], float], *, prefill_token_s: float, prompt_len: int, output_len: int,
             concurrency: int, num_prompts: int, max_num_seqs: int, max_num_batched_tokens: int, kv_slots: int,
             gain: float = 1.0, tokens_per_seq: float = 1.0,
             lengths: tuple[Sequence[int], Sequence[int]] | None = None) -> ClosedLoopRun:  # fmt: skip
    """Play the closed loop (module docstring) and return what the benchmark would report.

    ``lengths``: (prompt lengths, output lengths) of the ``num_prompts`` requests in the order the benchmark sends
    them (:func:`spread_lengths`: ``--random-range-ratio``); then every request is played on its own
    (:func:`_simulate_requests`, the same rules) and ``prompt_len`` / ``output_len`` are not read. None: every request
    has ``prompt_len`` and ``output_len``, played by the fast path below.

    How it is played (the figures are those of playing every request step by step, to the last bit): the running
    batch, in admission order, is the requests decoding, then at most one whose prompt is still being prefilled (a
    prompt that does not finish takes the rest of the budget, so nobody is admitted behind it). A step decodes the
    first M // q decoding requests (the active ones; the others wait, emitted 1, until those end). Requests that get
    their first token in the same step are one group (split where the budget ends). A request's emitted count is
    the float sum of the play (1 at its first token, + gain a step, + k x gain over a jump), so an earlier request
    has emitted at least as much as a later one and requests end from the front; a group that has only decoded step
    by step is at ``emitted[n]`` after n steps, one table for all. A step then costs the same whatever the requests
    in flight, and a jump one update per group."""
    if lengths is not None:
        return _simulate_requests(step_of, prefill_token_s=prefill_token_s, lengths=lengths, concurrency=concurrency,
                                  num_prompts=num_prompts, max_num_seqs=max_num_seqs,
                                  max_num_batched_tokens=max_num_batched_tokens, kv_slots=kv_slots, gain=gain,
                                  tokens_per_seq=tokens_per_seq)  # fmt: skip
    P, out_len, M = max(1, prompt_len), max(1, output_len), max(1, max_num_batched_tokens)
    slots = max(1, min(max_num_seqs, kv_slots))
    q = max(1, math.ceil(tokens_per_seq))
    g = max(1e-6, gain)
    n_total = max(1, num_prompts)
    first = min(concurrency, n_total)
    cap = M // q  # decoding requests one step's budget schedules
    end_at = out_len - 1e-9
    waiting: deque[list] = deque([[CLIENT_OVERHEAD_S, first]] if first > 0 else [])  # [arrival, requests]
    sent = first
    prefill: list | None = None  # [arrival, prompt tokens left] of the request being prefilled
    # active group: [requests, first-token time, base, emitted, at]; emitted None: at emitted[decode_steps - base];
    # else (after a jump) ``emitted`` as of decode_steps = at, + gain a decode step since
    active: deque[list] = deque()
    frozen: deque[list] = deque()  # [requests, first-token time]: decoding requests past the budget (emitted 1)
    n_active = n_frozen = 0
    emitted = [1.0]  # emitted[n]: 1 + gain, n times over
    decode_steps = 0  # steps played one at a time (each decodes the active requests)
    t = 0.0
    steps = 0
    ttfts: list[float] = []
    tpots: list[float] = []
    done = 0

    def emitted_of(grp: list) -> float:
        if grp[3] is None:
            n = decode_steps - grp[2]
            while len(emitted) <= n:
                emitted.append(emitted[-1] + g)
            return emitted[n]
        v = grp[3]
        for _ in range(decode_steps - grp[4]):
            v += g
        grp[3], grp[4] = v, decode_steps
        return v

    while done < n_total:
        while frozen and n_active < cap:  # requests the budget now reaches start decoding
            grp = frozen[0]
            n = min(grp[0], cap - n_active)
            if n == grp[0]:
                frozen.popleft()
            else:
                grp[0] -= n
            active.append([n, grp[1], decode_steps, None, 0])
            n_active += n
            n_frozen -= n
        in_flight = n_active + n_frozen + (prefill is not None)
        if not in_flight and not waiting:  # cannot happen in a closed loop with requests left; guard anyway
            break
        blocked = not waiting or in_flight >= slots or waiting[0][0] > t  # nobody can be admitted this step
        if blocked and prefill is None and in_flight and in_flight * q <= M:
            # a pure decode phase: nothing changes until the next request ends (or the next arrival), so jump there
            left = out_len - emitted_of(active[0])
            k = max(1, math.ceil(left / g))
            dt = step_of(in_flight)
            if waiting and in_flight < slots:  # an arrival later than now: stop at the step it falls in
                k = max(1, min(k, math.ceil((waiting[0][0] - t) / dt)))
            t += k * dt
            steps += k
            for grp in active:
                grp[3], grp[4] = emitted_of(grp) + k * g, decode_steps
        else:
            dec = n_active
            budget = M - dec * q
            pf_tokens = 0
            if prefill is not None and budget > 0:
                take = min(prefill[1], budget)
                prefill[1] -= take
                budget -= take
                pf_tokens += take
            else:
                take = 0
            admitted: list[tuple[float, int]] = []  # (arrival, requests) admitted with their whole prompt
            partial = None
            while waiting and in_flight < slots and budget > 0 and waiting[0][0] <= t:
                entry = waiting[0]
                n = min(entry[1], slots - in_flight, budget // P)
                if n:
                    admitted.append((entry[0], n))
                    budget -= n * P
                    pf_tokens += n * P
                    in_flight += n
                    entry[1] -= n
                if entry[1] and in_flight < slots and 0 < budget < P:  # a first chunk of the next prompt
                    partial = [entry[0], P - budget]
                    pf_tokens += budget
                    budget = 0
                    in_flight += 1
                    entry[1] -= 1
                if not entry[1]:
                    waiting.popleft()
            if not dec and not take and not admitted and partial is None:  # every waiting request arrives later
                t = max(t, waiting[0][0])
                continue
            dt = step_of(max(1, dec)) + pf_tokens * prefill_token_s
            t += dt
            steps += 1
            decode_steps += 1
            started = 0
            if take and prefill[1] <= 0:
                ttfts.append(t - prefill[0])
                started, prefill = 1, None
            for arrival, n in admitted:
                ttfts.extend([t - arrival] * n)
                started += n
            if partial is not None:
                prefill = partial
            if started:  # emitted 1 from this step on; decoding from the next where the budget reaches them
                n = 0 if frozen else min(started, cap - n_active)
                if n:
                    active.append([n, t, decode_steps, None, 0])
                    n_active += n
                if started > n:
                    frozen.append([started - n, t])
                    n_frozen += started - n
        ended: list[list] = []
        while active and emitted_of(active[0]) >= end_at:
            grp = active.popleft()
            n_active -= grp[0]
            ended.append(grp)
        if not active:  # the waiting ones have emitted 1: they end only at O = 1
            while frozen and 1.0 >= end_at:
                grp = frozen.popleft()
                n_frozen -= grp[0]
                ended.append(grp)
        for grp in ended:
            n = grp[0]
            done += n
            tpots.extend([(t - grp[1]) / (out_len - 1) if out_len > 1 else 0.0] * n)
            new = min(n, n_total - sent)
            if new > 0:
                waiting.append([t + CLIENT_OVERHEAD_S, new])
                sent += new
    return _report(ttfts, tpots, done, done * out_len, t, steps)


SPREAD_SEED = 0
"""``vllm bench serve --seed``'s default (vllm/benchmarks/datasets/datasets.py:1607, 0.26.0): the random dataset's
generator is ``numpy.random.default_rng(seed)`` (datasets.py:582) and its first draws are the lengths, so
:func:`spread_lengths` draws the benchmark's own lengths (exactly, for a tokenizer that adds no special token)."""


def spread_range(length: int, ratio: float, *, output: bool = False) -> tuple[int, int]:
    """The lengths ``vllm bench serve --random-range-ratio ratio`` draws around ``length``, both ends included:
    ``[floor(L x (1 - r)), ceil(L x (1 + r))]``, an output's at least 1 (vLLM 0.26.0
    vllm/benchmarks/datasets/utils.py:72-79 ``get_sampling_params``; 0.32.0 the same, utils.py:70-77). vLLM takes
    the tokenizer's special tokens off the prompt's length before (utils.py:71) and the server adds them back,
    so the prompts the server sees are this range to within those one or two tokens."""
    lo, hi = math.floor(length * (1 - ratio)), math.ceil(length * (1 + ratio))
    return (max(lo, 1), max(hi, 1)) if output else (lo, hi)


@functools.lru_cache(maxsize=64)
def spread_lengths(prompt_len: int, output_len: int, ratio: float, n: int, seed: int = SPREAD_SEED) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(prompt lengths, output lengths) of the ``n`` requests of ``vllm bench serve --dataset-name random
    --random-range-ratio ratio``, in the order it sends them: each an integer drawn uniformly from
    :func:`spread_range` (one ratio for both), prompts first, with the benchmark's generator (vLLM 0.26.0
    vllm/benchmarks/datasets/utils.py:98-99: ``rng.integers(low, high + 1, size=n)``). The range is symmetric
    about the length (floor below, ceil above), so the mean of the draws is ``prompt_len`` / ``output_len``
    (the n draws' own mean within a few % of it at n >= 200). Cached: the search asks for the same draws per candidate."""
    import numpy as np

    in_lo, in_hi = spread_range(prompt_len, ratio)
    out_lo, out_hi = spread_range(output_len, ratio, output=True)
    rng = np.random.default_rng(seed)
    ins = rng.integers(in_lo, in_hi + 1, size=n)
    outs = rng.integers(out_lo, out_hi + 1, size=n)
    return tuple(max(1, int(x)) for x in ins.tolist()), tuple(outs.tolist())


def _simulate_requests(step_of: Callable[[int], float], *, prefill_token_s: float, lengths: tuple[Sequence[int], Sequence[int]],
                       concurrency: int, num_prompts: int, max_num_seqs: int, max_num_batched_tokens: int, kv_slots: int,
                       gain: float, tokens_per_seq: float) -> ClosedLoopRun:  # fmt: skip
    """:func:`simulate` with every request's own lengths: the same rules and the same float operations, played
    request by request (the decoding requests as arrays, in admission order; a step decodes the first M // q of
    them). Where the lengths are all equal the figures are the fast path's, to the last bit (tests/test_closed_loop.py).
    Two things only a spread brings: a request ends when it has emitted its own O (any of them, not the oldest
    first), and one of O = 1 is left out of the mean TPOT as vLLM leaves it out (vllm/benchmarks/serve.py
    ``calculate_metrics``: ``if output_len > 1``); the fast path counts 0 for it, the same mean when every O is 1.
    ASSUMED for a spread: the KV cache's slots (``kv_slots``) are counted at the mean lengths."""
    import numpy as np

    n_total = max(1, num_prompts)
    ins, outs = lengths
    if len(ins) < n_total or len(outs) < n_total:
        raise ValueError(f"lengths: {min(len(ins), len(outs))} requests, fewer than num_prompts {n_total}")
    prompts = [max(1, int(x)) for x in ins[:n_total]]
    outputs = [max(1, int(x)) for x in outs[:n_total]]
    M = max(1, max_num_batched_tokens)
    slots = max(1, min(max_num_seqs, kv_slots))
    q = max(1, math.ceil(tokens_per_seq))
    g = max(1e-6, gain)
    first = min(concurrency, n_total)
    cap = M // q
    waiting: deque[tuple[float, int]] = deque((CLIENT_OVERHEAD_S, i) for i in range(max(0, first)))  # (arrival, request)
    sent = max(0, first)
    prefill: list | None = None  # [arrival, prompt tokens left, request] of the request being prefilled
    # the decoding requests, in admission order, the first n of each array: emitted so far, their O, the count they
    # end at, first-token time
    size = min(slots, n_total) + 1
    em, olen, end_at, first_t = np.empty(size), np.empty(size), np.empty(size), np.empty(size)
    n = 0
    t = 0.0
    steps = 0
    ttfts: list[float] = []
    tpots: list[float] = []
    done = out_tokens = 0
    while done < n_total:
        in_flight = n + (prefill is not None)
        if not in_flight and not waiting:
            break
        blocked = not waiting or in_flight >= slots or waiting[0][0] > t
        if blocked and prefill is None and in_flight and in_flight * q <= M:
            # a pure decode phase: jump to the step the next request ends in (or the next arrival falls in)
            left = float((olen[:n] - em[:n]).min())
            k = max(1, math.ceil(left / g))
            dt = step_of(in_flight)
            if waiting and in_flight < slots:
                k = max(1, min(k, math.ceil((waiting[0][0] - t) / dt)))
            t += k * dt
            steps += k
            em[:n] += k * g
        else:
            dec = min(n, cap)
            budget = M - dec * q
            pf_tokens = take = 0
            if prefill is not None and budget > 0:
                take = min(prefill[1], budget)
                prefill[1] -= take
                budget -= take
                pf_tokens += take
            admitted: list[tuple[float, int]] = []
            partial = None
            while waiting and in_flight < slots and budget > 0 and waiting[0][0] <= t:
                arrival, r = waiting.popleft()
                if prompts[r] <= budget:
                    admitted.append((arrival, r))
                    budget -= prompts[r]
                    pf_tokens += prompts[r]
                else:  # a first chunk of its prompt: the rest of the budget
                    partial = [arrival, prompts[r] - budget, r]
                    pf_tokens += budget
                    budget = 0
                in_flight += 1
            if not dec and not take and not admitted and partial is None:  # every waiting request arrives later
                t = max(t, waiting[0][0])
                continue
            t += step_of(max(1, dec)) + pf_tokens * prefill_token_s
            steps += 1
            if dec:
                em[:dec] += g
            started = []
            if take and prefill[1] <= 0:
                ttfts.append(t - prefill[0])
                started.append(prefill[2])
                prefill = None
            for arrival, r in admitted:
                ttfts.append(t - arrival)
                started.append(r)
            if partial is not None:
                prefill = partial
            for r in started:  # emitted 1 from this step on; decoding from the next where the budget reaches them
                em[n], olen[n], end_at[n], first_t[n] = 1.0, outputs[r], outputs[r] - 1e-9, t
                n += 1
        ended = np.flatnonzero(em[:n] >= end_at[:n])
        if ended.size:
            for j in ended.tolist():
                o = int(olen[j])
                done += 1
                out_tokens += o
                if o > 1:
                    tpots.append((t - float(first_t[j])) / (o - 1))
                if sent < n_total:
                    waiting.append((t + CLIENT_OVERHEAD_S, sent))
                    sent += 1
            keep = np.ones(n, dtype=bool)
            keep[ended] = False
            m = n - ended.size
            em[:m], olen[:m], end_at[:m], first_t[:m] = em[:n][keep], olen[:n][keep], end_at[:n][keep], first_t[:n][keep]
            n = m
    return _report(ttfts, tpots, done, out_tokens, t, steps)
