"""The Recommendation's view of a :class:`advisor.plan.choose.Choice` (pure): the chosen candidate
as a Decision and a prediction, every candidate and the frontier as the typed views of advisor.domain.views (what
``--json`` prints under ``candidates`` and ``pareto``; the text view of figures: advisor.report.text)."""

from __future__ import annotations

from advisor.domain.decision import Decision
from advisor.domain.host import HostContext
from advisor.domain.prediction import Decomposition, LayoutFigures, RecommendedPrediction
from advisor.domain.views import CandidateView, ParetoPoint
from advisor.plan.choose import why_lost
from advisor.plan.layout import Candidate, LayoutQuery


def decision_of(base: Decision, c: Candidate) -> Decision:
    """The Decision a candidate launches, before the memory plan (TP = the GPUs one replica splits over)."""
    return base.model_copy(update={
        "tensor_parallel_size": c.layout.tp, "data_parallel_size": c.layout.dp, "enable_expert_parallel": c.layout.ep,
        "speculative_method": None if c.method == "none" else c.method, "num_speculative_tokens": c.k,
        "max_num_seqs": c.max_num_seqs, "max_num_batched_tokens": c.max_num_batched_tokens, "kv_cache_dtype": c.kv_cache_dtype,
        "num_speculative_tokens_per_batch_size": [tuple(e) for e in c.spec_schedule] if c.spec_schedule else None,
        "speculative_model": c.drafter,
    })  # fmt: skip


def as_launched(d: Decision, c: Candidate) -> Decision:
    """The decision as it runs: a replica that spans nodes is TP per node x PP across nodes over Ray (what
    advisor.render.multinode renders and advisor.predict.pipeline prices)."""
    if not c.pipeline:
        return d
    tp, pp = c.pipeline
    return d.model_copy(update={"tensor_parallel_size": tp, "pipeline_parallel_size": pp, "nodes": pp,
                                "distributed_executor_backend": "ray"})  # fmt: skip


RULED_OUT = frozenset({"rule", "measured", "load", "loses", "forced"})
"""Kinds of the decider's reasons (``Candidate.why_kind``) that rule a candidate out whatever its operating point
(not the limits)."""


def pareto_view(ranked: list[Candidate], chosen: Candidate) -> list[ParetoPoint]:
    """The frontier over every searched operating point of every candidate that boots and that the rules
    leave in (advisor.plan.operating_point.pareto), the chosen one marked."""
    from advisor.plan.operating_point import pareto

    pts = [pt for c in ranked for pt in c.points if c.boots and c.why_kind not in RULED_OUT]
    out = []
    for pt in pareto(pts):
        is_chosen = (pt.layout == chosen.layout and pt.method == chosen.method and pt.k == chosen.k
                     and pt.kv_cache_dtype == chosen.kv_cache_dtype
                     and pt.max_num_seqs == chosen.max_num_seqs and pt.max_num_batched_tokens == chosen.max_num_batched_tokens)  # fmt: skip
        f = pt.figures
        out.append(ParetoPoint(label=pt.label(), tok_s_per_gpu=pt.tok_s_per_gpu, tok_s_per_user=pt.tok_s_per_user,
                               tpot_ms=f.tpot_ms.value, ttft_ms=_ttft_value(f), max_num_seqs=pt.max_num_seqs,
                               max_num_batched_tokens=pt.max_num_batched_tokens, concurrency=pt.concurrency,
                               tensor_parallel_size=pt.layout.tp, data_parallel_size=pt.layout.dp, method=pt.method,
                               k=pt.k, kv_cache_dtype=pt.kv_cache_dtype, feasible=pt.feasible, why_not=pt.why_not,
                               chosen=is_chosen))  # fmt: skip
    if not any(x.chosen for x in out) and chosen.figures is not None:
        f = chosen.figures
        out.append(ParetoPoint(label=chosen.label(), tok_s_per_gpu=round(f.throughput_tok_s.value / chosen.layout.gpus, 1),
                               tok_s_per_user=round(1000 / f.tpot_ms.value, 1), tpot_ms=f.tpot_ms.value, ttft_ms=_ttft_value(f),
                               max_num_seqs=chosen.max_num_seqs, max_num_batched_tokens=chosen.max_num_batched_tokens,
                               concurrency=chosen.concurrency, tensor_parallel_size=chosen.layout.tp,
                               data_parallel_size=chosen.layout.dp, method=chosen.method, k=chosen.k, feasible=True,
                               why_not=None, chosen=True, off_frontier=True))  # fmt: skip
    return out


def _ttft_value(f) -> float | None:
    """TTFT's figure, or None where the queue grows without bound (``ttft_unbounded`` says why)."""
    return f.ttft_ms.value if f.ttft_ms is not None else None


