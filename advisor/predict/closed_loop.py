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
"""

from __future__ import annotations

import math
import statistics
from collections import deque
from typing import Callable

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


def simulate(step_of: Callable[[int], float], *, prefill_token_s: float, prompt_len: int, output_len: int,
             concurrency: int, num_prompts: int, max_num_seqs: int, max_num_batched_tokens: int, kv_slots: int,
             gain: float = 1.0, tokens_per_seq: float = 1.0) -> ClosedLoopRun:  # fmt: skip
    """Play the closed loop (module docstring) and return what the benchmark would report."""
    P, out_len, M = max(1, prompt_len), max(1, output_len), max(1, max_num_batched_tokens)
    slots = max(1, min(max_num_seqs, kv_slots))
    q = max(1, math.ceil(tokens_per_seq))
    g = max(1e-6, gain)
    n_total = max(1, num_prompts)
    first = min(concurrency, n_total)
    waiting: deque[float] = deque([CLIENT_OVERHEAD_S] * first)
    sent = first
    # running request: [arrival, prefill_left, emitted, first_token_time]
    running: list[list[float]] = []
    prefilling = 0  # running requests whose prompt is not yet fully prefilled
    t = 0.0
    steps = 0
    ttfts: list[float] = []
    tpots: list[float] = []
    done = 0
    while done < n_total:
        if not running and not waiting:  # cannot happen in a closed loop with requests left; guard anyway
            break
        decoding = prefilling == 0
        blocked = not waiting or len(running) >= slots or waiting[0] > t  # nobody can be admitted this step
        if blocked and decoding and running and len(running) * q <= M:
            # a pure decode phase: nothing changes until the next request ends (or the next arrival), so jump there
            left = min(out_len - r[2] for r in running)
            k = max(1, math.ceil(left / g))
            dt = step_of(len(running))
            if waiting and len(running) < slots:  # an arrival later than now: stop at the step it falls in
                k = max(1, min(k, math.ceil((waiting[0] - t) / dt)))
            t += k * dt
            steps += k
            for r in running:
                r[2] += k * g
        else:
            budget = M
            plan: list[tuple[list[float], int]] = []  # (request, prefill tokens this step; 0: a decode)
            dec = 0
            pf_tokens = 0
            for r in running:
                if budget <= 0:
                    break
                if r[1] > 0:
                    take = int(min(r[1], budget))
                    plan.append((r, take))
                    budget -= take
                    pf_tokens += take
                elif budget >= q:
                    plan.append((r, 0))
                    budget -= q
                    dec += 1
            while waiting and len(running) < slots and budget > 0 and waiting[0] <= t:
                r = [waiting.popleft(), float(P), 0.0, 0.0]
                running.append(r)
                prefilling += 1
                take = int(min(P, budget))
                plan.append((r, take))
                budget -= take
                pf_tokens += take
            if not plan:  # every waiting request arrives later: idle until the first one
                t = max(t, waiting[0])
                continue
            dt = step_of(max(1, dec)) + pf_tokens * prefill_token_s
            t += dt
            steps += 1
            for r, take in plan:
                if take:
                    r[1] -= take
                    if r[1] <= 0:
                        prefilling -= 1
                        r[2], r[3] = 1.0, t
                        ttfts.append(t - r[0])
                else:
                    r[2] += g
        still = []
        for r in running:
            if r[1] <= 0 and r[2] >= out_len - 1e-9:
                done += 1
                tpots.append((t - r[3]) / (out_len - 1) if out_len > 1 else 0.0)
                if sent < n_total:
                    waiting.append(t + CLIENT_OVERHEAD_S)
                    sent += 1
            else:
                still.append(r)
        running = still
    ttfts.sort()
    return ClosedLoopRun(
        requests=done, mean_ttft_ms=round(statistics.fmean(ttfts) * 1e3, 1), median_ttft_ms=round(statistics.median(ttfts) * 1e3, 1),
        p99_ttft_ms=round(ttfts[min(len(ttfts) - 1, int(0.99 * len(ttfts)))] * 1e3, 1),
        mean_tpot_ms=round(statistics.fmean(tpots) * 1e3, 2) if tpots else 0.0,
        output_tok_s=round(done * out_len / t, 1) if t > 0 else 0.0, steps=steps,
    )  # fmt: skip
