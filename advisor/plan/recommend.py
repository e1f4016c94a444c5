"""Assemble a Recommendation: rules -> prediction -> memory plan -> Decision (pure)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from advisor.model.schema import ModelProfile
from advisor.plan.decision import Decision
from advisor.plan.host import HostContext
from advisor.plan.workload import SEED_CORPORA, Workload
from advisor.rules.engine import RulesOutcome, apply_rules
from advisor.rules.schema import Rule

# How confident a prediction must be to flip a rule's default (P(suffix wins)).
MAX_DRAFT_AT_DEFAULTS = 12
"""Longest suffix draft at vLLM's defaults: match length + draft length ≤ tree depth 24 and draft ≤
match length (max_spec_factor 1.0), so a draft is at most 24 // 2 tokens (docs/kbar.md)."""
FLIP_OFF_BELOW = 0.30
FLIP_ON_ABOVE = 0.70


class Recommendation(BaseModel):
    """What ``advisor recommend --json`` prints. Top-level names are a stable contract."""

    model_config = ConfigDict(extra="forbid")

    model: dict
    """The ``advisor inspect --json`` object."""
    host: HostContext
    workload: Workload
    decision: Decision
    rules_fired: list[dict]
    """[{id, rationale, severity, source, set}] in the order applied."""
    warnings: list[str]
    prediction: dict | None = None
    """{gain, gain_low, gain_high, p_win, k_bar, r, …} from the K > R predictor, and ``measured``
    ({gain, k_bar, runs, campaigns} or None): what probes on this host found for this exact model,
    traffic and K."""
    memory: dict | None = None
    """Boot feasibility of the chosen decision (kv_cache_tokens, boots, …)."""
    trace: list[str] = Field(default_factory=list)
    """How the speculation choice was reached, step by step."""
    host_dsa_queues: str | None = None
    """Host DSA work-queue state the evidence was measured at: enabled / disabled / either."""
    probe_plan: dict | None = None
    """When the prediction is unsure: the ``advisor probe`` campaign that settles it (advisor.plan.probe_plan)."""
    candidates: list[dict] = Field(default_factory=list)
    """Layout search (issue 15, advisor.plan.layout_wiring): every searched layout x speculative method,
    best first, with predicted figures and why each lost."""


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
    """Flat fact namespace the rules' ``when`` clauses read."""
    facts: dict[str, Any] = {f"model.{k}": v for k, v in profile.inspect_json().items() if not isinstance(v, (dict, list))}
    facts.update({f"host.{k}": v for k, v in host.model_dump().items() if not isinstance(v, (dict, list))})
    facts.update({f"workload.{k}": v for k, v in workload.model_dump().items()})
    facts["workload.corpus_kind"] = corpus_kind(workload)
    return facts


def valid_tp(profile: ModelProfile, gpus: int) -> int:
    """Largest tensor-parallel size <= gpus that vLLM accepts for this model: attention heads must
    divide evenly (vllm/config/parallel.py verify_with_model_config: num_attention_heads % tp == 0),
    and KV heads must split or replicate evenly (GQA: kv % tp == 0 or tp % kv == 0)."""
    for tp in range(gpus, 0, -1):
        if profile.num_attention_heads % tp:
            continue
        kv = profile.num_kv_heads
        if profile.attention != "mla" and kv % tp and tp % kv:
            continue
        return tp
    return 1


