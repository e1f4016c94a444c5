"""Hook the layout search (advisor.plan.layout) into a Recommendation: one call, after
:func:`advisor.plan.recommend.recommend`, from the CLI adapter. Loads nothing itself: the probe
records and cache dir come from the caller (advisor.cli.wiring reads them)."""

from __future__ import annotations

from pathlib import Path

from advisor.hardware.gpus import get_gpu
from advisor.model.schema import ModelProfile
from advisor.domain.decision import Decision
from advisor.domain.probe_plan import ProbePlan
from advisor.domain.recommendation import Recommendation
from advisor.domain.workload import Workload
from advisor.plan.layout import Candidate, LayoutQuery, LayoutResult, search, why_lost
from advisor.domain.prediction import Band, RecommendedPrediction

SHOWN = 3
"""Runners-up shown in text (``--json`` carries every candidate)."""


def apply_search(rec: Recommendation, profile: ModelProfile, rules, query: LayoutQuery, *, tp: int | None, k: int | None,
                 records=None, cache_dir: Path | None = None) -> Recommendation:  # fmt: skip
    """The recommendation with its decision, prediction and memory replaced by the search's winner
    (``records``: this user's ok probe records; ``cache_dir``: the predictor's fit cache)."""
    from advisor.plan.memory import plan_memory
    from advisor.plan.recommend import build_facts
    from advisor.predict.api import predict
    from advisor.rules.engine import apply_rules

    host, workload = rec.host, rec.workload
    gpu = get_gpu(host.gpu)
    policy = apply_rules(rules, build_facts(profile, host, workload)).speculation
    measured = rec.prediction.measured if rec.prediction else None
    if measured and policy not in ("required", "forbidden"):
        # A probe on this host outranks the prediction (advisor.plan.recommend._speculate): it fixes
        # suffix on or off; the layout and the other methods are still searched.
        policy = "required" if measured.gain > 1.0 else "forbidden"
    state = None if host.dsa_enabled is None else ("ON" if host.dsa_enabled else "OFF")
    preds: dict[tuple, object] = {}

    def _predict(tp_: int, n: int, k_: int):
        key = (tp_, n, k_)
        if key not in preds:
            preds[key] = predict(profile, gpu, tp_, workload.model_copy(update={"concurrency": n}), host_state=state, k=k_,
                                 records=records, cache_dir=cache_dir)  # fmt: skip
        return preds[key]

    def suffix_gain(tp_: int, n: int, k_: int):
        pr = _predict(tp_, n, k_)
        return None if pr is None else (Band(value=pr.gain, low=pr.gain_low, high=pr.gain_high), pr.p_win, pr.k_bar)

    from advisor.plan import memory as mem

    def planner(prof: ModelProfile, d: Decision):
        # one quick verdict per candidate; the chosen candidate gets the full plan_memory below
        return mem.boot_verdict(prof, gpu, d, d.tensor_parallel_size, vllm_version=host.vllm_version)

    base = rec.decision.model_copy(update={"speculative_method": None, "num_speculative_tokens": None})
    if query.ngram_lookup:  # the user's window: carried by every decision, rendered when n-gram is chosen
        from advisor.domain.decision import NgramParams

        base = base.model_copy(update={"ngram": NgramParams(prompt_lookup_min=query.ngram_lookup[0],
                                                            prompt_lookup_max=query.ngram_lookup[1])})  # fmt: skip
    k_rules = rec.decision.num_speculative_tokens or 32
    from advisor.plan.layout import NoFeasibleLayout

    try:
        result = search(profile, gpu, host.gpus, base, concurrency=workload.concurrency, query=query, policy=policy,
                        suffix_gain=suffix_gain, planner=planner, tp_fixed=tp, k_fixed=k, k_rules=k_rules)  # fmt: skip
    except NoFeasibleLayout as err:  # keep the rules' decision and its memory verdict; say why nothing was chosen
        return rec.model_copy(update={"warnings": [*rec.warnings, f"layout search: {err}"],
                                      "trace": [*rec.trace, f"layout search: {err}; the decision above is kept"]})  # fmt: skip
    c = result.chosen
    decision = decision_of(base, c)
    from advisor.plan.layout import replica_profile

    plan = plan_memory(replica_profile(profile, c.layout, c.method), gpu, decision, num_gpus=c.layout.tp, search=False,
                       vllm_version=host.vllm_version)
    fields = rec.prediction.model_dump() if rec.prediction else {}
    n = c.figures.running_per_replica
    from advisor.predict.kbar_prior import max_draft

    sp = _predict(c.layout.tp, n, max_draft(c.k or k_rules) if c.method == "suffix" else max_draft(k_rules))
    if sp is not None:
        fields.update(sp.model_dump())  # measured and measured_near stay as the first prediction found them
    fields.update(absolute_prediction(c, query))
    pred = RecommendedPrediction.model_validate(fields) if "gain" in fields else None
    trace = [t for t in rec.trace if not t.startswith("memory:")]
    old = rec.decision.tensor_parallel_size
    if rec.prediction and (old, workload.concurrency) != (c.layout.tp, n):
        trace.append(f"the P(win) above is at TP {old} and {workload.concurrency} sequences; the layout search predicts each "
                     f"candidate at its own TP and per-replica concurrency (chosen: TP {c.layout.tp}, {n} running per replica"
                     + (f", suffix P(win)={sp.p_win:.2f})" if sp is not None else ")"))
    trace += search_trace(result, query, policy)
    trace.append(f"memory: {plan.reason}")
    warnings = [w for w in rec.warnings if "--data-parallel-size" not in w or c.layout.dp == 1]
    if result.limits_missed:
        warnings.append(f"layout search: {result.limits_missed}")
    probe = _probe_plan_for(profile, decision, workload, pred, policy, c, n, k_rules)
    trace = [t for t in trace if not t.startswith("unsure:")]
    if probe is not None:
        trace.append(f"unsure: {probe.reason}; `advisor recommend --probe` (or the probe command below) settles it on this host")
    return rec.model_copy(update={
        "decision": decision, "prediction": pred, "memory": plan.verdict(), "probe_plan": probe,
        "trace": trace, "warnings": warnings, "candidates": [candidate_json(x, c, query) for x in result.ranked],
    })  # fmt: skip