def operating_point_trace(c: Candidate, query: LayoutQuery, host: HostContext) -> tuple[list[str], int | None]:
    """The operating point's lines for the trace (the load, speculation by load, the levers left at vLLM's
    defaults and why), and the requests in flight the figures are at when the search chose them."""
    from advisor.vllm_facts import facts

    lines: list[str] = []
    vf = facts(host.vllm_version)
    offered = c.concurrency
    if query.request_rate is not None:
        f = c.figures
        inflight = getattr(f, "offered_per_replica", None)
        offered = max(1, round(inflight * c.layout.dp)) if inflight is not None else None
        lines.append(f"--request-rate {query.request_rate:g}/s: {c.layout.gpus} of the host's {host.gpus} GPUs serve it "
                     f"({c.layout_label()})" + (" within the limits" if getattr(f, "stable", True) else
                                                 ", at capacity: no layout on the host serves it"))  # fmt: skip
    if c.schedule_reason:
        lines.append(f"speculation by load: {c.schedule_reason}")
    if query.operating_point:
        lines.append(f"prefix caching left {'on' if vf.prefix_caching_default else 'off'} (vLLM {vf.version}'s default, "
                     f"{vf.sources.get('prefix_caching_default', '')}): the figures assume no prefix hits (every prompt "
                     f"prefilled in full), so for traffic that shares prefixes TTFT and the prefill interference are upper "
                     f"bounds; turning it off saves only block hashing, which no term prices")  # fmt: skip
        if vf.performance_modes:
            lines.append(f"--performance-mode left at balanced: the chosen max_num_seqs and max_num_batched_tokens are set "
                         f"explicitly, so 'throughput' (which doubles them only when unset) changes nothing, and "
                         f"'interactivity' only refines CUDA-graph sizes below 32, padding the step model does not price "
                         f"({vf.sources.get('performance_modes', '')})")  # fmt: skip
    return lines, offered


def spread_note(query: LayoutQuery) -> str:
    """The figure note of --length-spread: which figures see the drawn lengths and which the means."""
    from advisor.predict.closed_loop import spread_range

    r = query.length_spread
    (pl, ph), (ol, oh) = spread_range(query.prompt_len, r), spread_range(query.output_len, r, output=True)
    return (f"lengths spread ±{r * 100:g}% (--length-spread {r:g}; vllm bench serve --random-range-ratio {r:g}: prompts {pl}-{ph}, "
            f"outputs {ol}-{oh} tokens, uniform): the closed loop is played request by request with the lengths the "
            f"benchmark draws; throughput, TPOT and the Poisson-arrival TTFT are at the mean lengths ({query.prompt_len} "
            f"in / {query.output_len} out)")


def layout_figures(c: Candidate, query: LayoutQuery) -> LayoutFigures:
    """The candidate's figures on the whole host (its ``prediction`` in ``--json``): ``gpus_used`` only where an
    operating point was searched, the loaded model's keys only for its figures (advisor.predict.serving.LoadedFigures)."""
    f = c.figures
    conditional = {}
    if query.operating_point:
        conditional["gpus_used"] = c.layout.gpus
    from advisor.predict.serving import LoadedFigures

    if isinstance(f, LoadedFigures):
        inflight = f.offered_per_replica * c.layout.dp if f.offered_per_replica is not None else None
        conditional.update({"offered_concurrency": c.concurrency if c.concurrency is not None else (
            round(inflight) if inflight is not None else None), "request_rate": round(f.request_rate_per_replica * c.layout.dp, 3),
            "ttft_unloaded_ms": f.ttft_unloaded_ms, "ttft_prefill_wait_ms": f.ttft_prefill_wait_ms,
            "ttft_slot_wait_ms": f.ttft_slot_wait_ms})  # fmt: skip
    return LayoutFigures(
        throughput_tok_s=f.throughput_tok_s, tpot_ms=f.tpot_ms, ttft_ms=f.ttft_ms, ttft_unbounded=f.ttft_unbounded,
        busy_replicas=f.busy_replicas, step_ms=f.step_ms, prefill_ms=f.prefill_ms, speculative_gain=f.gain,
        running_per_replica=f.running_per_replica, waiting_per_replica=f.waiting_per_replica,
        layout=c.layout_label(), method=c.method, objective=query.objective,
        prompt_len=query.prompt_len, output_len=query.output_len,
        figure_notes=[*(f.notes or []), spread_note(query)] if query.length_spread else f.notes,
        tok_s_per_gpu=round(f.throughput_tok_s.value / c.layout.gpus, 1), tok_s_per_user=round(1000 / f.tpot_ms.value, 1),
        max_num_seqs=c.max_num_seqs, max_num_batched_tokens=c.max_num_batched_tokens,
        spec_schedule=c.spec_schedule, schedule_reason=c.schedule_reason,
        judged_on=query.judged_on if (query.max_tpot_ms or query.max_ttft_ms) else None,
        **conditional,
    )  # fmt: skip


