"""Assemble a Recommendation: rules -> prediction -> memory plan -> Decision (pure)."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from pydantic import BaseModel

from advisor.domain.corpora import SEED_CORPORA
from advisor.domain.decision import DSA_ENV, Decision
from advisor.domain.host import HostContext
from advisor.domain.prediction import RecommendedPrediction
from advisor.domain.recommendation import Recommendation
from advisor.domain.workload import Workload
from advisor.model.schema import ModelProfile
from advisor.plan.seams import MemoryPlanner, Predictor
from advisor.rules.engine import RulesOutcome, apply_rules
from advisor.rules.schema import Rule
from advisor.vllm_facts import facts as _facts

MAX_DRAFT_AT_DEFAULTS = _facts().suffix_draft_cap
"""Longest suffix draft at vLLM's defaults: match length + draft length ≤ the tree depth and draft ≤
max_spec_factor x match length (advisor.vllm_facts suffix_draft_cap; docs/kbar.md)."""
# How confident a prediction must be to flip a rule's default (P(suffix wins)).
FLIP_OFF_BELOW = 0.30
FLIP_ON_ABOVE = 0.70


def corpus_kind(workload: Workload) -> str:
    """``mix``, ``single`` (a seed corpus name), ``file`` or ``unknown``."""
    if workload.corpus is None:
        return "unknown"
    if workload.corpus_is_file:
        return "file"
    if workload.corpus == "mix":
        return "mix"
    return "single" if workload.corpus in SEED_CORPORA else "unknown"


def build_facts(profile: ModelProfile, host: HostContext, workload: Workload) -> dict[str, Any]:
    """Flat fact namespace the rules' ``when`` clauses read (exactly :func:`fact_names`)."""
    names = fact_names()
    facts: dict[str, Any] = {f"model.{k}": v for k, v in profile.inspect_json().items()}
    facts.update({f"host.{k}": v for k, v in host.model_dump().items()})
    facts.update({f"workload.{k}": v for k, v in workload.model_dump().items()})
    facts["workload.corpus_kind"] = corpus_kind(workload)
    return {k: v for k, v in facts.items() if k in names}


def tp_refusal(profile: ModelProfile, tp: int) -> str | None:
    """Why vLLM would refuse tensor_parallel_size ``tp`` for this model, or None (advisor.model.tp_rules)."""
    from advisor.model.tp_rules import tp_refusal as refusal

    return refusal(profile, tp)


def _scalar(annotation) -> bool:
    """True for field types build_facts keeps (not lists, dicts or nested models)."""
    import types
    import typing

    origin = typing.get_origin(annotation)
    if origin in (list, dict):
        return False
    if origin in (typing.Union, types.UnionType):
        return all(_scalar(a) for a in typing.get_args(annotation) if a is not type(None))
    return not (isinstance(annotation, type) and issubclass(annotation, BaseModel))


@lru_cache(maxsize=1)
def fact_names() -> frozenset[str]:
    """Every fact :func:`build_facts` can set: what a rule's ``when`` may test."""
    names = {f"model.{n}" for n, f in ModelProfile.model_fields.items() if _scalar(f.annotation)}
    names |= {f"host.{n}" for n, f in HostContext.model_fields.items() if _scalar(f.annotation)}
    names |= {f"workload.{n}" for n, f in Workload.model_fields.items() if _scalar(f.annotation)}
    return frozenset(names | {"workload.corpus_kind"})


def valid_tp(profile: ModelProfile, gpus: int) -> int:
    """Largest tensor-parallel size <= gpus that vLLM accepts for this model (:func:`tp_refusal`)."""
    for tp in range(gpus, 0, -1):
        if tp_refusal(profile, tp) is None:
            return tp
    return 1


