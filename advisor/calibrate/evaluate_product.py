"""Leave-one-model-out score of the decision ``advisor recommend`` makes (not of the predictor alone).

For every scored seed row (model, corpus, host state) this runs :func:`advisor.plan.recommend.recommend`
itself — the bundled rules, the layout search and :func:`advisor.plan.choose.choose` with the policy
table's P(win) band, the measured-gain override and the memory planner: the decision ``advisor
recommend`` prints — with the predictor fitted without any row of that model
(``advisor.calibrate.evaluate.lomo_fits``), on the seed's host (8 x B200, host state as the row) and
traffic (the row's corpus, concurrency 32). Whether suffix decoding is launched (at whichever
layout the search chose) is then scored like the predictor-only policy: throughput of the chosen
option / the better of suffix and vanilla; a launched MTP or n-gram counts as "not suffix" (the
seed measured only suffix against vanilla).

The measured-gain override is in the code path but never fires here: the held-out model's only
measurements are the rows being scored, and using them would be the answer. A row in the probe
band is scored by what ``recommend`` launches without ``--probe`` (the rules' default); the count
of such rows is reported beside the score.
"""

from __future__ import annotations

from functools import partial

from advisor.domain.host import HostContext
from advisor.domain.prediction import RecommendedPrediction
from advisor.domain.workload import Workload
from advisor.hardware.gpus import get_gpu
from advisor.plan.planner import planner
from advisor.plan.recommend import recommend
from advisor.predict.api import predict
from advisor.predict.dataset import Observation, ProfileFn, SEED_GPU, seed_observations
from advisor.calibrate.evaluate import STATES, lomo_fits, writeup_tree
from advisor.calibrate.score import score
from advisor.rules.loader import load_rules


def _predictor(fitted, build: str | None):
    def _predict(profile, host, workload, k, tp):
        state = "ON" if host.dsa_enabled else "OFF"
        pred = predict(profile, get_gpu(host.gpu), tp, workload, host_state=state, k=k, fitted=fitted, build=build)
        # no probe record of the held-out model outside the scored rows: nothing measured
        return RecommendedPrediction.model_validate(pred.model_dump())

    return _predict


def product_recommendation(o: Observation, profile, fitted, rules, *, own_build: bool = False):
    """The Recommendation ``advisor recommend`` makes for seed row ``o`` (its host, state and
    traffic): the same :func:`advisor.plan.recommend.recommend` and choose() the CLI runs, with the
    predictor ``fitted`` (None: the shipped fit) — as shipped (the host profile ``predict`` matches
    to the row's host: 8 x B200 matches the seed host's profile by GPU, CPU and vLLM unverified, so
    the interval carries the spread of the known profiles), or with ``own_build`` the profile of the
    host the row was measured on, given outright."""
    host = HostContext(gpu=o.gpu or SEED_GPU, gpus=o.tp, origin="seed sweep host", dsa_enabled=o.host_state == "ON")
    workload = Workload(corpus=o.corpus, concurrency=o.concurrency)
    build = o.build if own_build else None
    mem_build = o.build if own_build else "release"
    return recommend(profile, host, workload, rules, predictor=_predictor(fitted, build),
                     planner=partial(planner, build=mem_build), build=mem_build)  # fmt: skip


def suffix_p_win(rec) -> float | None:
    """P(suffix wins) at the launched layout: the prediction's when suffix is launched, else the
    suffix candidate's there (the one the probe plan would settle)."""
    if rec.decision.speculative_method == "suffix":
        return rec.prediction.p_win if rec.prediction else None
    d = rec.decision
    same = (d.tensor_parallel_size, d.data_parallel_size, d.enable_expert_parallel)
    return next((c.p_win for c in rec.candidates if c.speculative_method == "suffix" and c.p_win is not None
                 and (c.tensor_parallel_size, c.data_parallel_size, c.enable_expert_parallel) == same), None)


def evaluate_product(profile_of: ProfileFn, *, observations: list[Observation] | None = None,
                     fits: dict | None = None, rules=None, own_build: bool = False) -> dict:  # fmt: skip
    """``{OFF: Score + unsure_rows, ON: …, method}``; ``fits`` from lomo_fits on the same observations;
    ``own_build``: see :func:`product_recommendation`."""
    obs = observations if observations is not None else seed_observations(replicates=True)
    fits = fits if fits is not None else lomo_fits(profile_of, obs)
    rules = rules if rules is not None else load_rules()
    scored = [o for o in obs if o.source == "seed"]
    out: dict = {}
    rows: dict[str, list] = {s: [] for s in STATES}
    unsure: dict[str, int] = {s: 0 for s in STATES}
    by_fit: dict[str, int] = {s: 0 for s in STATES}
    agree: dict[str, list[dict]] = {s: [] for s in STATES}
    for o in scored:
        profile = profile_of(o.model)
        rec = product_recommendation(o, profile, fits[o.model], rules, own_build=own_build)
        rows[o.host_state].append((o, rec.decision.speculative_method == "suffix"))
        agree[o.host_state].append({"model": o.model, "corpus": o.corpus, "product_suffix": rec.decision.speculative_method == "suffix",
                                    "writeup_tree_suffix": writeup_tree(o, profile.arch)})  # fmt: skip
        unsure[o.host_state] += rec.probe_plan is not None
        by_fit[o.host_state] += rec.probe_plan is not None and rec.probe_plan.why_kind == "fitted_terms"
    for state in STATES:
        same = [r for r in agree[state] if r["product_suffix"] == r["writeup_tree_suffix"]]
        out[state] = score(rows[state]).model_dump() | {
            "unsure_rows": unsure[state], "unsure_by_fitted_factor": by_fit[state],
            "agrees_with_writeup_tree": len(same), "rows": len(agree[state]),
            "differs_from_writeup_tree": [r for r in agree[state] if r not in same]}  # fmt: skip
    costs = ("the suffix-step costs of the build each row was measured on" if own_build else
             "as shipped: the host profile matched to the seed host by its GPU (CPU and vLLM unverified: interval widened by the known profiles' spread)")  # fmt: skip
    out["method"] = ("leave-one-model-out, scoring advisor recommend's own decision through choose() (bundled rules, "
                     "the layout search, rules constraining only where they require or forbid, the prediction ranking, measured overrides, "
                     f"memory planner) on the seed host, {costs}; suffix launched at any layout counts as suffix, MTP or "
                     "n-gram as not; unsure_rows = rows with a probe plan, scored as launched without --probe (unsure_by_fitted_factor: "
                     "of them, those whose P(win) is outside the band but whose gain the fitted terms move beyond the policy's "
                     "fitted_factor_within)")  # fmt: skip
    return out