def _probe_plan_for(profile: ModelProfile, decision: Decision, workload: Workload, pred: RecommendedPrediction | None,
                    policy: str, c: Candidate, n: int, k_rules: int) -> ProbePlan | None:  # fmt: skip
    """The probe that settles the chosen layout: one replica at its TP and per-replica concurrency,
    vanilla against suffix at the chosen K (the rules' K when plain won), judged on the P(win) the
    search predicted there, not the one the rules' layout had."""
    from advisor.plan.probe_plan import probe_plan
    from advisor.plan.recommend import FLIP_OFF_BELOW, FLIP_ON_ABOVE

    k = c.k if c.method == "suffix" and c.k else k_rules
    return probe_plan(profile.id, decision, workload.model_copy(update={"concurrency": n}), pred, policy=policy, k=k,
                      low=FLIP_OFF_BELOW, high=FLIP_ON_ABOVE)  # fmt: skip


def decision_of(base: Decision, c: Candidate) -> Decision:
    return base.model_copy(update={
        "tensor_parallel_size": c.layout.tp, "data_parallel_size": c.layout.dp, "enable_expert_parallel": c.layout.ep,
        "speculative_method": None if c.method == "none" else c.method, "num_speculative_tokens": c.k,
        "max_num_seqs": c.max_num_seqs,
    })  # fmt: skip


def absolute_prediction(c: Candidate, query: LayoutQuery) -> dict:
    f = c.figures
    return {
        "throughput_tok_s": f.throughput_tok_s.model_dump(), "tpot_ms": f.tpot_ms.model_dump(), "ttft_ms": f.ttft_ms.model_dump(),
        "step_ms": f.step_ms.model_dump(), "prefill_ms": f.prefill_ms.model_dump(),
        "speculative_gain": f.gain.model_dump() if f.gain else None,
        "running_per_replica": f.running_per_replica, "waiting_per_replica": f.waiting_per_replica,
        "layout": c.layout.label(), "method": c.method, "objective": query.objective,
        "prompt_len": query.prompt_len, "output_len": query.output_len, "figure_notes": f.notes,
    }  # fmt: skip