def _speculate(outcome: RulesOutcome, prediction: RecommendedPrediction | None, trace: list[str]) -> bool:
    policy, rule = outcome.speculation, outcome.speculation_rule or "default"
    p_win = prediction.p_win if prediction else None
    if policy == "required":
        trace.append(f"rule {rule} requires suffix decoding; the prediction does not override it")
        return True
    if policy == "forbidden":
        trace.append(f"rule {rule} forbids suffix decoding; the prediction does not override it")
        return False
    measured = prediction.measured if prediction else None
    for n in prediction.measured_near if prediction else []:
        how = ("it only informs the calibrated fit" if n.fitted else
               "nor fitted: a probe without a GPU says nothing about a GPU's gain")  # fmt: skip
        trace.append(f"probe campaign {n.campaign} measured suffix at {n.gain:.2f}x vanilla for this model, traffic and "
                     f"K, but not for this deployment ({'; '.join(n.differs)}): not used to decide ({how})")  # fmt: skip
    if measured:
        on = measured.gain > 1.0
        trace.append(
            f"rule {rule} sets {policy}; probes on this host measured suffix at {measured.gain:.2f}x vanilla "
            f"({measured.runs} run(s), campaign {', '.join(measured.campaigns)}): suffix {'on' if on else 'off'} "
            f"(the measurement outranks the prediction, P(win)={p_win:.2f})"
        )
        return on
    if p_win is None:
        on = policy == "default_on"
        trace.append(f"rule {rule} sets {policy}; no prediction available, so suffix is {'on' if on else 'off'}")
        return on
    if policy == "default_on":
        on = p_win >= FLIP_OFF_BELOW
        trace.append(
            f"rule {rule} sets default_on; predicted P(win)={p_win:.2f} "
            + ("keeps suffix on" if on else f"< {FLIP_OFF_BELOW}: the prediction turns suffix off")
        )
        return on
    if policy == "default_off":
        on = p_win > FLIP_ON_ABOVE
        trace.append(
            f"rule {rule} sets default_off; predicted P(win)={p_win:.2f} "
            + (f"> {FLIP_ON_ABOVE}: the prediction turns suffix on" if on else "keeps suffix off")
        )
        return on
    on = p_win >= 0.5
    trace.append(f"rules leave the choice open; the prediction decides: P(win)={p_win:.2f} -> suffix {'on' if on else 'off'}")
    return on


FIXED_BY = {"tensor_parallel_size": "--tp", "max_model_len": "--max-model-len", "num_speculative_tokens": "--k",
            "gpu_memory_utilization": "--gmu"}
"""Decision fields a user's flag sets; the memory planner never changes those (advisor.plan.planner.planner)."""


def _k_trace(k: int, trace: list[str]) -> None:
    if k > MAX_DRAFT_AT_DEFAULTS:
        trace.append(
            f"K={k}: at vLLM's default suffix_decoding_max_tree_depth ({_facts().suffix_max_tree_depth}) and max_spec_factor "
            f"({_facts().suffix_max_spec_factor:g}) a draft is at most "
            f"{MAX_DRAFT_AT_DEFAULTS} tokens in advisor kbar's replays through Arctic Inference (docs/kbar.md), so any "
            f"K >= {MAX_DRAFT_AT_DEFAULTS} drafts the same there; so did real vLLM 0.26.0 behind `vllm serve` on an "
            "H200 at K=32 (advisor probe: 11.1 tokens per draft, none accepted past position 12; "
            "calibration/gpu_probes/), though its offline engine drafted 15 per step on a single repeated dummy-weight "
            "token (calibration/gpu_steps/README.md); the seed measured K=32"
        )
    else:
        trace.append(f"K={k}: a draft of at most {k} token(s) emits at most {k + 1} tokens per step (K̄ <= 1 + K); "
                     "the seed measured K=32, so K̄ at this K is scaled from it")  # fmt: skip


