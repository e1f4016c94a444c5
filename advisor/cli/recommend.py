"""``advisor recommend`` and ``advisor render``: thin adapters over advisor.plan.recommend."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from advisor.cli import options as o
from advisor.cli._app import app
from advisor.cli.common import JsonOpt, emit_json, model_arg, settings, table, vllm_choice
from advisor.errors import NotBootableError, UsageError
from advisor.render.gate import nothing_boots
from advisor.rules.policy import load_policy

if TYPE_CHECKING:
    from advisor.domain.probe_plan import ProbePlan


def build_recommendation(model: str, opts, gpus_per_node: int | None = None, **changes):
    """Load everything a recommendation needs (I/O) and call the pure core with the shared options
    (advisor.cli.options.RecommendOptions; ``changes`` replace some, e.g. ``gpus``). The memory plan
    uses the defaults of the vLLM line ``vllm_choice`` resolves. ``gpus_per_node`` (render's flag):
    a replica larger than a node is searched, as it is rendered, as TP per node x PP across nodes."""
    opts = opts.replace(**changes) if changes else opts
    gpu, gpus, tp, corpus, tokenizer = opts.gpu, opts.gpus, opts.tp, opts.corpus, opts.tokenizer
    concurrency, max_model_len, k, gmu = opts.concurrency, opts.max_model_len, opts.k, opts.gmu
    vllm_version = vllm_choice(opts.vllm_version).version
    query = layout_query(opts.objective, opts.max_tpot_ms, opts.max_ttft_ms, opts.prompt_len, opts.output_len,
                         opts.ngram_k, opts.ngram_lookup, concurrency_given=concurrency is not None,
                         request_rate=opts.request_rate, kv_cache_dtype=opts.kv_cache_dtype, spec=opts.spec,
                         arrival=opts.arrival, draft_k=opts.draft_k, length_spread=opts.length_spread)  # fmt: skip
    from advisor.vllm_facts import facts

    # Multi-node replicas: priced as TP per node x PP, and only with speculation this vLLM runs under PP.
    query = query.model_copy(update={"pp_speculative_methods": facts(vllm_version).pp_speculative_methods,
                                     **({"gpus_per_node": gpus_per_node} if gpus_per_node else {})})  # fmt: skip
    from advisor.model.load import load_profile
    from advisor.hardware.resolve import resolve_host
    from advisor.cli.wiring import StorePredictor, workload_for
    from advisor.plan.planner import planner
    from advisor.plan.recommend import fact_names, recommend
    from advisor.rules.loader import load_rules

    s = settings()
    if concurrency is None:
        concurrency = o.DEFAULT_CONCURRENCY
    profile = load_profile(model, s)
    host = resolve_host(s, gpu, gpus)
    if vllm_version is not None:
        host = host.model_copy(update={"vllm_version": vllm_version})
    if tp is not None and tp > host.gpus:
        raise UsageError(f"--tp {tp} needs {tp} GPUs but the host has {host.gpus}; lower --tp or raise --gpus")
    from advisor.cli.common import replay_progress

    on_progress, prog = replay_progress(corpus is not None and not corpus.startswith("~") and Path(corpus).is_file() and sys.stderr.isatty())
    fallback = tokenizer is None  # a --tokenizer the user named is never substituted
    k_kbar = k or load_policy().num_speculative_tokens  # the K a trace file's K̄ is measured at
    if prog is None:
        workload = workload_for(corpus, concurrency, tokenizer or model, k_kbar, allow_fallback=fallback)
    else:  # replaying a trace file takes seconds to minutes: show it
        with prog:
            workload = workload_for(corpus, concurrency, tokenizer or model, k_kbar, on_progress=on_progress,
                                    allow_fallback=fallback)  # fmt: skip
    predict = StorePredictor(s)
    rules = load_rules(s.rules_dirs, facts=fact_names())
    drafters = drafters_of(profile, opts.draft, s)
    from advisor.cli.wiring import step_corrections_for

    corrections, how = step_corrections_for(s, host, predict.skipped)
    rec = recommend(
        profile, host, workload, rules,
        tensor_parallel_size=tp, max_model_len=max_model_len, num_speculative_tokens=k,
        gpu_memory_utilization=gmu, predictor=predict, planner=planner, query=query, drafters=drafters,
        probes=predict.records or (), step_corrections=corrections, step_correction_how=how,
    )  # fmt: skip
    rec.warnings.extend(predict.skipped)
    return rec


def drafters_of(profile, draft: str | None, s) -> list:
    """The drafters the model-drafted methods price (I/O: reads their configs): ``--draft`` alone when given (a dir
    or id that is no drafter, or one vLLM refuses with this model, is a one-line error), else every catalog drafter
    paired with the model that can run with it."""
    from advisor.model.drafter import check_pair, drafters_for, load_drafter

    if draft is not None:
        from advisor.errors import AdvisorError

        try:
            d = load_drafter(draft, settings=s)
        except AdvisorError as exc:  # same exit code, the flag named
            raise type(exc)(f"--draft {draft}: {exc}") from None
        issue = check_pair(d, profile)
        if issue is not None and issue.kind == "refusal":
            raise UsageError(f"--draft {draft}: {issue.text}")
        return [d]
    out = []
    for ref in drafters_for(profile.id):
        d = load_drafter(ref, settings=s)
        issue = check_pair(d, profile)
        if issue is None or issue.kind != "refusal":
            out.append(d)
    return out


def _kbar_label(workload, source: str, method: str | None = None, kind: str | None = None) -> str:
    """Where the printed K̄ came from, in the words of the decomposition line, decided by the prediction's typed
    ``k_bar_kind`` (advisor.domain.prediction.KbarSourceKind; ``source`` is only shortened for display). A drafter
    method's K̄ is its own acceptance, never the traffic file's suffix replay: its source as the method wrote it."""
    from pathlib import Path

    from advisor import methods

    if method and method != "none" and methods.get(method).uses_drafter:
        return f"K̄: {source}"

    from advisor.predict.kbar_prior import OWN_SOURCE

    if workload.k_bar and workload.k_bar_own_outputs:
        return f"K̄ from the model's own outputs (replay of {Path(workload.corpus or '').name})"
    if workload.k_bar:
        return f"K̄ replayed on the recorded responses in {Path(workload.corpus or '').name} (not the model's own outputs)"
    if method == "ngram" and kind is not None:  # n-gram's own K̄ (absolute.ngram_gain's note "... from SOURCE"): SOURCE, unlinked
        source = re.split(r" \((?:https?:|calibration/)", source.partition(" from ")[2], maxsplit=1)[0]
    what = (OWN_SOURCE if kind == "own_output" else "implied by the seed sweep" if kind in ("seed", "fallback")
            else source.split(";")[0])  # fmt: skip
    corpus = "unknown" if not workload.corpus else Path(workload.corpus).name if workload.corpus_is_file else workload.corpus
    return f"K̄ prior (corpus {corpus}: {what})"


def gain_row(p) -> str:
    """The header's gain: the launched method's (suffix: with its P(win); plain: 1 by definition)."""
    if p.method == "none":
        return "x1.00 (plain decoding; the speculative candidates are listed with their own figures)"
    name = p.method or "suffix"
    pw = f", P(win)={p.p_win:.2f}" if p.p_win is not None else ""
    return f"{name} x{p.gain:.2f} [{p.gain_low:.2f}, {p.gain_high:.2f}]{pw}, K̄={p.k_bar:.2f}, R={p.r:.2f}"


def first_lines(rec, nearest: str | None) -> list[str]:
    """What a script or a reader must see first: nothing boots (with what would), an SLA nothing meets."""
    out = []
    if rec.memory is not None and not rec.memory.boots:
        hint = f"nearest configuration that boots: {nearest}" if nearest else nothing_boots()
        out.append(f"DOES NOT BOOT on {rec.host.gpus}x{rec.host.gpu}: {rec.memory.reason}; {hint}")
    if rec.sla_met is False:
        out.append(f"SLA not met: {rec.limits_missed}" if rec.limits_missed else "SLA not met")
    return out


def bench_for(rec, opts, **where) -> dict:
    """The ``benchmark`` object (advisor.render.bench): the vllm bench serve command(s) that check this answer."""
    from advisor.render.bench import benchmark

    return benchmark(rec, rate=opts.request_rate, max_tpot_ms=opts.max_tpot_ms, max_ttft_ms=opts.max_ttft_ms,
                     range_ratio=opts.length_spread or None, **where)  # fmt: skip


def _print(rec, vllm, first: list[str] = (), bench: dict | None = None) -> None:
    from advisor.render.flags import serve_argv
    import shlex

    for line in first:
        print(line)
    if first:
        print()
    d = rec.decision
    spec = f"{d.speculative_method}, K={d.num_speculative_tokens}" if d.speculative_method else "off (plain decoding)"
    rows = [
        ("model", f"{rec.model['id']} ({rec.model['arch']}, {rec.model['params_total_b']:g}B, {rec.model['weights_dtype']}, {rec.model['family']})"),
        ("host", f"{rec.host.gpus}x{rec.host.gpu} ({rec.host.origin})"),
        ("vLLM", f"{vllm.version} ({vllm.why})"),
        ("traffic", f"{rec.workload.corpus or 'unknown'}, concurrency {rec.workload.concurrency}"),
        *([("servers", f"{rec.servers} identical servers of this configuration behind a load balancer "
            f"({rec.servers * d.gpus} GPUs); the figures below are one server's")] if rec.servers > 1 else []),
        ("speculative decoding", spec),
        ("gpu_memory_utilization", d.gpu_memory_utilization),
        ("tensor_parallel_size", d.tensor_parallel_size),
        ("data_parallel_size", f"{d.data_parallel_size}" + (" (expert parallel)" if d.enable_expert_parallel else "")),
        *([("pipeline_parallel_size", f"{d.pipeline_parallel_size} ({d.nodes} nodes of TP {d.tensor_parallel_size}, "
            f"{d.distributed_executor_backend or 'default'} executor)")] if d.pipeline_parallel_size > 1 else []),
        ("max_model_len", d.max_model_len),
        ("cudagraph_mode", d.cudagraph_mode),
        ("DSA env", "on" if d.dsa_env else "off"),
        ("host DSA work queues", rec.host_dsa_queues or "either"),
    ]
    if rec.prediction:
        p = rec.prediction
        rows.append(("predicted gain", gain_row(p)))
        dc = p.decomposition
        if dc is not None:
            host = f"; host profile {p.host_profile}, match: {p.host_match}" if p.host_profile else ""
            plain = "plain decoding; the speculative candidates' " if p.method == "none" else ""
            rows.append(("gain = K̄ / R x fitted", f"{dc.k_bar:.2f} / {dc.r:.2f} x {dc.fitted_factor:.2f} = "
                         f"{dc.k_bar / dc.r * dc.fitted_factor:.2f} ({plain}{_kbar_label(rec.workload, dc.sources.get('k_bar', ''), p.method, p.k_bar_kind)}{host})"))
        if p.measured:
            ms = p.measured
            kb = f", K̄={ms.k_bar:.2f}" if ms.k_bar else ""
            rows.append(("measured on this host", f"x{ms.gain:.2f}{kb} ({ms.runs} probe run(s))"))
    if rec.memory:
        m = rec.memory
        rows.append(("memory", f"{'boots' if m.boots else 'DOES NOT BOOT'}: {m.kv_cache_tokens:,} KV tokens, {m.max_concurrency_at_max_len:.1f} requests at max_model_len"))
    print(table(rows, "Recommendation"))
    from advisor.report.text import text_lines

    for line in text_lines(rec):
        print(line)
    print("\nLaunch:\n  " + " ".join(shlex.quote(a) for a in serve_argv(rec.model["id"], d, vllm.version)))
    if d.env:
        print("  env: " + " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(d.env.items())))
    if bench is not None:
        from advisor.render.bench import text_lines as bench_lines

        print("\n" + "\n".join(bench_lines(bench)))
    print("\nWhy:")
    for line in rec.trace:
        print(f"  - {line}")
    for line in rec.prediction.explanation if rec.prediction else []:
        if "NOT FITTED" in line or "ASSUMED" in line or "it is fitted" in line or line.startswith("left to calibration"):
            print(f"  - prediction: {line}")
    for f in rec.rules_fired:
        if f["severity"] != "info" or f["set"].get("speculation"):
            print(f"  - [{f['id']}] {f['rationale']}")
    if rec.probe_plan:
        plan = rec.probe_plan
        print(f"\nUnsure: {plan.reason}.")
        print("  Settle it on this host (real vLLM, a few minutes), then recommend again:")
        print(f"    {plan.command}")
        print("  or run this command again with --probe.")
        if plan.corpus_note:
            print(f"  note: {plan.corpus_note}")
    warnings = [*rec.warnings, *([vllm.note] if vllm.note else [])]
    if warnings:
        print("\nWarnings:")
        for w in warnings:
            print(f"  ! {w}")


@app.command("recommend")
@o.with_recommend_options
def recommend_cmd(model: str = model_arg(), opts: o.RecommendOptions = None, html: Path = o.HTML,
                  json_out: bool = JsonOpt) -> None:  # fmt: skip
    """Recommend the fastest vLLM configuration for MODEL on this (or the given) GPU host, with reasons.

    Where the prediction is unsure the output names the probe campaign that settles it; --probe runs
    it here and recommends again from the recalibrated predictor. --html FILE also writes the
    `advisor report` page of this recommendation. Exit 8 when nothing boots (the nearest
    configuration that boots is the first line)."""
    vllm = vllm_choice(opts.vllm_version)
    if html is not None:
        from advisor.atomic import check_target

        check_target(html)
    rec, probed = recommend_maybe_probe(model, opts, quiet=json_out)
    if html is not None:
        from advisor.cli.common import write_html

        write_html(rec, model, html)
    nearest = None
    if rec.memory is not None and not rec.memory.boots:
        from advisor.render.gate import nearest_booting

        nearest = nearest_booting(rec, lambda n: build_recommendation(model, opts, gpus=n, tp=None))
    if json_out:
        out = rec.model_dump(mode="json")
        if probed is not None:
            out["probed"] = probed
        out["vllm"] = vllm.model_dump()
        if nearest is not None:
            out["nearest_bootable"] = nearest
        out["benchmark"] = bench_for(rec, opts)
        emit_json(out)
    else:
        if probed is not None:
            print(f"probed: campaign {probed['campaign_id']} ({', '.join(probed['summary'])}); recommending again\n")
        _print(rec, vllm, first_lines(rec, nearest), bench_for(rec, opts))
    if rec.memory is not None and not rec.memory.boots:
        raise typer.Exit(NotBootableError.exit_code)


def layout_query(objective: str, max_tpot_ms, max_ttft_ms, prompt_len: int, output_len: int,
                 ngram_k: int | None = None, ngram_lookup: str | None = None, *, concurrency_given: bool = True,
                 request_rate: float | None = None, kv_cache_dtype: str = "auto", spec: str | None = None,
                 arrival: str | None = None, draft_k: int | None = None, length_spread: float = 0.0):  # fmt: skip
    """The layout search's options (advisor.plan.layout.LayoutQuery), checked."""
    from advisor.plan.layout import LayoutQuery

    if objective not in ("throughput", "latency"):
        raise UsageError(f"--objective {objective!r}: choose throughput or latency")
    window = None
    if ngram_lookup is not None:
        parts = ngram_lookup.split(":")
        if len(parts) != 2 or not all(x.strip().isdigit() and int(x) >= 1 for x in parts) or int(parts[0]) > int(parts[1]):
            raise UsageError(f"--ngram-lookup {ngram_lookup!r}: give MIN:MAX with 1 <= MIN <= MAX (e.g. 2:5)")
        window = (int(parts[0]), int(parts[1]))
    if kv_cache_dtype not in ("auto", "fp8", "search"):
        raise UsageError(f"--kv-cache-dtype {kv_cache_dtype!r}: choose auto, fp8 or search")
    if request_rate is not None and concurrency_given:
        raise UsageError("--request-rate and --concurrency both give the load: pass one of them")
    from advisor import methods

    if spec is not None and spec not in methods.ids():
        raise UsageError(f"--spec {spec!r}: choose one of {', '.join(methods.ids())}")
    if arrival is not None and arrival not in ("closed", "poisson"):
        raise UsageError(f"--arrival {arrival!r}: choose closed or poisson")
    if arrival == "closed" and request_rate is not None:
        raise UsageError("--arrival closed with --request-rate: a rate is an open loop (Poisson); drop one of them")
    check_length_spread(length_spread, prompt_len)
    return LayoutQuery(objective=objective, max_tpot_ms=max_tpot_ms, max_ttft_ms=max_ttft_ms, prompt_len=prompt_len,
                       output_len=output_len, ngram_k=ngram_k, ngram_lookup=window, concurrency_given=concurrency_given,
                       request_rate=request_rate, kv_cache_dtype=kv_cache_dtype, spec=spec, arrival=arrival,
                       draft_k=draft_k, length_spread=length_spread)  # fmt: skip


def check_length_spread(r: float, prompt_len: int) -> None:
    """--length-spread R as vLLM's benchmark takes --random-range-ratio (0.26.0 vllm/benchmarks/datasets/utils.py:66-69:
    ``0 <= ratio < 1``; datasets.py:607-617: the shortest prompt, ``floor(len x (1 - ratio))``, at least 1 token)."""
    import math

    if not 0 <= r < 1:  # NaN fails too
        raise UsageError(f"--length-spread {r:g}: give R with 0 <= R < 1 (vllm bench serve --random-range-ratio draws "
                         f"each length from [L x (1 - R), L x (1 + R)] and refuses R >= 1); 0 keeps every length fixed")  # fmt: skip
    if math.floor(prompt_len * (1 - r)) < 1:
        raise UsageError(f"--length-spread {r:g} with --prompt-len {prompt_len}: the shortest prompt would be "
                         f"floor({prompt_len} x {1 - r:g}) = 0 tokens, which vllm bench serve refuses; lower --length-spread "
                         f"or raise --prompt-len")  # fmt: skip


def recommend_maybe_probe(model: str, opts, *, quiet: bool, gpus_per_node: int | None = None):
    """(Recommendation, probe summary or None): ``build_recommendation(model, opts)``, and with
    ``opts.probe`` the probe campaign it proposes run here and the recommendation built again."""
    rec = build_recommendation(model, opts, gpus_per_node=gpus_per_node)
    probed = None
    if opts.probe and rec.probe_plan:
        probed = _run_plan(rec.probe_plan, opts.probe_duration, opts.probe_requests, opts.server_cmd, quiet=quiet)
        rec = build_recommendation(model, opts, gpus_per_node=gpus_per_node)
        if not (rec.prediction and rec.prediction.measured):
            rec.warnings.append(f"--probe did not settle it ({'; '.join(probed['summary'])}): the recommendation "
                                f"still rests on the prediction; see the logs under {Path(probed['store']).parent / 'campaigns'}")  # fmt: skip
    elif opts.probe:
        print("--probe: the recommendation is settled; nothing to probe", file=sys.stderr)
    return rec, probed


def _run_plan(plan: ProbePlan, duration: float, requests: int | None, server_cmd: str, *, quiet: bool) -> dict:
    """Run the recommendation's probe plan (real vLLM) into the probe store."""
    from advisor.cli.probe import run_spec
    from advisor.domain.decision import Decision
    from advisor.probe.campaign import CampaignSpec
    from advisor.probe.configs import parse_configs
    from advisor.probe.load import LoadSpec

    base = Decision(tensor_parallel_size=plan.tensor_parallel_size, gpu_memory_utilization=plan.gpu_memory_utilization,
                    max_model_len=plan.max_model_len)  # fmt: skip
    load = LoadSpec(concurrency=plan.concurrency, duration_s=duration, max_requests=requests)
    spec = CampaignSpec(model=plan.model, corpus=plan.corpus, configs=parse_configs(plan.configs), load=load,
                        base=base, server_cmd=server_cmd, passes=plan.passes)  # fmt: skip
    if not quiet:
        print(f"unsure ({plan.reason}): probing {plan.configs} on {plan.corpus}", file=sys.stderr)
    result, store = run_spec(spec, quiet=quiet)
    summary = [f"{r.config} {r.outcome}" + (f" {r.throughput_tok_s:.0f} tok/s" if r.throughput_tok_s else "") for r in result.records]
    return {"campaign_id": result.campaign_id, "store": str(store), "summary": summary,
            "records": [r.model_dump(mode="json", exclude={"host"}) for r in result.records]}  # fmt: skip
