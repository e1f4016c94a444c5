"""Serving figures under load: TPOT and TTFT of one replica at an operating point (pure).

An operating point is what vLLM's scheduler is given — ``max_num_seqs`` (b) and
``max_num_batched_tokens`` (M, chunked prefill on, vLLM V1's default) — and the load offered to
one replica: ``c`` requests in flight (a closed loop: ``vllm bench serve --max-concurrency c``) or
``λ`` requests per second (an open loop: ``--request-rate``). Each request has P prompt and O output
tokens. The scheduler (vllm/v1/core/sched/scheduler.py ``schedule``) gives the token budget M to
the running requests' decode tokens first and the rest to waiting requests' prefill, chunked; a
request waits for a slot while b are running.

Terms (n running sequences, g tokens per sequence per step, q tokens scheduled per sequence per
step — 1 plain, 1 + drafts with speculation —, t_d(n) one decode step, c_p the prefill cost of one
prompt token riding in a decode step: :func:`advisor.predict.absolute.prefill_marginal` / P):

    n          = min(c | λ·L, b, KV slots, M / q)            running sequences
    d          = n · g · P / O                              prefill tokens each step must absorb
    room       = M − n · q                                  budget left for prefill per step
    n         <= UTIL_CAP · M / (g·P/O + UTIL_CAP · q)      else prefill cannot keep up (budget-bound)
    t          = t_d(n) + d · c_p                           mean step (chunked-prefill interference)
    TPOT       = t / g;   replica tok/s = n · g / t
    s          = max(ceil(P / room) · (t_d(n) + min(P, room) · c_p), t_p)   a prompt's own prefill, chunked
    ρ          = d / room;  W = ρ / (2 (1 − ρ)) · s          wait for the prefill budget (M/D/1, ASSUMED)
    L          = s + W + O · TPOT                           one request's life
    slot wait  = (c − n) / n · L  (closed loop)  |  Erlang C over b slots of service L (open loop, ASSUMED)
    TTFT       = s + W + slot wait

``ttft_unloaded_ms`` — t_p, one prompt prefilled alone in one step (vLLM samples the first token in
that step) — is a lower bound of TTFT at any load and is reported as one. The closed loop with c <= b has no slot wait;
c > b waits ``(c − b) / b`` lives (each slot frees once per life). Units: seconds, tokens.
"""

from __future__ import annotations

import math
from typing import Callable

from pydantic import Field

from advisor.domain.prediction import Band
from advisor.predict.absolute import PREFILL_BAND, STEP_BAND, ServingFigures

UTIL_CAP = 0.95
"""ASSUMED: the highest utilisation of the prefill budget or of the slots a steady state is
predicted at; above it the queue's wait grows without bound in the formulas above (1 / (1 − ρ))."""
QUEUE_NOTE = ("TTFT queueing: prefill-budget wait M/D/1 and open-loop slot wait Erlang C (ASSUMED Poisson arrivals); "
              "chunked prefill interference = prompt FLOPs spread over decode steps (MEASURED prefill cost on the H200 grid)")  # fmt: skip


class LoadedFigures(ServingFigures):
    """:class:`ServingFigures` at an operating point, with what the load adds to TTFT."""

    max_num_seqs: int = Field(ge=1)
    max_num_batched_tokens: int = Field(ge=1)
    offered_per_replica: float | None = Field(default=None, ge=0)
    """Requests in flight per replica: the given concurrency (closed loop) or λ x life (open loop); None when
    the queue grows without bound (``stable`` False)."""
    request_rate_per_replica: float = Field(ge=0)
    """Requests a replica completes per second in the steady state."""
    ttft_unloaded_ms: float
    """Lower bound: one prompt prefilled alone in one step (no queue, no interference)."""
    ttft_prefill_wait_ms: float
    """Mean wait for the chunked-prefill token budget (M/D/1)."""
    ttft_slot_wait_ms: float | None = None
    """Mean wait for one of the max_num_seqs slots (None: unbounded, ``stable`` False)."""
    prefill_share: float
    """Share of the per-step prefill budget the steady state uses (ρ)."""
    tok_s_per_user: float
    """Output tokens per second one user sees (1000 / TPOT ms)."""
    stable: bool
    """False where the offered rate exceeds what the replica serves at the mid or the slow end of the bands
    (the queue grows): figures at capacity, ``ttft_ms`` None (no steady state) and ``ttft_unbounded`` says why."""
    limit: str
    """What bounds the running sequences: offered load, max_num_seqs, KV cache, token budget or prefill."""