def recommend(
    profile: ModelProfile,
    host: HostContext,
    workload: Workload,
    rules: list[Rule],
    *,
    tensor_parallel_size: int | None = None,
    max_model_len: int | None = None,
    num_speculative_tokens: int | None = None,
    gpu_memory_utilization: float | None = None,
    predictor: Predictor | None = None,
    planner: MemoryPlanner | None = None,
) -> Recommendation:
    """The whole decision. The :class:`~advisor.plan.seams.Predictor` and the
    :class:`~advisor.plan.seams.MemoryPlanner` are injected so that this function stays pure and
    testable (advisor.plan.predictor.predictor and advisor.plan.planner.planner are the real ones). The prediction is for the final
    decision's TP and K (after the memory planner); the user's flags are never changed silently."""
    from advisor.errors import UsageError

    if tensor_parallel_size is not None:
        why = tp_refusal(profile, tensor_parallel_size)
        if why:
            raise UsageError(f"--tp {tensor_parallel_size}: {why} (vLLM rejects it); "
                             f"the largest valid TP on {host.gpus} GPUs is {valid_tp(profile, host.gpus)}")  # fmt: skip
    outcome = apply_rules(rules, build_facts(profile, host, workload))
    fields = dict(outcome.fields)
    k = num_speculative_tokens or fields.get("num_speculative_tokens") or 32
    warnings = list(host.notes) + list(workload.notes) + list(outcome.warnings)
    trace: list[str] = []
    tp = tensor_parallel_size or valid_tp(profile, host.gpus)
    if tensor_parallel_size is None and tp != host.gpus:
        trace.append(f"tensor_parallel_size {host.gpus}: {tp_refusal(profile, host.gpus)}; using {tp}")
        if host.gpus // tp > 1:
            warnings.append(f"TP {tp} uses {tp} of {host.gpus} GPUs: run {host.gpus // tp} replicas (e.g. --data-parallel-size {host.gpus // tp}) to use them all")
    prediction = predictor(profile, host, workload, k, tp) if predictor else None
    spec_trace: list[str] = []
    on = _speculate(outcome, prediction, spec_trace)
    why_spec = spec_trace[-1] if spec_trace else "no prediction"
    env = dict(outcome.env)
    dsa_env = bool(fields.get("dsa_env", False))
    if dsa_env:
        env.update(DSA_ENV)
    mml = max_model_len or fields.get("max_model_len") or 16384
    if mml > profile.max_context:
        line = f"max_model_len {mml} capped at the model's context {profile.max_context}"
        if max_model_len is not None:
            warnings.append(f"--max-model-len {max_model_len} exceeds the model's context ({profile.max_context}); using "
                            f"{profile.max_context} (vLLM refuses longer unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1)")  # fmt: skip
        trace.append(line)
        mml = profile.max_context
    decision = Decision(
        speculative_method="suffix" if on else None,
        num_speculative_tokens=k if on else None,
        gpu_memory_utilization=gpu_memory_utilization or fields.get("gpu_memory_utilization", 0.90),
        tensor_parallel_size=tp,
        max_model_len=mml,
        max_num_seqs=fields.get("max_num_seqs"),
        cudagraph_mode=fields.get("cudagraph_mode", "FULL_AND_PIECEWISE"),
        dsa_env=dsa_env,
        env=env,
    )
    given = {"tensor_parallel_size": tensor_parallel_size, "max_model_len": max_model_len,
             "num_speculative_tokens": num_speculative_tokens, "gpu_memory_utilization": gpu_memory_utilization}
    fixed = frozenset(f for f, v in given.items() if v is not None)
    memory = None
    plan_trace: list[str] = []
    if planner is not None:
        decision, memory, plan_trace, plan_warnings = planner(profile, host, decision, fixed)
        warnings += plan_warnings
    final_k = decision.num_speculative_tokens or k
    turned_off = False
    if predictor and (decision.tensor_parallel_size != tp or (on and final_k != k)):
        # The memory planner changed TP or K: predict (and decide) again for what will be launched.
        prediction = predictor(profile, host, workload, final_k, decision.tensor_parallel_size)
        again: list[str] = []
        still = _speculate(outcome, prediction, again)
        spec_trace.append(f"re-predicted at the planner's TP {decision.tensor_parallel_size}, K={final_k}: {again[-1]}")
        if not on and still:
            spec_trace.append(f"at TP {decision.tensor_parallel_size} suffix would be chosen; the planner's change came "
                              "after the choice: rerun with --tp to recommend for it")  # fmt: skip
        if decision.speculative_method and not still:
            turned_off = True
            decision = decision.model_copy(update={"speculative_method": None, "num_speculative_tokens": None})
            if planner is not None:
                decision, memory, more, more_warnings = planner(profile, host, decision, fixed)
                plan_trace += more
                warnings += more_warnings
    trace = spec_trace + trace
    if decision.speculative_method:
        _k_trace(decision.num_speculative_tokens, trace)
    elif num_speculative_tokens is not None:
        warnings.append(f"--k {num_speculative_tokens} not used: suffix decoding is off ({why_spec})")
    trace += plan_trace
    if on and decision.speculative_method is None:
        trace.append("suffix turned off: at the planner's configuration the prediction no longer favours it"
                     if turned_off else "suffix dropped by the memory planner")
    from advisor.plan.probe_plan import probe_plan

    plan = probe_plan(profile.id, decision, workload, prediction, policy=outcome.speculation, k=final_k,
                      low=FLIP_OFF_BELOW, high=FLIP_ON_ABOVE)  # fmt: skip
    if plan is not None:
        trace.append(f"unsure: {plan.reason}; `advisor recommend --probe` (or the probe command below) settles it on this host")
    return Recommendation(
        model=profile.inspect_json(),
        host=host,
        workload=workload,
        decision=decision,
        rules_fired=[f.model_dump(include={"id", "rationale", "severity", "source", "set"}) for f in outcome.fired],
        warnings=warnings,
        prediction=prediction,
        memory=memory,
        trace=trace,
        host_dsa_queues=fields.get("host_dsa_queues"),
        probe_plan=plan,
    )
