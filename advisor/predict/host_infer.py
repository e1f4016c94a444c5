"""Infer a host's speculative-step cost from measured gains (the seed host's profile).

The seed host (8 x B200, the write-up's vLLM 1.7.dev build) was never timed step by step, but its
rows constrain it: one K̄ per corpus and family group is shared by every model, while a fixed host
cost per verification step raises R far more for a small model (a short plain step) than for a
large one. So the cost that best predicts each model's gains from the *other* models' K̄ priors
with K̄ / R alone (no fitted term) is the host's. Every seed row ran at concurrency 32, so only
``per_step + 32 x per_sequence`` is identified; the grid's tie-break takes the smaller per-sequence
share.

``infer(observations, profile_of)`` scores the grid and returns the best pair with the table; a test
checks that the shipped ``seed-b200`` row of calibration/host_profiles.csv is that pair.
"""

from __future__ import annotations

import math
import statistics

from advisor.hardware.gpus import get_gpu
from advisor.predict import host_profile as hp
from advisor.predict import kbar_prior as kp
from advisor.predict.dataset import Observation, ProfileFn
from advisor.predict.stepcost import r_ratio

GRID_STEP_S = (0.0, 0.25e-3, 0.5e-3, 1e-3, 2e-3, 3.75e-3)
"""Per-step candidates (0 to the H200's measured 3.75 ms)."""
GRID_PER_SEQ_S = (0.0, 10e-6, 20e-6, 60e-6, 120e-6)
"""Per-sequence candidates (0 to the H200's measured 120 us)."""


def _candidate(base: str, a: float, b: float) -> str:
    src = hp.get(base)
    name = f"{src.id}?{a:.6f}/{b:.6f}"
    hp.register(src.model_copy(update={"id": name, "aliases": "", "suffix_step_s": a, "suffix_per_seq_s": b,
                                       "provenance": "candidate", "source": "host_infer"}))  # fmt: skip
    return name


def lomo_error(observations: list[Observation], profile_of: ProfileFn, build: str) -> tuple[float, float]:
    """(median |ln(pred/meas)|, median signed) of the gains predicted by K̄ / R alone, K̄ from the
    other models' implied priors, R with host profile ``build``."""
    rows = [o.model_copy(update={"build": build}) for o in observations if o.corpus]
    implied = [(o.model, o.corpus, o.family, kp.implied_kbar(o, profile_of(o.model))) for o in rows]
    errs = []
    for m in sorted({o.model for o in rows}):
        priors = kp.derive([r for r in implied if r[0] != m], "held out")
        for o in (o for o in rows if o.model == m):
            p = profile_of(m)
            kb, _ = kp.lookup(priors, o.corpus, p.family)
            ctx = kp.shape_for(o.corpus).context(p.family)
            r = r_ratio(p, get_gpu(o.gpu), o.tp, concurrency=o.concurrency, draft_tokens=kp.draft_tokens(kb, o.k),
                        context=ctx, k=o.k, build=build).r  # fmt: skip
            errs.append(math.log(kb / r / o.gain))
    return statistics.median(abs(e) for e in errs), statistics.median(errs)


def infer(observations: list[Observation], profile_of: ProfileFn, base: str = "seed") -> dict:
    """Best (per_step, per_sequence) suffix cost for the host of ``observations`` on the grid."""
    table = []
    for a in GRID_STEP_S:
        for b in GRID_PER_SEQ_S:
            med, bias = lomo_error(observations, profile_of, _candidate(base, a, b))
            table.append({"suffix_step_s": a, "suffix_per_seq_s": b, "median_abs_log_gain": round(med, 4),
                          "median_log_gain": round(bias, 4)})  # fmt: skip
    best = min(table, key=lambda t: (t["median_abs_log_gain"], t["suffix_per_seq_s"], t["suffix_step_s"]))
    return {"best": best, "grid": table,
            "method": "leave-one-model-out K̄/R with no fitted term; K̄ priors from the other models through the "
                      "candidate cost; only per_step + 32 x per_sequence is identified (all rows at concurrency 32)"}  # fmt: skip
