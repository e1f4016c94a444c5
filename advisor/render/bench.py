"""The benchmark that checks an answer (issue 40, item 1): the ``vllm bench serve`` command(s) for the
recommendation's operating point, with the figures predicted for each load pattern. Pure.

Every flag is vLLM's own (``vllm/benchmarks/serve.py`` ``add_cli_args`` and ``vllm/benchmarks/datasets.py``
``add_dataset_parser``); tests/test_bench.py parses the commands with each supported release's parser.
The result file this writes (``--save-result``) is what ``advisor verify --result`` reads
(advisor.probe.verify).
"""

from __future__ import annotations

import math
import shlex
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from advisor.predict.closed_loop import LIFETIMES, MIN_PROMPTS, bench_prompts
from advisor.render import quoting

PERCENTILE_METRICS = "ttft,tpot,itl,e2el"
METRIC_PERCENTILES = "50,90,99"
RESULT_DIR = "bench-results"
STATISTIC = "mean"
"""What the SLA limits are judged on: the predicted TPOT and TTFT are means (the step model's mean step,
the queueing model's mean wait), and vLLM reports ``mean_tpot_ms`` / ``mean_ttft_ms`` per run."""
TTFT_CLOSED_NOTE = (
    "TTFT: the prediction's queueing terms ASSUME Poisson arrivals; in a closed loop with fixed lengths all C "
    "prompts arrive together and their prefills queue behind one another in max_num_batched_tokens chunks, so the "
    "measured TTFT can be far above it (issue 40: 10-40x at concurrency above 8 on one H100)"
)
TTFT_CLOSED_MODEL_NOTE = (
    "closed loop simulated step by step (advisor.predict.closed_loop): all C prompts arrive together and their "
    "prefills queue in max_num_batched_tokens chunks, so TTFT here is the waves', not the Poisson-arrival TTFT the "
    "operating-point search judged the limits on (ASSUMED no client or API-server overhead)"
)
SPREAD_CLOSED_NOTE = (
    "lengths spread ±{pct:g}% (--random-range-ratio {r:g}): each request's prompt and output drawn as the benchmark draws "
    "them (seed 0), played request by request, so the closed loop's waves break up"
)
SPREAD_MEAN_NOTE = (
    "lengths spread ±{pct:g}% (--random-range-ratio {r:g}): these figures are at the mean lengths ({p} in / {o} out), "
    "which the benchmark's draws centre on"
)
RANGE_RATIO_KEY = "random_range_ratio"
"""The ``--metadata`` key the emitted command records its ``--random-range-ratio`` under (advisor.probe.verify)."""
Pattern = Literal["closed", "poisson"]


class BenchPoint(BaseModel):
    """Where ``vllm bench serve`` runs and what load it offers."""

    model_config = ConfigDict(extra="forbid")

    model: str
    """``--model``: the id or path vLLM serves (the tokenizer the prompts are built with, and result's model_id)."""
    served_model_name: str | None = None
    base_url: str = "http://127.0.0.1:8000"
    pattern: Pattern = "closed"
    concurrency: int | None = None
    """Closed loop: ``--max-concurrency`` (requests in flight over the host)."""
    request_rate: float | None = None
    """Open loop: ``--request-rate`` (requests per second over the host), Poisson (``--burstiness 1``)."""
    in_flight: float | None = None
    """Requests in flight the prediction holds (sizes ``--num-prompts`` of an open loop)."""
    prompt_len: int = 1024
    output_len: int = 512
    range_ratio: float | None = Field(None, ge=0, lt=1)
    """``--random-range-ratio``: lengths drawn from [L x (1 - r), L x (1 + r)]; only when the user gave a spread
    (``--length-spread``), then also ``--metadata random_range_ratio=r``: vLLM's result JSON does not record the
    dataset's flags (0.26.0 vllm/benchmarks/serve.py:2132-2161 writes the run's setup and traffic only; metadata
    KEY=VALUE pairs go in as strings, serve.py:1641 and 2141-2145), so ``advisor verify`` reads the spread there."""


def base_url(host: str, port: int) -> str:
    """``http://HOST:PORT`` (an IPv6 literal in brackets), for a local client of a server bound to ``host``."""
    host = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host)
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def num_prompts(p: BenchPoint) -> int:
    """Enough prompts for steady state (see LIFETIMES)."""
    load = p.concurrency if p.pattern == "closed" else (p.in_flight or 1.0)
    return bench_prompts(load or 1)