def _speculate(outcome: RulesOutcome, prediction: dict | None, trace: list[str]) -> bool:
    policy, rule = outcome.speculation, outcome.speculation_rule or "default"
    p_win = prediction.get("p_win") if prediction else None
    if policy == "required":
        trace.append(f"rule {rule} requires suffix decoding; the prediction does not override it")
        return True
    if policy == "forbidden":
        trace.append(f"rule {rule} forbids suffix decoding; the prediction does not override it")
        return False
    measured = prediction.get("measured") if prediction else None
    if measured:
        on = measured["gain"] > 1.0
        trace.append(
            f"rule {rule} sets {policy}; probes on this host measured suffix at {measured['gain']:.2f}x vanilla "
            f"({measured['runs']} run(s), campaign {', '.join(measured['campaigns'])}): suffix {'on' if on else 'off'} "
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
    predictor=None,
    planner=None,
) -> Recommendation:
    """The whole decision. ``predictor(profile, host, workload, k) -> dict | None`` and
    ``planner(profile, host, decision) -> (decision, memory dict, trace lines, warnings)`` are
    injected so that this function stays pure and testable."""
    from advisor.render.flags import DSA_ENV

    if tensor_parallel_size is not None and profile.num_attention_heads % tensor_parallel_size:
        from advisor.errors import UsageError

        raise UsageError(
            f"--tp {tensor_parallel_size} does not divide {profile.num_attention_heads} attention heads "
            f"(vLLM rejects it); the largest valid TP on {host.gpus} GPUs is {valid_tp(profile, host.gpus)}"
        )
    outcome = apply_rules(rules, build_facts(profile, host, workload))
    fields = dict(outcome.fields)
    k = num_speculative_tokens or fields.get("num_speculative_tokens") or 32
    trace: list[str] = []
    prediction = predictor(profile, host, workload, k) if predictor else None
    on = _speculate(outcome, prediction, trace)
    if num_speculative_tokens is not None and not on:
        trace.append(f"--k {num_speculative_tokens} ignored: suffix decoding is off")
    if on and k > MAX_DRAFT_AT_DEFAULTS:
        trace.append(
            f"K={k}: at vLLM's default suffix_decoding_max_tree_depth (24) and max_spec_factor (1.0) a draft is at most "
            f"{MAX_DRAFT_AT_DEFAULTS} tokens, so any K >= {MAX_DRAFT_AT_DEFAULTS} drafts the same (advisor kbar replays: "
            "docs/kbar.md); the seed measured K=32"
        )
    env = dict(outcome.env)
    dsa_env = bool(fields.get("dsa_env", False))
    if dsa_env:
        env.update(DSA_ENV)
    mml = max_model_len or fields.get("max_model_len") or 16384
    if mml > profile.max_context:
        trace.append(f"max_model_len {mml} capped at the model's context {profile.max_context}")
        mml = profile.max_context
    decision = Decision(
        speculative_method="suffix" if on else None,
        num_speculative_tokens=k if on else None,
        gpu_memory_utilization=gpu_memory_utilization or fields.get("gpu_memory_utilization", 0.90),
        tensor_parallel_size=tensor_parallel_size or host.gpus,
        max_model_len=mml,
        max_num_seqs=fields.get("max_num_seqs"),
        cudagraph_mode=fields.get("cudagraph_mode", "FULL_AND_PIECEWISE"),
        dsa_env=dsa_env,
        env=env,
    )
    warnings = list(host.notes) + list(outcome.warnings)
    if tensor_parallel_size is None and decision.tensor_parallel_size != valid_tp(profile, host.gpus):
        tp = valid_tp(profile, host.gpus)
        trace.append(
            f"tensor_parallel_size {host.gpus} does not divide {profile.num_attention_heads} attention heads; using {tp}"
        )
        if host.gpus // tp > 1:
            warnings.append(f"TP {tp} uses {tp} of {host.gpus} GPUs: run {host.gpus // tp} replicas (e.g. --data-parallel-size {host.gpus // tp}) to use them all")
        decision = decision.model_copy(update={"tensor_parallel_size": tp})
    memory = None
    if planner is not None:
        decision, memory, plan_trace, plan_warnings = planner(profile, host, decision)
        trace += plan_trace
        warnings += plan_warnings
    if prediction and prediction.get("explanation") and decision.speculative_method is None and on:
        trace.append("suffix dropped by the memory planner")
    from advisor.plan.probe_plan import probe_plan

    plan = probe_plan(profile.id, decision, workload, prediction, policy=outcome.speculation, k=k,
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
        probe_plan=plan.model_dump() if plan else None,
    )
