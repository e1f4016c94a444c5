"""Assemble a Recommendation (pure): rules -> the scored candidates (layout x method x operating
point, advisor.plan.layout.score) -> :func:`advisor.plan.choose.choose` -> memory plan, prediction
and probe plan of the choice. The one path recommend, render, report, --probe and
evaluate_product take."""

from __future__ import annotations

import math

from functools import lru_cache
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from advisor.domain.corpora import KNOWN_CORPORA
from advisor.domain.decision import DSA_ENV, Decision
from advisor.domain.host import HostContext
from advisor.domain.prediction import RecommendedPrediction
from advisor.domain.recommendation import Recommendation
from advisor.domain.workload import Workload
from advisor.model.schema import ModelProfile
from advisor.model.tp_rules import tp_refusal as refusal
from advisor.errors import UsageError
from advisor.hardware.gpus import get_gpu
from advisor.plan.choose import choose
from advisor.plan.layout import LayoutQuery, NoFeasibleLayout, RateNotServed, closed_loop_figures, replica_profile, score
from advisor.plan.layout_wiring import as_launched, candidate_view, chosen_prediction, decision_of, pareto_view
from advisor.plan.memory import boot_verdict
from advisor.plan.probe_plan import probe_plan
from advisor.plan.seams import MemoryPlanner, Predictor
from advisor.predict.dataset import SEED_K
from advisor.rules.policy import load_policy
from advisor.rules.engine import apply_rules
from advisor.rules.schema import Rule
from advisor.vllm_facts import facts as _facts

MAX_DRAFT_AT_DEFAULTS = _facts().suffix_draft_cap
"""Longest suffix draft at vLLM's defaults: match length + draft length ≤ the tree depth and draft ≤
max_spec_factor x match length (advisor.vllm_facts suffix_draft_cap; docs/kbar.md)."""


def corpus_kind(workload: Workload) -> str:
    """``mix``, ``single`` (a seed corpus name), ``file`` or ``unknown``."""
    if workload.corpus is None:
        return "unknown"
    if workload.corpus_is_file:
        return "file"
    if workload.corpus == "mix":
        return "mix"
    return "single" if workload.corpus in KNOWN_CORPORA else "unknown"


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


class ServerSplit(BaseModel):
    """The host's GPUs launched as identical servers instead of one server over all of them."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["nodes", "rate"]
    """``nodes``: one server per node beat one spanning the nodes on the objective; ``rate``: the host does not
    serve --request-rate, and this many identical servers are the fewest GPUs that do."""
    servers: int = Field(ge=1)
    gpus: int = Field(ge=1)
    """GPUs per server."""
    concurrency: int | None = Field(default=None, ge=1)
    """``nodes``: requests in flight per server."""
    query: LayoutQuery | None = None
    """``rate``: the query at one server's share of the rate."""


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
            f"token (calibration/gpu_steps/README.md); the seed measured K={SEED_K}"
        )
    else:
        trace.append(f"K={k}: a draft of at most {k} token(s) emits at most {k + 1} tokens per step (K̄ <= 1 + K); "
                     f"the seed measured K={SEED_K}, so K̄ at this K is scaled from it")  # fmt: skip


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
    query: LayoutQuery | None = None,
    build: str = "release",
    drafters=(),
    probes=(),
    step_corrections=(),
    step_correction_how: str = "",
) -> Recommendation:
    """The whole decision (:func:`_recommend`), every decode step priced with the measured step corrections of this
    host (``step_corrections``: advisor.predict.step_correction.for_host, and ``step_correction_how`` how the host
    matched their profile; none: the physics alone). The launched configuration's correction, where one applies, is
    ``prediction.step_correction``."""
    from advisor.predict import step_correction as stc

    with stc.applied(step_corrections, step_correction_how):
        rec = _recommend(profile, host, workload, rules, tensor_parallel_size=tensor_parallel_size,
                         max_model_len=max_model_len, num_speculative_tokens=num_speculative_tokens,
                         gpu_memory_utilization=gpu_memory_utilization, predictor=predictor, planner=planner,
                         query=query, build=build, drafters=drafters, probes=probes)  # fmt: skip
        d = rec.decision
        hit = stc.lookup(profile, d.tensor_parallel_size, d.data_parallel_size) if rec.prediction is not None else None
    if hit is None or not hit[0].applied:
        return rec
    row, how = hit
    from advisor.domain.prediction import StepCorrectionApplied

    applied = StepCorrectionApplied(factor=row.factor, host_profile=row.host_profile, arch_class=row.arch_class,
                                    dtype=row.dtype, tp=row.tp, campaigns=row.campaigns, note=row.note(how))  # fmt: skip
    return rec.model_copy(update={"prediction": rec.prediction.model_copy(update={"step_correction": applied})})