def busy_replicas(concurrency: int, dp: int) -> float:
    """Replicas' worth of a host of ``dp`` replicas that a closed loop of ``concurrency`` requests keeps busy:
    vLLM's DP coordinator spreads requests over the replicas, each runs ceil(C / DP) at most, so the host
    serves C requests, i.e. C / ceil(C / DP) replicas of that batch (all ``dp`` when C is a multiple of DP;
    fewer requests than replicas leave replicas idle, and idle replicas add no tokens per second)."""
    per = -(-max(1, concurrency) // max(1, dp))
    return min(float(dp), max(1, concurrency) / per)


def erlang_c_wait(servers: int, arrival: float, service: float) -> float:
    """Mean wait in an M/M/c queue (Erlang C) with ``servers`` slots, ``arrival`` /s, mean ``service`` s."""
    a = arrival * service
    if a >= servers:
        return math.inf
    b = 1.0
    for k in range(1, servers + 1):
        b = a * b / (k + a * b)
    rho = a / servers
    c = b / (1 - rho * (1 - b))
    return c * service / (servers - a)


class _Shape:
    """Everything about a replica that does not change with n (closures over the step model)."""

    def __init__(self, step_of: Callable[[int], float], prefill_token_s: float, prefill_alone_s: float, prompt_len: int,
                 output_len: int, gain: float, tokens_per_seq: float, seqs: int, budget: int, kv_slots: int):  # fmt: skip
        self.step_of, self.cp, self.alone = step_of, prefill_token_s, prefill_alone_s
        self.P, self.O, self.g, self.q = prompt_len, output_len, gain, tokens_per_seq
        self.b, self.M, self.kv = seqs, budget, max(1, kv_slots)

    def cap(self) -> tuple[int, str]:
        """Most sequences that can run, and what bounds them."""
        caps = [(self.b, "max_num_seqs"), (self.kv, "KV cache"), (int(self.M // self.q), "token budget"),
                (int(UTIL_CAP * self.M / (self.g * self.P / self.O + UTIL_CAP * self.q)), "prefill budget")]  # fmt: skip
        n, why = min(caps, key=lambda x: x[0])
        return max(1, n), why

    def at(self, n: float) -> dict:
        """Steady-state terms at n running sequences (n may be fractional in the open-loop fixed point)."""
        n = max(1.0, n)
        t_d = self.step_of(max(1, math.ceil(n)))
        d = n * self.g * self.P / self.O
        room = max(1.0, self.M - n * self.q)
        t = t_d + d * self.cp
        tpot = t / self.g
        chunks = math.ceil(self.P / room)
        s = max(chunks * (t_d + min(self.P, room) * self.cp), self.alone)
        rho = min(d / room, UTIL_CAP)
        w = rho / (2 * (1 - rho)) * s
        life = s + w + self.O * tpot
        return {"n": n, "t_d": t_d, "t": t, "tpot": tpot, "s": s, "w": w, "rho": d / room, "life": life}


def operating_figures(step_of: Callable[[int], float], *, prefill_token_s: float, prefill_alone_s: float, prompt_len: int,
                      output_len: int, max_num_seqs: int, max_num_batched_tokens: int, kv_slots: int, dp: int = 1,
                      concurrency: int | None = None, rate: float | None = None, gain: Band | None = None,
                      tokens_per_seq: float = 1.0, notes: list[str] | None = None,
                      busy: float | None = None) -> LoadedFigures:  # fmt: skip
    """Loaded figures of one operating point over ``dp`` replicas, at mid, fast and slow ends
    (decode step ±STEP_BAND, prefill ±PREFILL_BAND, the gain's interval). ``step_of(n)``: seconds of one
    plain decode step at n running; ``concurrency``/``rate``: per replica (exactly one of them).
    ``busy``: replicas' worth of the host that has requests (:func:`busy_replicas`; None: all ``dp``),
    which host tok/s counts: a replica with no request produces nothing."""
    if (concurrency is None) == (rate is None):
        raise ValueError("give exactly one of concurrency (closed loop) or rate (open loop) per replica")
    g = gain or Band(value=1.0, low=1.0, high=1.0)
    ends = {"mid": (1.0, 1.0, g.value), "fast": (1 - STEP_BAND, 1 - PREFILL_BAND, g.high),
            "slow": (1 + STEP_BAND, 1 + PREFILL_BAND, g.low)}  # fmt: skip
    out = {}
    for name, (fs, fp, gg) in ends.items():
        sh = _Shape(lambda n, fs=fs: step_of(n) * fs, prefill_token_s * fp, prefill_alone_s * fp, prompt_len, output_len,
                    gg, tokens_per_seq, max_num_seqs, max_num_batched_tokens, kv_slots)  # fmt: skip
        out[name] = _solve(sh, concurrency, rate)
    m = out["mid"]
    r = lambda x, d=1: round(x, d)  # noqa: E731
    ms = lambda e, k: e[k] * 1e3  # noqa: E731
    unloaded = prefill_alone_s
    busy = dp if busy is None else min(float(dp), busy)
    stable = m["stable"] and out["slow"]["stable"]
    # a growing queue has no steady-state TTFT: None, and the reason, never a stand-in number
    ttft = (Band(value=r(ms(m, "ttft")), low=r(ms(out["fast"], "ttft")), high=r(ms(out["slow"], "ttft")))
            if stable else None)  # fmt: skip
    return LoadedFigures(
        throughput_tok_s=Band(value=r(m["tok_s"] * busy, 0), low=r(out["slow"]["tok_s"] * busy, 0), high=r(out["fast"]["tok_s"] * busy, 0)),
        tpot_ms=Band(value=r(ms(m, "tpot"), 2), low=r(ms(out["fast"], "tpot"), 2), high=r(ms(out["slow"], "tpot"), 2)),
        ttft_ms=ttft,
        ttft_unbounded=None if stable else (f"no steady state: the offered rate exceeds what a replica serves "
                                            f"({m['req_s']:.2f} requests/s at {m['limit']}); the queue, and TTFT, grow without bound"),
        step_ms=Band(value=r(m["t_d"] * 1e3, 3), low=r(m["t_d"] * (1 - STEP_BAND) * 1e3, 3), high=r(m["t_d"] * (1 + STEP_BAND) * 1e3, 3)),
        prefill_ms=Band(value=r(prefill_alone_s * 1e3, 2), low=r(prefill_alone_s * (1 - PREFILL_BAND) * 1e3, 2),
                        high=r(prefill_alone_s * (1 + PREFILL_BAND) * 1e3, 2)),
        running_per_replica=max(1, round(m["n"])), waiting_per_replica=r(m["waiting"]) if stable else None, gain=gain,
        notes=[*(notes or []), QUEUE_NOTE],
        max_num_seqs=max_num_seqs, max_num_batched_tokens=max_num_batched_tokens,
        offered_per_replica=r(m["offered"]) if stable else None, request_rate_per_replica=round(m["req_s"], 3),
        ttft_unloaded_ms=r(unloaded * 1e3), ttft_prefill_wait_ms=r(ms(m, "w")),
        ttft_slot_wait_ms=r(ms(m, "slot")) if stable else None,
        prefill_share=round(m["rho"], 3), tok_s_per_user=r(1.0 / m["tpot"]), stable=stable, busy_replicas=round(busy, 3),
        limit=m["limit"],
    )  # fmt: skip


def _solve(sh: _Shape, concurrency: int | None, rate: float | None) -> dict:
    n_max, why = sh.cap()
    if concurrency is not None:
        n = min(concurrency, n_max)
        e = sh.at(n)
        slot = max(0, concurrency - n) / n * e["life"]
        limit = "offered load" if concurrency <= n_max else why
        return {**e, "slot": slot, "ttft": e["s"] + e["w"] + slot, "tok_s": e["n"] * sh.g / e["t"],
                "req_s": e["n"] / e["life"], "offered": concurrency, "waiting": max(0, concurrency - n),
                "stable": True, "limit": limit}  # fmt: skip
    full = sh.at(n_max)
    cap_rate = n_max / full["life"]
    if rate >= UTIL_CAP * cap_rate:  # the queue grows: report the replica at capacity, unstable
        return {**full, "slot": math.inf, "ttft": math.inf, "tok_s": full["n"] * sh.g / full["t"], "req_s": cap_rate,
                "offered": math.inf, "waiting": math.inf, "stable": False, "limit": why}  # fmt: skip
    n = 1.0
    for _ in range(40):  # Little's law fixed point: running = rate x life(running), capped at n_max
        e = sh.at(n)
        n_new = min(rate * e["life"], n_max)
        if abs(n_new - n) < 1e-3:
            break
        n = (n + n_new) / 2
    e = sh.at(n)
    slot = erlang_c_wait(n_max, rate, e["life"]) if rate * e["life"] > 0.5 * n_max else 0.0
    return {**e, "slot": slot, "ttft": e["s"] + e["w"] + slot, "tok_s": rate * sh.O, "req_s": rate,
            "offered": rate * (e["life"] + slot), "waiting": rate * slot, "stable": True,
            "limit": "offered load" if n < n_max - 0.5 else why}  # fmt: skip