def result_filename(p: BenchPoint) -> str:
    if p.pattern == "closed":
        return f"advisor-closed-c{p.concurrency}.json"
    return f"advisor-poisson-r{p.request_rate:g}.json"


def _load_args(p: BenchPoint) -> list[str]:
    if p.pattern == "closed":
        if not p.concurrency or p.concurrency < 1:
            raise ValueError("a closed loop needs a concurrency >= 1")
        return ["--max-concurrency", str(p.concurrency)]
    if not p.request_rate or not p.request_rate > 0 or math.isinf(p.request_rate):
        raise ValueError("a Poisson load needs a finite request rate > 0")
    return ["--request-rate", f"{p.request_rate:g}", "--burstiness", "1"]


def bench_args(p: BenchPoint, *, with_location: bool = True) -> list[str]:
    """What follows ``vllm``: ``bench serve`` and its flags. ``with_location=False`` leaves out
    ``--base-url`` and ``--result-dir`` (bench.sh gives them from variables)."""
    args = ["bench", "serve", "--model", p.model]
    if p.served_model_name is not None:
        args += ["--served-model-name", p.served_model_name]
    if with_location:
        args += ["--base-url", p.base_url]
    args += ["--dataset-name", "random", "--random-input-len", str(p.prompt_len), "--random-output-len", str(p.output_len)]
    if p.range_ratio:
        args += ["--random-range-ratio", f"{p.range_ratio:g}", "--metadata", f"{RANGE_RATIO_KEY}={p.range_ratio:g}"]
    args += ["--ignore-eos", "--num-prompts", str(num_prompts(p)), *_load_args(p),
             "--percentile-metrics", PERCENTILE_METRICS, "--metric-percentiles", METRIC_PERCENTILES, "--save-result"]  # fmt: skip
    if with_location:
        args += ["--result-dir", RESULT_DIR]
    args += ["--result-filename", result_filename(p)]
    return args


def _band(value) -> dict | None:
    if value is None:
        return None
    d = value if isinstance(value, dict) else value.model_dump()
    return {k: d.get(k) for k in ("value", "low", "high")}


def _predicted(pred, pattern: Pattern) -> dict:
    """The figures predicted for ``pattern`` (one cycle model serves both: throughput and TPOT are the
    steady state's; TTFT's queueing terms are the Poisson ones, labelled where the pattern is closed)."""
    if pred is None:
        return {}
    closed = getattr(pred, "closed_loop", None) if pattern == "closed" else None
    step = _band(getattr(pred, "step_ms", None))  # the plain decode step at the running sequences (verify: median ITL)
    if closed:  # the closed loop simulated step by step (advisor.predict.closed_loop): what this benchmark reports
        return {"tpot_ms": _band(closed["mean_tpot_ms"]), "ttft_ms": _band(closed["mean_ttft_ms"]),
                "median_ttft_ms": _band(closed["median_ttft_ms"]), "p99_ttft_ms": _band(closed["p99_ttft_ms"]),
                "output_throughput_tok_s": _band(closed["output_tok_s"]), "step_ms": step,
                "ttft_unloaded_ms": getattr(pred, "ttft_unloaded_ms", None), "notes": [TTFT_CLOSED_MODEL_NOTE]}  # fmt: skip
    out = {"tpot_ms": _band(getattr(pred, "tpot_ms", None)), "ttft_ms": _band(getattr(pred, "ttft_ms", None)),
           "output_throughput_tok_s": _band(getattr(pred, "throughput_tok_s", None)), "step_ms": step,
           "ttft_unloaded_ms": getattr(pred, "ttft_unloaded_ms", None)}  # fmt: skip
    notes = []
    if pattern == "closed":
        notes.append(TTFT_CLOSED_NOTE)
    out["notes"] = notes
    return out