def chosen_prediction(c: Candidate, suffix: RecommendedPrediction | None, query: LayoutQuery,
                      host: HostContext) -> RecommendedPrediction | None:  # fmt: skip
    """``Recommendation.prediction`` for the launched candidate ``c``: suffix decoding's K > R
    prediction at its layout (``suffix``: with what probes measured); MTP's and n-gram's own gain,
    K̄ and R; 1 for plain decoding. ``measured`` (suffix against vanilla probed at exactly this
    layout: why suffix is or is not launched) and ``measured_near`` (at another deployment) are kept
    whatever the method. None when suffix is launched without a prediction."""
    f = c.figures
    if c.method == "suffix" and c.p_win is not None:  # the calibrated K > R prediction (a line that drafts all K
        if suffix is None:                            # every step prices suffix as the other methods, below)
            return None
        return suffix.model_copy(update=layout_figures(c, query).present(), deep=True)
    state = None if host.dsa_enabled is None else ("ON" if host.dsa_enabled else "OFF")
    context = query.prompt_len + query.output_len / 2
    if c.method == "none":
        gain, kbar, r = (1.0, 1.0, 1.0), 1.0, 1.0
        source = "plain decoding: one token per step"
        why = ["plain decoding: no draft, one token per step (gain 1 by definition); the speculative methods are "
               "candidates with their own figures"]  # fmt: skip
        r_source = "plain decoding: the baseline step"
    else:
        gain, kbar, r = (f.gain.value, f.gain.low, f.gain.high), c.k_bar, c.r
        # the method's K̄ note (absolute.ngram_gain / mtp_gain), not whichever note came first (a TP sync note)
        source = c.k_bar_source or c.k_bar_note or (f.notes[0] if f.notes else c.method)
        why = list(f.notes)
        r_source = "step-cost model (advisor.predict.absolute): verification step / plain step at this layout"
    decomposition = Decomposition(k_bar=kbar, r=r, fitted_factor=gain[0] * r / kbar if kbar else 1.0,
                                  sources={"k_bar": source, "r": r_source, "fitted_factor": "none fitted for this method"})  # fmt: skip
    return RecommendedPrediction(
        gain=gain[0], gain_low=gain[1], gain_high=gain[2], p_win=None, k_bar=kbar, k_bar_source=source,
        k_bar_kind=c.k_bar_kind, k_bar_published_source_id=c.k_bar_published_source_id,
        r=r, host_state=state, draft_tokens=float(c.k or 0), context_tokens=context, explanation=why,
        decomposition=decomposition,
        measured=suffix.measured if suffix else None,
        measured_near=list(suffix.measured_near) if suffix else [],
        **layout_figures(c, query).present(),
    )  # fmt: skip


def candidate_view(c: Candidate, winner: Candidate, query: LayoutQuery) -> CandidateView:
    """One searched candidate as launched (TP per node x PP for a replica that spans nodes), with its figures and
    why it lost to ``winner`` where it has figures."""
    conditional = {}
    if c.figures is not None:
        conditional["prediction"] = layout_figures(c, query)
        if c is not winner:
            conditional["why_lost"] = why_lost(winner, c, query.objective, query.output_len)
    return CandidateView(
        label=c.label(), tensor_parallel_size=c.pipeline[0] if c.pipeline else c.layout.tp,
        pipeline_parallel_size=c.pipeline[1] if c.pipeline else 1, data_parallel_size=c.layout.dp,
        enable_expert_parallel=c.layout.ep, speculative_method=None if c.method == "none" else c.method,
        num_speculative_tokens=c.k, max_num_seqs=c.max_num_seqs, max_num_batched_tokens=c.max_num_batched_tokens,
        concurrency=c.concurrency, kv_cache_dtype=c.kv_cache_dtype, spec_schedule=c.spec_schedule,
        schedule_reason=c.schedule_reason, boots=c.boots, kv_cache_tokens=c.kv_cache_tokens,
        eligible=c.eligible, why_not=c.why_not, why_kind=c.why_kind, p_win=c.p_win, chosen=c is winner,
        k_bar=c.k_bar, r=c.r, measured_gain=c.measured_gain, k_bar_source=c.k_bar_source,
        speculative_model=c.drafter,
        **conditional,
    )  # fmt: skip