def candidate_json(c: Candidate, winner: Candidate, query: LayoutQuery) -> dict:
    out = {
        "label": c.label(), "tensor_parallel_size": c.layout.tp, "data_parallel_size": c.layout.dp,
        "enable_expert_parallel": c.layout.ep, "speculative_method": None if c.method == "none" else c.method,
        "num_speculative_tokens": c.k, "max_num_seqs": c.max_num_seqs, "boots": c.boots, "kv_cache_tokens": c.kv_cache_tokens,
        "eligible": c.eligible, "why_not": c.why_not, "p_win": c.p_win, "chosen": c is winner,
    }  # fmt: skip
    if c.figures is not None:
        out["prediction"] = absolute_prediction(c, query)
        if c is not winner:
            out["why_lost"] = why_lost(winner, c, query.objective, query.output_len)
    return out


def search_trace(result: LayoutResult, query: LayoutQuery, policy: str) -> list[str]:
    c = result.chosen
    f = c.figures
    lines = [f"layout search: {result.searched} candidates (TP x DP x EP x none/suffix/ngram/MTP"
             + (" x max_num_seqs" if any(x.max_num_seqs for x in result.ranked) else "")
             + f"), objective {query.objective}, suffix rules policy {policy}; chosen {c.label()}: "
             f"{f.throughput_tok_s.value:,.0f} tok/s host, TPOT {f.tpot_ms.value:.1f} ms, TTFT {f.ttft_ms.value:.0f} ms"]
    for name in ("none", "mtp", "suffix", "ngram"):
        best = next((x for x in result.ranked if x.method == name), None)
        if best is not None and best is not c:
            label = "plain-decoding" if name == "none" else name
            lines.append(f"best {label} candidate {best.label()}: {why_lost(c, best, query.objective, query.output_len)}")
    if query.ngram_k or query.ngram_lookup:
        lo, hi = query.ngram_lookup or (None, None)
        lines.append("n-gram as asked: " + (f"K={query.ngram_k} (--ngram-k) caps tokens per step at {query.ngram_k + 1} and the "
                     "verification step (n-gram's own host-profile step cost) at 1 + min(K, 1.5 x the ASSUMED drafted "
                     "tokens) per sequence, so K moves the price only where drafts are long; " if query.ngram_k else "")
                     + (f"lookup window {lo}..{hi} (--ngram-lookup) is launched as given but NOT priced: n-gram's tokens "
                        "per step stay an ASSUMED share of suffix's" if query.ngram_lookup else ""))  # fmt: skip
    return lines


def text_lines(rec) -> list[str]:
    """The plain-text block: chosen figures, the next best three, and the labelled terms."""
    p = rec.prediction
    if p is None or p.throughput_tok_s is None:
        return []
    fmt = lambda b, d=0: f"{b.value:,.{d}f} [{b.low:,.{d}f}, {b.high:,.{d}f}]"  # noqa: E731
    lines = [f"Predicted ({p.layout}, {p.method}; prompt {p.prompt_len}, output {p.output_len} tokens):",
             f"  host output throughput {fmt(p.throughput_tok_s)} tok/s",
             f"  TPOT {fmt(p.tpot_ms, 1)} ms   TTFT {fmt(p.ttft_ms)} ms",
             f"  decode step {fmt(p.step_ms, 2)} ms at {p.running_per_replica} running/replica, "
             f"prefill {fmt(p.prefill_ms, 1)} ms per prompt"]
    if p.speculative_gain:
        lines.append(f"  speculative gain x{fmt(p.speculative_gain, 2)}")
    lines.append("  intervals: step ±10% and prefill ±25% (ASSUMED bands; plain step MEASURED within 1% on H200 TP 1), "
                 "times the predictor's 90% gain interval for speculative methods")
    for n in p.figure_notes or []:
        lines.append(f"  term: {n}")
    runners = [c for c in rec.candidates if not c.get("chosen")][:SHOWN]
    if runners:
        lines.append("Next best:")
        for c in runners:
            q = c.get("prediction")
            figs = (f"{q['throughput_tok_s']['value']:,.0f} tok/s, TPOT {q['tpot_ms']['value']:.1f} ms, "
                    f"TTFT {q['ttft_ms']['value']:.0f} ms") if q else "no figures"
            lines.append(f"  {c['label']}: {figs} — lost: {c.get('why_lost') or c.get('why_not')}")
    return lines