def benchmark(rec, *, rate: float | None = None, max_tpot_ms: float | None = None, max_ttft_ms: float | None = None,
              model: str | None = None, served_model_name: str | None = None, host: str = "127.0.0.1",
              port: int = 8000, range_ratio: float | None = None) -> dict:  # fmt: skip
    """``recommend --json``'s ``benchmark`` object for a Recommendation: the command(s), the pattern the
    answer was computed for, the predicted figures per pattern and the SLA it claims.

    ``rate``: the ``--request-rate`` the answer was asked for (then the benchmark is Poisson at it, as the
    open-loop search assumed); otherwise a closed loop at the requests in flight the figures are at. No
    Poisson run is offered beside a closed-loop answer: at the rate the closed loop completes the slots are
    fully used, so an open loop there queues without bound and its figures are not the ones predicted.
    ``commands`` is a list so that item 2 of issue 40 (TTFT per pattern) can add the other pattern."""
    pred = rec.prediction
    prompt_len = (pred.prompt_len if pred is not None and pred.prompt_len else None) or 1024
    output_len = (pred.output_len if pred is not None and pred.output_len else None) or 512
    conc = (pred.offered_concurrency if pred is not None and pred.offered_concurrency else None) or rec.workload.concurrency
    common = {"model": model or rec.model["id"], "served_model_name": served_model_name, "base_url": base_url(host, port),
              "prompt_len": prompt_len, "output_len": output_len, "range_ratio": range_ratio}  # fmt: skip
    answered: Pattern = "poisson" if rate is not None else "closed"
    if rate is not None:
        points = [BenchPoint(pattern="poisson", request_rate=rate, in_flight=_in_flight(pred, rate, conc), **common)]
    else:
        points = [BenchPoint(pattern="closed", concurrency=conc, **common)]
    sla = {"max_tpot_ms": max_tpot_ms, "max_ttft_ms": max_ttft_ms, "statistic": STATISTIC,
           "claimed": bool(rec.sla_met) and (max_tpot_ms is not None or max_ttft_ms is not None)}  # fmt: skip
    predicted = {p.pattern: _predicted(pred, p.pattern) for p in points}
    if range_ratio:
        for p in points:
            fig = predicted[p.pattern]
            simulated = p.pattern == "closed" and bool(getattr(pred, "closed_loop", None))  # as _predicted decides
            note = (SPREAD_CLOSED_NOTE if simulated else SPREAD_MEAN_NOTE).format(r=range_ratio, pct=range_ratio * 100, p=prompt_len, o=output_len)
            fig["notes"] = [*fig.get("notes", []), note]
    return _assemble(points, answered, predicted, sla, answer_facts(rec))


def benchmark_of_figures(*, model: str, concurrency: int, prompt_len: int, output_len: int, predicted: dict,
                         sla: dict, answer: dict) -> dict:  # fmt: skip
    """The ``benchmark`` object of a closed-loop answer given by its figures rather than a Recommendation (a
    pre-registered campaign's answers, which predate ``benchmark``: scripts/c14_verify_records.py): the command
    :func:`benchmark` builds for it, ``predicted`` as ``commands[].predicted`` holds it (``tpot_ms``, ``ttft_ms``,
    ``output_throughput_tok_s``, ``step_ms`` bands), the SLA and the answer's facts (:func:`answer_facts`' keys)."""
    point = BenchPoint(model=model, pattern="closed", concurrency=concurrency, prompt_len=prompt_len, output_len=output_len)
    sla = {"max_tpot_ms": sla.get("max_tpot_ms"), "max_ttft_ms": sla.get("max_ttft_ms"), "statistic": STATISTIC,
           "claimed": bool(sla.get("claimed"))}  # fmt: skip
    return _assemble([point], "closed", {"closed": predicted}, sla, answer)


def _assemble(points: list[BenchPoint], answered: Pattern, predicted: dict, sla: dict, answer: dict) -> dict:
    commands = []
    for p in points:
        args = bench_args(p)
        commands.append({"pattern": p.pattern, "primary": p.pattern == answered,
                         "load": {"max_concurrency": p.concurrency} if p.pattern == "closed" else {"request_rate": p.request_rate, "burstiness": 1},
                         "num_prompts": num_prompts(p), "argv": ["vllm", *args],
                         "command": " ".join(shlex.quote(a) for a in ["vllm", *args]),
                         "result_file": f"{RESULT_DIR}/{result_filename(p)}",
                         "predicted": predicted[p.pattern]})  # fmt: skip
    first = points[0]
    out = {"pattern": answered, "model": first.model, "prompt_len": first.prompt_len, "output_len": first.output_len,
           "commands": commands, "sla": sla, "answer": answer,
           "num_prompts_why": f"max({LIFETIMES} x requests in flight, {MIN_PROMPTS}): ten waves of a closed loop "
                              f"(ramp and drain weigh 2 of 10), about ten request lifetimes of an open one",
           "verify": f"advisor verify --result {commands[0]['result_file']} --prediction RECOMMEND.json"}  # fmt: skip
    if first.range_ratio:
        from advisor.predict.closed_loop import spread_range

        r = first.range_ratio
        out["range_ratio"] = r
        out["length_ranges"] = {"prompt": list(spread_range(first.prompt_len, r)),
                                "output": list(spread_range(first.output_len, r, output=True))}  # fmt: skip
    return out


