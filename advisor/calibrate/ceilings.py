"""How well *any* policy of a given shape could score on the seed sweep, fitted in hindsight.

These are not policies (each one sees the rows it is scored on); they bound what a predictor that
generalises from model features can reach under leave-one-model-out, which sees less:

- ``per_model_constant``: for every (model, host state) the better of "always suffix" and "always
  vanilla" over its corpora. A policy that cannot tell one corpus from another for a model scores
  at most this.
- ``additive_in_sample``: least squares of log gain on one effect per (model, host state) plus one
  per (corpus, host state), fitted on all rows, suffix where the fit is > 0. This is the best a
  model of the predictor's shape (a model part + a corpus part of log gain) does when it is told
  every model's own effect.
- ``state_flips``: (model, corpus) pairs whose winner differs between the two host states by more
  than ``FLIP_MARGIN`` on both sides. A policy that decides a pair the same way at both states
  (every profile-based one does, up to the host term) loses at least one of the two.
  ``against_host_term`` marks flips the host term cannot explain: the seed's ON state sped up
  vanilla (host-bound small models most), so it can only lower a gain, never raise it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from advisor.predict.dataset import Observation
from advisor.calibrate.score import score

FLIP_MARGIN = 0.10
"""|log gain| that counts as a clear win at both host states (≈ 10 %, above run-to-run noise)."""


def _score(pairs: Iterable[tuple[Observation, bool]]) -> dict:
    return score(list(pairs)).model_dump()


def _by_state(rows: list[Observation], choose) -> dict:
    return {s: _score((o, choose(o)) for o in rows if o.host_state == s) for s in sorted({o.host_state for o in rows})}


def per_model_constant(rows: list[Observation]) -> dict:
    """Best constant choice per (model, host state), in hindsight."""
    best: dict[tuple[str, str], bool] = {}
    for key in {(o.model, o.host_state) for o in rows}:
        mine = [o for o in rows if (o.model, o.host_state) == key]
        suffix = sum(math.log(o.suffix_tps / max(o.suffix_tps, o.vanilla_tps)) for o in mine)
        vanilla = sum(math.log(o.vanilla_tps / max(o.suffix_tps, o.vanilla_tps)) for o in mine)
        best[key] = suffix >= vanilla
    return _by_state(rows, lambda o: best[(o.model, o.host_state)])


def additive_in_sample(rows: list[Observation]) -> dict:
    """log gain ≈ a[model, state] + b[corpus, state], least squares on all rows, in hindsight."""
    import numpy as np

    keys_a = sorted({(o.model, o.host_state) for o in rows})
    keys_b = sorted({(o.corpus or "", o.host_state) for o in rows})
    col = {("a",) + k: i for i, k in enumerate(keys_a)} | {("b",) + k: len(keys_a) + i for i, k in enumerate(keys_b)}
    x = np.zeros((len(rows), len(col)))
    for i, o in enumerate(rows):
        x[i, col[("a", o.model, o.host_state)]] = 1.0
        x[i, col[("b", o.corpus or "", o.host_state)]] = 1.0
    y = np.array([math.log(o.gain) for o in rows])
    coef, *_ = np.linalg.lstsq(x, y, rcond=None)
    fitted = {id(o): float(v) for o, v in zip(rows, x @ coef)}
    return _by_state(rows, lambda o: fitted[id(o)] > 0)


def state_flips(rows: list[Observation]) -> list[dict]:
    """(model, corpus) pairs that clearly win at one host state and clearly lose at the other."""
    by_pair: dict[tuple[str, str], dict[str, Observation]] = {}
    for o in rows:
        by_pair.setdefault((o.label, o.corpus or ""), {})[o.host_state] = o
    out = []
    for (label, corpus), states in sorted(by_pair.items()):
        if {"OFF", "ON"} <= states.keys():
            g_off, g_on = math.log(states["OFF"].gain), math.log(states["ON"].gain)
            if min(abs(g_off), abs(g_on)) > FLIP_MARGIN and (g_off > 0) != (g_on > 0):
                out.append({"model": label, "corpus": corpus, "gain_OFF": round(states["OFF"].gain, 4),
                            "gain_ON": round(states["ON"].gain, 4),
                            "against_host_term": g_on > g_off})  # fmt: skip
    return out


def ceilings(rows: list[Observation]) -> dict:
    """The ``ceilings`` object of ``advisor calibrate --evaluate --json``."""
    return {
        "per_model_constant": per_model_constant(rows),
        "additive_in_sample": additive_in_sample(rows),
        "state_flips": state_flips(rows),
        "note": "fitted in hindsight on the rows they are scored on: upper bounds for policies of that shape, not policies",
    }
