"""What to probe when the prediction is unsure (pure: returns the plan, runs nothing).

A recommendation is "unsure" where the rules leave the speculation choice to the prediction and
P(suffix wins) lies inside the band in which the prediction is not trusted to flip a rule's default
(the policy table's ``p_win`` band, advisor.rules.policy), or where the fitted terms move the
mechanism's K̄ / R by more than the policy's ``fitted_factor_within`` (the mechanism does not explain
this model on this host class, so the prediction rests on a fit). The plan is the one campaign that settles it: vanilla and
suffix at the recommended K, on the user's traffic where known, with the recommended server
settings. ``advisor recommend --probe`` runs it and recommends again from the recalibrated
predictor; without ``--probe`` the command is printed for the user to run.
"""

from __future__ import annotations

import shlex

from advisor.domain.corpora import DEFAULT_PROBE_CORPUS, PROBE_CORPORA
from advisor.domain.decision import Decision
from advisor.domain.prediction import RecommendedPrediction
from advisor.domain.probe_plan import ProbePlan
from advisor.domain.workload import Workload
from advisor.rules.policy import load_policy


def probe_plan(
    model_id: str,
    decision: Decision,
    workload: Workload,
    prediction: RecommendedPrediction | None,
    *,
    policy: str,
    k: int,
    low: float,
    high: float,
    fitted_within: float | None = None,
    run_sigma: float = 0.0,
) -> ProbePlan | None:
    """The plan, or None when the recommendation is settled: the rules decide, this host already
    measured it, or P(win) is outside [low, high] and |ln fitted_factor| <= ``fitted_within``.
    ``run_sigma``: the host class's measured run-to-run sigma of ln R (HostProfile.suffix_run_sigma); above the
    predicted margin |ln gain| the plan boots each configuration the policy table's ``probe_repeat_passes`` times."""
    import math

    if prediction is None or policy in ("required", "forbidden") or prediction.measured:
        return None
    p_win = prediction.p_win
    ff = prediction.decomposition.fitted_factor
    fitted = fitted_within is not None and ff > 0 and abs(math.log(ff)) > fitted_within
    if not (low <= p_win <= high) and not fitted:
        return None
    note = None
    if workload.corpus_is_file and workload.corpus:
        corpus = workload.corpus
    elif workload.corpus in PROBE_CORPORA:
        corpus = workload.corpus
    else:
        corpus = DEFAULT_PROBE_CORPUS
        what = f"corpus {workload.corpus!r}" if workload.corpus else "no corpus"
        note = (f"{what} given and no probe corpus of that name ships: probing on {corpus}; "
                "pass --corpus FILE with prompts of your own traffic to probe on it instead")  # fmt: skip
    configs = f"vanilla,suffix:{k}"
    gmu = decision.gpu_memory_utilization
    argv = [
        "advisor", "probe", model_id, "--corpus", corpus, "--configs", configs,
        "--tp", str(decision.tensor_parallel_size), "--gpu-memory-utilization", f"{gmu:g}",
        "--max-model-len", str(decision.max_model_len), "--concurrency", str(workload.concurrency),
    ]  # fmt: skip
    if decision.max_num_seqs:
        argv += ["--max-num-seqs", str(decision.max_num_seqs)]
    margin = abs(math.log(prediction.gain)) if prediction.gain > 0 else 0.0
    passes = load_policy().probe_repeat_passes if run_sigma > margin else 1
    if passes > 1:
        argv += ["--repeat", str(passes)]
    head = f"suffix K={k} against plain decoding at TP {decision.tensor_parallel_size}, {workload.concurrency} running per replica: "
    if low <= p_win <= high:
        why = f"P(win)={p_win:.2f} is inside [{low:.2f}, {high:.2f}], where the prediction does not decide on its own"
    else:
        why = (f"the fitted terms multiply the mechanism's K̄ / R by x{ff:.2f} (|ln| {abs(math.log(ff)):.2f} > "
               f"{fitted_within:.2f}): the prediction rests on a fit, not on mechanism")  # fmt: skip
    if passes > 1:
        why += (f"; R varies sigma(ln R) {run_sigma:.2f} from one boot to the next on this host class, more than the "
                f"predicted margin |ln {prediction.gain:.2f}| = {margin:.2f}: {passes} boots of each, their median decides")  # fmt: skip
    return ProbePlan(
        reason=head + why, why_kind="p_win_band" if low <= p_win <= high else "fitted_terms",
        model=model_id, corpus=corpus, corpus_note=note, configs=configs,
        tensor_parallel_size=decision.tensor_parallel_size, gpu_memory_utilization=gmu,
        max_model_len=decision.max_model_len, concurrency=workload.concurrency, passes=passes,
        argv=argv, command=" ".join(shlex.quote(a) for a in argv),
    )  # fmt: skip