def answer_facts(rec) -> dict:
    """What ``advisor verify`` stores beside the figures: the model's class and weights, the method, the layout, the
    GPU and vLLM line the answer is for, the measured step correction its decode step carries (1: none), and the
    running sequences, context, batch limits and KV cache that step and the closed loop were predicted with (so the lab
    can re-predict them with later physics at the run's own load)."""
    from advisor import __version__
    from advisor.predict.step_correction import class_of, dtype_key

    pred, d, m, host = rec.prediction, getattr(rec, "decision", None), rec.model, getattr(rec, "host", None)
    corr = getattr(pred, "step_correction", None) if pred is not None else None
    return {"model_id": m.get("id"), "arch_class": class_of(m.get("arch"), m.get("attention")) if m.get("arch") else None,
            "weights_dtype": dtype_key(m.get("weights_dtype")) if m.get("weights_dtype") else None,
            "method": (getattr(pred, "method", None) or "none") if pred is not None else None,
            "gpu": getattr(host, "gpu", None), "gpus": getattr(d, "gpus", None),
            "tensor_parallel_size": getattr(d, "tensor_parallel_size", None),
            "data_parallel_size": getattr(d, "data_parallel_size", None), "vllm_version": getattr(host, "vllm_version", None),
            "step_correction": corr.factor if corr is not None else 1.0,
            "running_per_replica": getattr(pred, "running_per_replica", None) if pred is not None else None,
            "context_tokens": getattr(pred, "context_tokens", None) if pred is not None else None,
            "max_num_seqs": getattr(d, "max_num_seqs", None), "max_num_batched_tokens": getattr(d, "max_num_batched_tokens", None),
            "kv_cache_dtype": getattr(d, "kv_cache_dtype", None),
            "kv_cache_tokens": getattr(getattr(rec, "memory", None), "kv_cache_tokens", None),
            "advisor_version": __version__}  # fmt: skip


def _in_flight(pred, rate: float, conc: int | None) -> float:
    """Requests in flight an open loop at ``rate`` holds: the prediction's, else Little's law on its figures."""
    if pred is not None and getattr(pred, "offered_concurrency", None):
        return float(pred.offered_concurrency)
    tpot, ttft = (getattr(pred, "tpot_ms", None), getattr(pred, "ttft_ms", None)) if pred is not None else (None, None)
    if tpot is not None and ttft is not None and pred.output_len:
        return rate * (ttft.value + pred.output_len * tpot.value) / 1000
    return float(conc or 1)


def text_lines(bench: dict) -> list[str]:
    """recommend's "Check it:" block: the primary command, its predicted figures, then verify."""
    primary = next(c for c in bench["commands"] if c["primary"])
    what = (f"closed loop at {primary['load']['max_concurrency']} requests in flight" if primary["pattern"] == "closed"
            else f"Poisson arrivals at {primary['load']['request_rate']:g} requests/s")  # fmt: skip
    lines = [f"Check it (vLLM's own benchmark against the server above, {what}, {primary['num_prompts']} prompts):",
             f"  {primary['command']}"]  # fmt: skip
    if bench.get("range_ratio"):
        rng = bench["length_ranges"]
        lines.append(f"  lengths spread ±{bench['range_ratio'] * 100:g}% (--random-range-ratio {bench['range_ratio']:g}): prompts {rng['prompt'][0]}-{rng['prompt'][1]}, "
                     f"outputs {rng['output'][0]}-{rng['output'][1]} tokens, uniform, means {bench['prompt_len']} / {bench['output_len']}")  # fmt: skip
    f = primary["predicted"]
    figs = []
    for key, name, unit, fmt in (("tpot_ms", "TPOT", " ms", "{:.1f}"), ("ttft_ms", "TTFT", " ms", "{:.0f}"),
                                 ("output_throughput_tok_s", "output", " tok/s", "{:,.0f}")):  # fmt: skip
        b = f.get(key)
        if b and b.get("value") is not None:
            figs.append(f"{name} {fmt.format(b['value'])}{unit} [{fmt.format(b['low'])}-{fmt.format(b['high'])}]")
    if figs:
        lines.append("  predicted (means): " + ", ".join(figs))
    sla = bench["sla"]
    limits = [f"{n} <= {v:g} ms" for n, v in (("TPOT", sla["max_tpot_ms"]), ("TTFT", sla["max_ttft_ms"])) if v is not None]
    if limits:
        lines.append(f"  SLA {'claimed' if sla['claimed'] else 'NOT met by the answer'}: {', '.join(limits)} (judged on the {sla['statistic']})")
    if primary["pattern"] == "closed":
        simulated = TTFT_CLOSED_MODEL_NOTE in (f.get("notes") or [])
        if simulated and bench.get("range_ratio"):
            lines.append("  note: the closed loop simulated request by request with the lengths the benchmark draws (seed 0; "
                         "advisor.predict.closed_loop; ASSUMED no client or API-server overhead)")  # fmt: skip
        else:
            lines.append("  note: " + ("the closed loop's waves simulated step by step (advisor.predict.closed_loop; ASSUMED no "
                                       "client or API-server overhead)" if simulated else
                                       "TTFT's queueing terms ASSUME Poisson arrivals; a closed loop's synchronised waves can "
                                       "measure far above it"))  # fmt: skip
    elif bench.get("range_ratio"):
        lines.append(f"  note: figures at the mean lengths ({bench['prompt_len']} in / {bench['output_len']} out); the "
                     f"benchmark's draws centre on them")  # fmt: skip
    lines.append(f"  then: advisor verify --result {primary['result_file']} MODEL [the same options] (or --prediction FILE of recommend --json)")
    return lines


