"""Leave-one-model-out evaluation of the predictor against the seed sweep, with baselines.

For each of the seed's models: fit on the other models' rows only (K̄ priors re-derived, per-model
effects of the held-out model absent), predict its rows, choose suffix when P(win) > 0.5, and
score each host state separately by the throughput of the chosen option over the better of the
two (van_off/suf_off for OFF, van_on/suf_on for ON; rows with a missing value are dropped).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from pydantic import BaseModel, ConfigDict

from advisor.predict.dataset import Observation, ProfileFn, seed_observations
from advisor.calibrate.score import score

STATES = ("OFF", "ON")


class RowResult(BaseModel):
    """One held-out (model, corpus, host state) row."""

    model_config = ConfigDict(extra="forbid")

    model: str
    label: str
    corpus: str
    host_state: str
    gain: float
    predicted_gain: float
    p_win: float
    chose_suffix: bool
    frac: float
    """Throughput of the chosen option / the better of suffix and vanilla."""


def writeup_tree(o: Observation, arch: str) -> bool:
    """The seed write-up's decision table as rules (True = suffix).

    Dense instruct → suffix; DS-Distill-Qwen-32B → suffix (+DSA env; the env is ignored here);
    DS-Distill-Llama-70B → suffix on mix only; 671B MoE → vanilla.
    """
    if arch == "moe":
        return False
    if o.model.endswith("DeepSeek-R1-Distill-Llama-70B"):
        return o.corpus == "mix"
    return True


def lomo_fits(profile_of: ProfileFn, observations: list[Observation], progress: Callable[[str], None] | None = None) -> dict:
    """{held-out model: the model fitted without any of its rows} for every seed model."""
    from advisor.predict.calibrated import fit

    out = {}
    for m in sorted({o.model for o in observations if o.source == "seed"}):
        if progress:
            progress(m)
        out[m] = fit(observations, profile_of, exclude_model=m)
    return out


def evaluate(profile_of: ProfileFn, *, observations: list[Observation] | None = None,
             progress: Callable[[str], None] | None = None, fits: dict | None = None) -> dict:  # fmt: skip
    """Run leave-one-model-out and the baselines; returns the ``--json`` object (``fits``: from
    :func:`lomo_fits` on the same observations, to reuse them)."""
    from advisor.predict.api import decide_p
    from advisor.predict.calibrated import inputs_for

    obs = observations if observations is not None else seed_observations(replicates=True)
    scored = [o for o in obs if o.source == "seed"]
    models = sorted({o.model for o in scored})
    fits = fits if fits is not None else lomo_fits(profile_of, obs, progress)
    results: list[RowResult] = []
    for m in models:
        model = fits[m]
        for o in (o for o in scored if o.model == m):
            pred = model.predict_row(inputs_for(o, profile_of(o.model)), model_id=o.model)
            p_win = 0.5 * (1.0 + math.erf(pred.mu / (pred.sigma * math.sqrt(2.0))))
            suffix = decide_p(p_win)
            best = max(o.suffix_tps, o.vanilla_tps)
            results.append(RowResult(model=o.model, label=o.label, corpus=o.corpus or "", host_state=o.host_state, gain=round(o.gain, 4),
                                     predicted_gain=round(math.exp(pred.mu), 4), p_win=round(p_win, 4), chose_suffix=suffix,
                                     frac=round((o.suffix_tps if suffix else o.vanilla_tps) / best, 4)))  # fmt: skip
    by_key = {(r.model, r.corpus, r.host_state): r for r in results}
    arch = {m: profile_of(m).arch for m in models}
    out: dict = {"lomo": {}, "baselines": {"always_suffix": {}, "always_vanilla": {}, "writeup_tree": {}}, "per_model": {}}
    for state in STATES:
        rows = [o for o in scored if o.host_state == state]
        out["lomo"][state] = score([(o, by_key[(o.model, o.corpus, state)].chose_suffix) for o in rows]).model_dump()
        out["baselines"]["always_suffix"][state] = score([(o, True) for o in rows]).model_dump()
        out["baselines"]["always_vanilla"][state] = score([(o, False) for o in rows]).model_dump()
        out["baselines"]["writeup_tree"][state] = score([(o, writeup_tree(o, arch[o.model])) for o in rows]).model_dump()
    for m in models:
        label = next(r.label for r in results if r.model == m)
        entry: dict = {"model": m}
        for state in STATES:
            rows = [(o, by_key[(o.model, o.corpus, state)].chose_suffix) for o in scored if o.model == m and o.host_state == state]
            if rows:
                entry[state] = score(rows).model_dump()
        entry["rows"] = [r.model_dump(exclude={"model", "label"}) for r in results if r.model == m]
        out["per_model"][label] = entry
    from advisor.calibrate.ceilings import ceilings

    out["ceilings"] = ceilings(scored)
    out["method"] = ("leave-one-model-out over the seed's models: fit on the others (priors re-derived), "
                     "choose suffix when P(win) > 0.5; frac = chosen / best of suffix and vanilla at the same host state")  # fmt: skip
    return out