def _recommend(
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
    query: LayoutQuery | None = None,
    build: str = "release",
    drafters=(),
    probes=(),
) -> Recommendation:
    """The whole decision. The :class:`~advisor.plan.seams.Predictor` and the
    :class:`~advisor.plan.seams.MemoryPlanner` are injected so that this function stays pure and
    testable (advisor.plan.predictor.predictor and advisor.plan.planner.planner are the real ones).
    Every candidate is predicted at its own TP, K and per-replica concurrency; the decision, its
    reasons, the prediction and the probe plan are the chosen candidate's. ``build``: whose start-up
    memory terms judge each candidate (the planner seam's own build for the chosen one). The user's
    flags are never changed silently. ``drafters``: the EAGLE heads and draft models (advisor.model.drafter.Drafter,
    from --draft or the catalog's pairing) the drafter methods price and launch; none: they are not candidates.
    ``probes``: this user's probe records, where a drafter's measured acceptance comes first."""

    pol = load_policy()
    if tensor_parallel_size is not None:
        why = tp_refusal(profile, tensor_parallel_size)
        if why:
            raise UsageError(f"--tp {tensor_parallel_size}: {why} (vLLM rejects it); "
                             f"the largest valid TP on {host.gpus} GPUs is {valid_tp(profile, host.gpus)}")  # fmt: skip
    query = query or LayoutQuery()
    if tensor_parallel_size is None and valid_tp(profile, host.gpus) != host.gpus:
        trace_tp = [f"tensor_parallel_size {host.gpus}: {tp_refusal(profile, host.gpus)}; the layout search "
                    "tries only the TPs vLLM accepts"]  # fmt: skip
    else:
        trace_tp = []
    outcome = apply_rules(rules, build_facts(profile, host, workload))
    fields = dict(outcome.fields)
    k = num_speculative_tokens or fields.get("num_speculative_tokens") or pol.num_speculative_tokens
    warnings = list(host.notes) + list(workload.notes) + list(outcome.warnings)
    trace: list[str] = trace_tp
    env = dict(outcome.env)
    dsa_env = bool(fields.get("dsa_env", False))
    if dsa_env:
        env.update(DSA_ENV)
    # no rule and no flag: vLLM's own defaults (the model's context; CacheConfig's gmu)
    mml = max_model_len or fields.get("max_model_len") or profile.max_context
    if mml > profile.max_context:
        if max_model_len is not None:
            warnings.append(f"--max-model-len {max_model_len} exceeds the model's context ({profile.max_context}); using "
                            f"{profile.max_context} (vLLM refuses longer unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1)")  # fmt: skip
        trace.append(f"max_model_len {mml} capped at the model's context {profile.max_context}")
        mml = profile.max_context
    need = query.prompt_len + query.output_len  # every request the figures are for must fit, or vLLM answers HTTP 400
    longest = f"--prompt-len {query.prompt_len} + --output-len {query.output_len}"
    if query.length_spread:  # the longest request the benchmark draws
        from advisor.predict.closed_loop import spread_range

        p_hi, o_hi = spread_range(query.prompt_len, query.length_spread)[1], spread_range(query.output_len, query.length_spread, output=True)[1]
        need, longest = p_hi + o_hi, f"the longest prompt {p_hi} + output {o_hi} of --length-spread {query.length_spread:g}"
    if need > mml:
        if max_model_len is None and need <= profile.max_context:
            trace.append(f"max_model_len {mml} (the rules') is below {longest} = {need}: raised to {need}, else vLLM "
                         f"rejects every such request (HTTP 400)")  # fmt: skip
            mml = need
        else:
            why = (f"--max-model-len {max_model_len}" if max_model_len is not None else
                   f"the model's context ({profile.max_context})")  # fmt: skip
            warnings.insert(0, f"requests of {longest} = {need} tokens exceed {why}: vLLM rejects each one (HTTP 400); "
                               f"the figures are for requests that cannot be served")  # fmt: skip
    base = Decision(
        gpu_memory_utilization=gpu_memory_utilization or fields.get("gpu_memory_utilization")
        or _facts(host.vllm_version).gpu_memory_utilization,
        tensor_parallel_size=tensor_parallel_size or valid_tp(profile, host.gpus),
        max_model_len=mml,
        max_num_seqs=fields.get("max_num_seqs"),
        cudagraph_mode=fields.get("cudagraph_mode", "FULL_AND_PIECEWISE"),
        dsa_env=dsa_env,
        env=env,
    )
    if query.ngram_lookup:  # the user's window: carried by every decision, rendered when n-gram is chosen
        from advisor.domain.decision import NgramParams

        base = base.model_copy(update={"ngram": NgramParams(prompt_lookup_min=query.ngram_lookup[0],
                                                            prompt_lookup_max=query.ngram_lookup[1])})  # fmt: skip
    given = {"tensor_parallel_size": tensor_parallel_size, "max_model_len": max_model_len,
             "num_speculative_tokens": num_speculative_tokens, "gpu_memory_utilization": gpu_memory_utilization}
    fixed = frozenset(f for f, v in given.items() if v is not None)
    gpu = get_gpu(host.gpu)
    preds: dict[tuple, RecommendedPrediction | None] = {}

    def suffix_prediction(tp: int, n: int, k_: int) -> RecommendedPrediction | None:
        if predictor is None:
            return None
        if (tp, n, k_) not in preds:
            preds[tp, n, k_] = predictor(profile, host, workload.model_copy(update={"concurrency": n}), k_, tp)
        return preds[tp, n, k_]

    def verdict(prof: ModelProfile, d: Decision):
        return boot_verdict(prof, gpu, d, d.tensor_parallel_size, build=build, vllm_version=host.vllm_version)

    def decide_on(b: Decision, gpus: int, q: LayoutQuery | None = None, concurrency: int | None = None):
        q = q or query
        cands = score(profile, gpu, gpus, b, concurrency=concurrency or workload.concurrency, query=q,
                      suffix_gain=suffix_prediction, planner=verdict, tp_fixed=tensor_parallel_size,
                      k_fixed=num_speculative_tokens, k_rules=k, policy_table=pol, vllm_version=host.vllm_version,
                      workload=workload, drafters=drafters, probes=probes)  # fmt: skip
        if q.spec is not None and not any(c.method == q.spec for c in cands):
            from advisor import methods

            m = methods.get(q.spec)
            why = m.needs(profile, next((d for d in drafters if d.kind in getattr(m, "kinds", ())), None),
                          _facts(host.vllm_version))  # fmt: skip
            raise UsageError(f"--spec {q.spec}: {_method_name(q.spec)} is not a candidate for {profile.id}"
                             + (f" ({why})" if why else "") + "; drop --spec or pick another")
        if (q.spec is not None and q.spec != "none" and not any(c.method == q.spec and c.boots for c in cands)
                and any(c.boots for c in cands)):  # (nothing booting at all is the memory plan's answer, exit 8)
            first = next(c for c in cands if c.method == q.spec)  # none of its candidates runs here: never launch another
            raise UsageError(f"--spec {q.spec}: no {_method_name(q.spec)} candidate runs here ({first.label()}: "
                             f"{first.why_not or first.memory_reason}); drop --spec or fix that")
        return cands, choose(cands, policy=outcome.speculation, rule=outcome.speculation_rule, query=q,
                             forced=q.spec)  # fmt: skip

    def serves(choice) -> bool:
        return choice.sla_met is not False and choice.limits_missed is None

    sized: ServerSplit | None = None

    def better(a, b_) -> bool:
        """Whether choice ``a`` (times its servers) beats ``b_`` on the objective (ties: ``b_``, one server)."""
        (ca, na), (cb, nb) = a, b_
        if query.objective == "latency":
            from advisor.plan.choose import request_latency_ms

            return request_latency_ms(ca.chosen, query.output_len) < request_latency_ms(cb.chosen, query.output_len)
        return ca.chosen.figures.throughput_tok_s.value * na > cb.chosen.figures.throughput_tok_s.value * nb

    def decide(b: Decision):
        nonlocal sized
        if query.request_rate is None:
            node = query.gpus_per_node
            if host.gpus <= node or host.gpus % node or (tensor_parallel_size or 0) > node:
                return decide_on(b, host.gpus)
            # GPUs over several nodes: one server spanning them (TP per node x PP), or one server per node with the
            # load split over them (DP replicas do not span nodes here); the better on the objective is launched
            # only servers with requests count: C requests over N nodes keep min(N, C) servers busy
            nodes = min(host.gpus // node, max(1, workload.concurrency))
            per = -(-workload.concurrency // nodes)
            try:
                whole = decide_on(b, host.gpus)
            except NoFeasibleLayout:
                whole = None
            try:
                one = decide_on(b, node, concurrency=per)
            except NoFeasibleLayout:
                if whole is None:
                    raise
                return whole
            if whole is None or better((one[1], nodes), (whole[1], 1)):
                sized = ServerSplit(kind="nodes", servers=nodes, gpus=node, concurrency=per)
                return one
            return whole
        # --request-rate: the fewest of the host's GPUs that serve it within the limits (advisor.plan.operating_point)
        for g in range(1, host.gpus + 1):
            if tensor_parallel_size is not None and g < tensor_parallel_size:
                continue
            try:
                cands, choice = decide_on(b, g)
            except NoFeasibleLayout:
                continue
            if serves(choice):
                return cands, choice
        return size_servers(b)

    def size_servers(b: Decision):
        """The host does not serve the rate: the fewest GPUs in identical one-node servers that do (each server's
        capacity within the limits from the operating-point search, then confirmed at its share of the rate)."""
        nonlocal sized
        node = min(query.gpus_per_node, max(host.gpus, 1))
        rate = query.request_rate
        options = []
        for g in range(1, node + 1):
            if tensor_parallel_size is not None and g < tensor_parallel_size:
                continue
            capq = query.model_copy(update={"request_rate": None, "concurrency_given": False})
            try:
                _, cap_choice = decide_on(b, g, capq)
            except NoFeasibleLayout:
                continue
            f = cap_choice.chosen.figures
            cap = getattr(f, "request_rate_per_replica", 0.0) * cap_choice.chosen.layout.dp
            if not serves(cap_choice) or cap <= 0:
                continue
            m = max(1, math.ceil(rate / cap))
            options.append((m * g, m, g))
        for _total, m0, g in sorted(options, key=lambda x: (x[0], x[1])):
            for m in range(m0, m0 + 3):  # the closed-loop capacity is an estimate: confirm at the Poisson share
                q = query.model_copy(update={"request_rate": rate / m})
                try:
                    cands, choice = decide_on(b, g, q)
                except NoFeasibleLayout:
                    break
                if serves(choice):
                    sized = ServerSplit(kind="rate", servers=m, gpus=g, query=q)
                    return cands, choice
        raise RateNotServed(f"--request-rate {rate:g}/s: no server of up to {node} GPUs meets the limits at any rate, "
                               "so no number of servers does; relax --max-tpot-ms / --max-ttft-ms or use larger GPUs")  # fmt: skip

    try:
        cands, choice = decide(base)
    except RateNotServed:
        raise
    except NoFeasibleLayout as err:
        # Nothing searched boots: the memory planner's nearest single change to the settings the
        # search keeps (gmu, max_model_len, max_num_seqs), never one the user's flag set.
        rules_d = base.model_copy(update={"speculative_method": "suffix", "num_speculative_tokens": k}
                                  if outcome.speculation in ("default_on", "required") else {})  # fmt: skip
        alt = planner(profile, host, rules_d, fixed) if planner is not None else None
        moved = alt is not None and alt[1] is not None and alt[1].boots and any(
            getattr(alt[0], f) != getattr(base, f) for f in ("gpu_memory_utilization", "max_model_len", "max_num_seqs"))
        choice = None
        if moved:
            base2 = base.model_copy(update={f: getattr(alt[0], f) for f in ("gpu_memory_utilization", "max_model_len",
                                                                             "max_num_seqs")})  # fmt: skip
            try:
                cands, choice = decide(base2)
                base = base2
                trace += [t for t in alt[2]]
                warnings += alt[3]
            except NoFeasibleLayout:
                choice = None
        if choice is None:
            # what the (not booting) rules' configuration is predicted to do, when it is suffix decoding
            d = alt[0] if alt is not None else rules_d
            pred = (predictor(profile, host, workload, d.num_speculative_tokens, d.tensor_parallel_size)
                    if predictor is not None and d.speculative_method == "suffix" else None)  # fmt: skip
            return _not_bootable(profile, host, workload, outcome, rules_d, alt, str(err), warnings, trace, fields, pred)
    if sized is not None and sized.kind == "nodes":
        m, g = sized.servers, sized.gpus
        idle = host.gpus // g - m
        servers = f"{m} identical one-node servers, {sized.concurrency} of the {workload.concurrency} requests each," if m > 1 else \
            "one server on one node"
        trace.insert(0, f"{host.gpus} GPUs over {host.gpus // g} nodes of {g}: {servers} beat one server spanning the nodes on "
                        f"the objective ({query.objective}); the figures are one server's"
                        + (f"; {idle} node(s) left idle: {workload.concurrency} request(s) keep only {m} busy" if idle else ""))  # fmt: skip
        if m > 1:
            warnings.insert(0, f"run this configuration on each of {m} nodes behind a load balancer ({m * g} GPUs in all); "
                               f"the figures are one server's at {sized.concurrency} requests in flight")  # fmt: skip
        if idle:
            warnings.insert(0, f"{idle} of the {host.gpus // g} nodes stay idle: {workload.concurrency} request(s) in flight keep "
                               f"{m} one-node server(s) busy, and a server spanning nodes is predicted slower")  # fmt: skip
        workload = workload.model_copy(update={"concurrency": sized.concurrency})
    elif sized is not None:
        m, g = sized.servers, sized.gpus
        trace.insert(0, f"--request-rate {query.request_rate:g}/s: no layout of the host's {host.gpus} GPUs serves it within "
                        f"the limits; {m} identical servers of {g} GPU(s) ({m * g} GPUs) do, each at "
                        f"{query.request_rate / m:.3g} requests/s behind a load balancer (the figures are one server's)")  # fmt: skip
        warnings.insert(0, f"--request-rate {query.request_rate:g}/s needs {m} servers of {g} GPU(s) ({m * g} GPUs in all): "
                           f"run this configuration {m} times behind a load balancer")  # fmt: skip
    served = sized.query if sized is not None and sized.query is not None else query
    rec = _assemble(profile, host, workload, outcome, base, cands, choice, fixed, warnings, trace, fields,
                    served, suffix_prediction, planner, num_speculative_tokens, k, pol, drafters)  # fmt: skip
    if sized is not None:
        rec = rec.model_copy(update={"servers": sized.servers})
    return rec


def _method_name(m: str) -> str:
    from advisor import methods

    return methods.get(m).title


def _not_bootable(profile, host, workload, outcome, decision, alt, why, warnings, trace, fields, pred) -> Recommendation:
    """Nothing boots: the rules' configuration, reported as not booting (``memory.boots`` False:
    ``advisor recommend`` exits 8 and ``render`` refuses it), with what would boot first."""
    memory = None
    if alt is not None:
        decision, memory, more, more_warnings = alt
        trace += more
        warnings = [*more_warnings, *warnings]
    trace.append(f"layout search: {why}")
    return Recommendation(
        model=profile.inspect_json(), host=host, workload=workload, decision=decision,
        rules_fired=[f.model_dump(include={"id", "rationale", "severity", "source", "set"}) for f in outcome.fired],
        warnings=warnings, prediction=pred, memory=memory, trace=trace, host_dsa_queues=fields.get("host_dsa_queues"),
    )  # fmt: skip


def _assemble(profile, host, workload, outcome, base, cands, choice, fixed, warnings, trace, fields, query,
              suffix_prediction, planner, k_flag, k_rules, pol, drafters=()) -> Recommendation:  # fmt: skip

    c = choice.chosen
    decision = decision_of(base, c)
    from advisor.plan.layout_wiring import operating_point_trace

    op_trace, offered = operating_point_trace(c, query, host)
    n = c.figures.running_per_replica
    k_probe = c.k if c.method == "suffix" else next((x.k for x in cands if x.method == "suffix"), k_rules)
    sp = suffix_prediction(c.layout.tp, n, k_probe)  # the suffix prediction at the launched layout
    # a line whose suffix drafts all K every step is priced by its own derivation (advisor.methods.suffix): the
    # calibrated CPU-proposer P(win) does not apply there, so it neither prints nor plans a probe from it
    sp_plan = None if _facts(host.vllm_version).suffix_drafts_full_k else sp
    trace = [*choice.trace, *op_trace, *trace]
    for near in sp.measured_near if sp else []:
        how = ("it only informs the calibrated fit" if near.fitted else
               "nor fitted: a probe without a GPU says nothing about a GPU's gain")  # fmt: skip
        trace.append(f"probe campaign {near.campaign} measured suffix at {near.gain:.2f}x vanilla for this model, traffic "
                     f"and K, but not for this deployment ({'; '.join(near.differs)}): not used to decide ({how})")  # fmt: skip
    if c.method == "suffix":
        _k_trace(c.k, trace)
        rules_k = next((x for x in cands if x.method == "suffix" and x.layout == c.layout and x.k == (k_flag or k_rules)
                        and not x.boots), None)  # fmt: skip
        if rules_k is not None and rules_k.k != c.k:
            trace.append(f"candidate {rules_k.label()}: {rules_k.why_not}")
            warnings.append(f"the rules' K ({rules_k.k}) does not boot at {c.layout.label()}; suffix launched at K {c.k}")
        if c.max_num_seqs and not base.max_num_seqs and not (query.objective == "latency" or query.max_tpot_ms):
            warnings.append(f"suffix K {c.k} boots at {c.layout.label()} only with max_num_seqs {c.max_num_seqs}; "
                            "changed max_num_seqs")  # fmt: skip
    elif k_flag is not None:
        warnings.append(f"--k {k_flag} not used: suffix decoding is not launched ({c.label()} is; the suffix "
                        "candidates are listed with their own figures)")  # fmt: skip
    memory = None
    if planner is not None:
        lay_host = host.model_copy(update={"gpus": c.layout.tp})
        from advisor.plan.layout import kv_fp8_profile

        mem_profile = kv_fp8_profile(profile) if c.kv_cache_dtype == "fp8" else profile
        _, memory, plan_trace, plan_warnings = planner(replica_profile(mem_profile, c.layout, c.method, next((d for d in drafters if d.id == c.drafter), None),
                                                                       kv_fp8=c.kv_cache_dtype == "fp8"),
                                                       lay_host, decision,
                                                       frozenset(FIXED_BY))  # fmt: skip
        trace += plan_trace
        warnings += plan_warnings  # (the planner warns "does not boot with your …" only for a plan that does not boot)
    decision = as_launched(decision, c)  # multi-node: TP per node x PP, as rendered (after the per-GPU memory plan)
    if c.pipeline and "tensor_parallel_size" in fixed:
        warnings.append(f"--tp {c.layout.tp} spans {c.pipeline[1]} nodes: it runs as TP {c.pipeline[0]} per node x PP "
                        f"{c.pipeline[1]} (vLLM's multi-node layout; the same {c.layout.tp} GPUs)")  # fmt: skip
    if choice.limits_missed:
        warnings.insert(0, f"SLA not met: {choice.limits_missed}")
    if c.drafter and c.k_bar_kind in ("prior", "same_target"):
        import shlex

        what = ("a class prior (ASSUMED)" if c.k_bar_kind == "prior" else "another head's published acceptance")
        cmd = shlex.join(["advisor", "probe", profile.id, "--configs", f"vanilla,{c.method}:{c.k}@draft={c.drafter}",
                          "--tp", str(c.layout.tp), "--max-model-len", str(decision.max_model_len),
                          "--concurrency", str(n)])  # fmt: skip
        warnings.append(f"{c.method} K={c.k} is launched on an acceptance from {what}, not from {c.drafter} on your "
                        f"traffic: measure it with real weights ({cmd} --corpus YOUR_PROMPTS); recommend reads the "
                        "probe's acceptance first")  # fmt: skip
    plan = probe_plan(profile.id, decision, workload.model_copy(update={"concurrency": n}), sp_plan, policy=choice.policy,
                      k=k_probe, low=pol.p_win.flip_off_below, high=pol.p_win.flip_on_above,
                      fitted_within=pol.fitted_factor_within, run_sigma=_run_sigma(sp))  # fmt: skip
    if plan is not None:
        what = (f"unsure: the launched {c.label()} has" if c.method == "suffix" else
                f"candidate {c.layout.label()}, suffix K={k_probe}: unsure:")  # fmt: skip
        if pol.p_win.unsure(sp.p_win):
            why = (f"P(win)={sp.p_win:.2f} inside [{pol.p_win.flip_off_below:.2f}, {pol.p_win.flip_on_above:.2f}], "
                   "where the prediction does not decide on its own")  # fmt: skip
        else:
            ff = sp.decomposition.fitted_factor
            why = (f"P(win)={sp.p_win:.2f} from a gain the fitted terms multiply by x{ff:.2f} (beyond "
                   f"x{math.exp(pol.fitted_factor_within):.2f} of the mechanism's K̄ / R)")  # fmt: skip
        trace.append(f"{what} {why}; `advisor recommend --probe` (or the probe command below) settles it on this host")
    prediction = chosen_prediction(c, sp, query, host)
    if prediction is not None and query.request_rate is None:
        closed = closed_loop_figures(profile, get_gpu(host.gpu), c, query, offered or workload.concurrency, host.vllm_version)
        if closed is not None:
            prediction = prediction.model_copy(update={"closed_loop": closed})
            prediction.model_fields_set.add("closed_loop")
    return Recommendation(
        model=profile.inspect_json(),
        host=host,
        workload=workload.model_copy(update={"concurrency": offered}) if offered else workload,
        decision=decision,
        rules_fired=[f.model_dump(include={"id", "rationale", "severity", "source", "set"}) for f in outcome.fired],
        warnings=warnings,
        prediction=prediction,
        memory=memory,
        trace=trace,
        host_dsa_queues=fields.get("host_dsa_queues"),
        probe_plan=plan,
        candidates=[candidate_view(x, c, query) for x in choice.ranked],
        pareto=pareto_view(choice.ranked, c) if query.operating_point else [],
        sla_met=choice.sla_met,
        limits_missed=choice.limits_missed,
    )


def _run_sigma(sp) -> float:
    """The largest measured run-to-run sigma of ln R (suffix) over the host profiles a prediction used."""
    from advisor.predict import host_profile as hp

    return hp.run_sigma_of(sp.host_profile.split(","), "suffix") if sp is not None and sp.host_profile else 0.0