PREDICTION_FILE = "advisor-recommendation.json"
"""What render writes beside bench.sh: the ``recommend --json`` object, for ``verify --prediction``."""


def _without_location(argv: list[str]) -> list[str]:
    """``argv`` after the program, less ``--base-url X`` and ``--result-dir X`` (bench.sh gives them from variables)."""
    out, it = [], iter(argv[1:])
    for a in it:
        if a in ("--base-url", "--result-dir"):
            next(it, None)
            continue
        out.append(a)
    return out


def render_script(bench: dict, target, decision, version: str) -> str:
    """bench.sh (templates/vllm/bench.sh.j2): the benchmark command(s), every value quoted with ``shq``."""
    from advisor.render.files import _environment, base_context

    cmds = [{"pattern": c["pattern"], "args": _without_location(c["argv"]), "filename": c["result_file"].rsplit("/", 1)[-1],
             "predicted_comment": quoting.comment(_predicted_comment(c))} for c in bench["commands"]]  # fmt: skip
    primary = next(c for c in bench["commands"] if c["primary"])
    pattern = (f"closed loop, --max-concurrency {primary['load']['max_concurrency']}" if primary["pattern"] == "closed"
               else f"Poisson, --request-rate {primary['load']['request_rate']:g} --burstiness 1")  # fmt: skip
    if bench.get("range_ratio"):
        rng = bench["length_ranges"]
        pattern += (f"; lengths spread +/-{bench['range_ratio'] * 100:g}% with --random-range-ratio {bench['range_ratio']:g}: prompts {rng['prompt'][0]}-"
                    f"{rng['prompt'][1]}, outputs {rng['output'][0]}-{rng['output'][1]} tokens")  # fmt: skip
    sla = bench["sla"]
    limits = [f"{n} <= {v:g} ms" for n, v in (("TPOT", sla["max_tpot_ms"]), ("TTFT", sla["max_ttft_ms"])) if v is not None]
    sla_text = ("none given" if not limits else ", ".join(limits) + f" on the {sla['statistic']}, "
                + ("claimed by the answer" if sla["claimed"] else "NOT met by the answer (not claimed)"))  # fmt: skip
    ctx = {**base_context(target, decision, version), "bench_commands": cmds, "base_url": base_url(target.host, target.port),
           "pattern_comment": quoting.comment(pattern), "sla_comment": quoting.comment(sla_text)}  # fmt: skip
    return _environment(version).get_template("bench.sh.j2").render(**ctx)


def _predicted_comment(c: dict) -> str:
    f = c["predicted"]
    parts = []
    for key, name in (("tpot_ms", "TPOT ms"), ("ttft_ms", "TTFT ms"), ("output_throughput_tok_s", "output tok/s")):
        b = f.get(key)
        if b and b.get("value") is not None:
            parts.append(f"{name} {b['value']:g} [{b['low']:g}, {b['high']:g}]")
    return f"{c['pattern']}: predicted mean " + ", ".join(parts) if parts else f"{c['pattern']}: no figures predicted"
