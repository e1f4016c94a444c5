"""``advisor verify`` (issue 40, item 3): a ``vllm bench serve --save-result`` JSON against the answer's
prediction and the SLA it claimed. Pure but for reading the file.

Field names as vLLM's ``vllm/benchmarks/serve.py`` writes them (``main``'s ``result_json`` merged with
``benchmark``'s ``result``): ``model_id``, ``num_prompts``, ``request_rate`` (a number, or ``"inf"``),
``burstiness``, ``max_concurrency`` (null without), ``duration``, ``completed``, ``failed``,
``total_input_tokens``, ``total_output_tokens``, ``output_throughput`` (tok/s), and per metric of
``--percentile-metrics`` ``mean_<m>_ms``, ``median_<m>_ms``, ``std_<m>_ms``, ``p<P>_<m>_ms`` (P as in
``--metric-percentiles``: ``p99_tpot_ms``). ``input_lens`` / ``output_lens`` are kept only with
``--save-detailed``, so the lengths are checked from the totals.

The result records no dataset flag (0.26.0 serve.py:2132-2161; 0.32.0 the same), so not ``--random-range-ratio``
either: the command advisor emits for a spread adds ``--metadata random_range_ratio=R`` (a string in the result,
serve.py:2141-2145), read here; without it, a ``--save-detailed`` result's per-request prompt lengths tell the spread
(:func:`measured_spread`); a result with neither is matched on its load alone, with a warning when the answer asked
for a spread.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

from advisor.errors import DataError, UsageError, printable

REQUIRED = ("model_id", "completed", "num_prompts", "request_rate", "duration", "total_input_tokens",
            "total_output_tokens", "output_throughput", "mean_ttft_ms", "mean_tpot_ms")  # fmt: skip
STATISTICS = ("mean", "median", "p50", "p90", "p99")
LENGTH_TOLERANCE = 0.10
"""Mean prompt / output length further than this from the predicted one: the run is not the answer's shape."""
LOAD_TOLERANCE = 0.02
STEP_FIGURE = "decode step ms"
"""The row of a plain-decoding answer's predicted decode step against the run's median inter-token latency."""
MAX_BYTES = 256 * 1024 * 1024


def _say(value: object) -> str:
    return printable(str(value)[:200], keep_newlines=False)


def read_result(path: Path) -> dict:
    """The result JSON, checked: one object with vLLM's fields (DataError, one line, otherwise)."""
    try:
        if path.stat().st_size > MAX_BYTES:
            raise DataError(f"{_say(path)}: larger than {MAX_BYTES >> 20} MiB; not a vllm bench serve result")
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DataError(f"{_say(path)}: no such file") from None
    except IsADirectoryError:
        raise DataError(f"{_say(path)}: is a directory; give the result JSON vllm bench serve --save-result wrote") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(f"{_say(path)}: cannot read it ({_say(getattr(exc, 'strerror', None) or exc)})") from None
    return parse_result(text, str(path))


def _finite(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def parse_result(text: str, source: str = "result") -> dict:
    src = _say(source)
    lines = [ln for ln in text.splitlines() if ln.strip()]
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        if len(lines) > 1:  # --append-result writes one object per line
            raise DataError(f"{src}: {len(lines)} JSON lines (vllm bench serve --append-result?): give a file with one run") from None
        raise DataError(f"{src}: not JSON ({_say(exc.msg)} at line {exc.lineno} column {exc.colno}); give the file vllm bench serve --save-result wrote") from None
    if not isinstance(data, dict):
        raise DataError(f"{src}: a JSON {type(data).__name__}, not the object vllm bench serve --save-result writes")
    missing = [k for k in REQUIRED if k not in data]
    if missing:
        raise DataError(f"{src}: missing {', '.join(missing)}: not a vllm bench serve --save-result file of a generation run"
                        + (" (--percentile-metrics must include ttft and tpot)" if any(m.endswith("_ms") for m in missing) else ""))  # fmt: skip
    if not isinstance(data["model_id"], str) or not data["model_id"]:
        raise DataError(f"{src}: model_id is {_say(json.dumps(data['model_id']))}, not a model name")
    for k in ("completed", "num_prompts", "total_input_tokens", "total_output_tokens"):
        if not isinstance(data[k], int) or isinstance(data[k], bool) or data[k] < 0:
            raise DataError(f"{src}: {k} is {_say(json.dumps(data[k]))}, not a count")
    if data["completed"] == 0:
        raise DataError(f"{src}: completed is 0 ({data.get('failed', '?')} failed): no request finished, nothing to compare; "
                        "check the server log and that --model names what it serves")  # fmt: skip
    for k, v in data.items():
        if k.endswith("_ms") or k in ("duration", "output_throughput"):
            if v is not None and not _finite(v):
                raise DataError(f"{src}: {k} is {_say(json.dumps(v))}, not a finite number")
    rate = data["request_rate"]
    if not (rate == "inf" or (_finite(rate) and rate > 0)):
        raise DataError(f"{src}: request_rate is {_say(json.dumps(rate))}: vLLM writes a number > 0 or \"inf\"")
    mc = data.get("max_concurrency")
    if mc is not None and (not isinstance(mc, int) or isinstance(mc, bool) or mc < 1):
        raise DataError(f"{src}: max_concurrency is {_say(json.dumps(mc))}, not a count")
    return data


def measured_load(result: dict) -> dict:
    """The pattern the run offered: closed (a cap, all at once), poisson (rate, burstiness 1), gamma, or burst."""
    rate, mc = result["request_rate"], result.get("max_concurrency")
    if rate == "inf":
        return {"pattern": "closed", "max_concurrency": mc} if mc else {"pattern": "burst"}
    b = result.get("burstiness", 1.0)
    out = {"pattern": "poisson" if b == 1 else "gamma", "request_rate": rate, "burstiness": b}
    if mc:
        out["max_concurrency"] = mc
    return out


SPREAD_TOLERANCE = 0.05
"""A run's range ratio further than this from the answer's: another length mix. The estimate from per-request
lengths, (max - min) / (max + min), reads R x (1 - 2/N) or so from N uniform draws, and 0 (to a token or two of
re-tokenisation) for fixed lengths."""


def measured_spread(result: dict) -> tuple[float | None, str | None]:
    """(the run's ``--random-range-ratio``, how it is known): recorded under ``--metadata random_range_ratio=R``
    (a number, or vLLM's ``{"input": a, "output": b}`` form: the larger), else estimated from the prompt lengths
    ``--save-detailed`` keeps (``input_lens``: the client's count, unaffected by EOS); (None, None) when neither."""
    from advisor.render.bench import RANGE_RATIO_KEY

    v = result.get(RANGE_RATIO_KEY)
    if v is not None:
        try:
            v = json.loads(v) if isinstance(v, str) else v
        except json.JSONDecodeError:
            v = None
        if isinstance(v, dict):
            v = max((x for x in v.values() if _finite(x)), default=None)
        if _finite(v) and 0 <= v < 1:
            return float(v), "recorded"
    for key in ("input_lens", "output_lens"):
        lens = result.get(key)
        if isinstance(lens, (list, tuple)) and len(lens) >= 2 and all(_finite(x) and x > 0 for x in lens):
            lo, hi = min(lens), max(lens)
            return round((hi - lo) / (hi + lo), 3), f"estimated from the run's {key}"
    return None, None


def same_model(a: str, b: str) -> bool:
    """One model named two ways: equal, or the same last path part (a hub id and its local directory)."""
    def last(s: str) -> str:
        return s.rstrip("/").rsplit("/", 1)[-1].lower()

    return a == b or last(a) == last(b)


def _stat_key(statistic: str, metric: str) -> str:
    """vLLM's key: mean_tpot_ms, median_tpot_ms, p99_tpot_ms."""
    return f"{statistic}_{metric}_ms"


def _matching_command(bench: dict, load: dict, result: dict | None = None) -> tuple[dict, list[str], bool]:
    """(command, warnings, matched): the answer's command with the run's pattern, load and length spread (else the
    primary one, with a warning, unmatched).
    The spread: the answer's ``range_ratio`` (absent: fixed lengths) against :func:`measured_spread`; a run that
    does not record it is matched on its load (with a warning when the answer asked for a spread)."""
    primary = next(c for c in bench["commands"] if c.get("primary"))
    from advisor.render.bench import RANGE_RATIO_KEY

    want_r = bench.get("range_ratio") or 0.0
    got_r, how = measured_spread(result) if result is not None else (None, None)
    if got_r is not None and abs(got_r - want_r) > SPREAD_TOLERANCE:
        return primary, [f"the run's lengths are spread with --random-range-ratio {got_r:g} ({how}); the answer's benchmark "
                         f"{_spread_words(want_r)}: compared with the {primary['pattern']} prediction anyway, but the "
                         f"figures are for another length mix"], False  # fmt: skip
    notes = []
    if got_r is None and want_r:
        notes.append(f"the result does not say its --random-range-ratio (vLLM's result JSON leaves the dataset's flags out; "
                     f"the answer's command records it with --metadata {RANGE_RATIO_KEY}={want_r:g}, and --save-detailed keeps "
                     f"the lengths): assumed the run drew its lengths with {want_r:g}, as the answer's benchmark does")  # fmt: skip
    for c in bench["commands"]:
        if c["pattern"] != load["pattern"]:
            continue
        if c["pattern"] == "closed" and c["load"].get("max_concurrency") == load.get("max_concurrency"):
            return c, notes, True
        if c["pattern"] == "poisson" and abs(c["load"]["request_rate"] - load["request_rate"]) <= LOAD_TOLERANCE * c["load"]["request_rate"]:
            return c, notes, True
    want = ", ".join(_load_words(c["load"], c["pattern"]) for c in bench["commands"])
    return primary, [f"the run offered {_load_words(load, load['pattern'])}; the answer's benchmark is {want}: "
                     f"compared with the {primary['pattern']} prediction anyway, but the figures are for another load", *notes], False  # fmt: skip


def _spread_words(r: float) -> str:
    return f"draws them with --random-range-ratio {r:g}" if r else "has fixed lengths (no --random-range-ratio)"


def _load_words(load: dict, pattern: str) -> str:
    if pattern == "closed":
        return f"a closed loop at {load.get('max_concurrency')}"
    if pattern == "burst":
        return "every request at once (rate inf, no --max-concurrency)"
    rate = load.get("request_rate")
    rate = f"{rate:g}" if _finite(rate) else str(rate)
    return f"{'Poisson' if pattern == 'poisson' else 'gamma'} arrivals at {rate}/s"


def compare(result: dict, bench: dict, *, statistic: str = "mean", source: str = "result") -> dict:
    """Predicted vs measured per figure, pass/fail against the limits the answer claimed."""
    if statistic not in STATISTICS:
        raise UsageError(f"--statistic {statistic!r}: choose one of {', '.join(STATISTICS)}")
    if not same_model(result["model_id"], bench["model"]):
        raise DataError(f"{_say(source)}: the run is of model {_say(result['model_id'])}, the prediction is for "
                        f"{_say(bench['model'])}: give the result of this model's benchmark")  # fmt: skip
    load = measured_load(result)
    cmd, warnings, load_matched = _matching_command(bench, load, result)
    pred = cmd.get("predicted") or {}
    sla = bench.get("sla") or {}
    stat = "median" if statistic == "p50" and "p50_ttft_ms" not in result else statistic
    rows = []
    for metric, name, key, limit in (("tpot", "TPOT ms", "tpot_ms", sla.get("max_tpot_ms")),
                                     ("ttft", "TTFT ms", "ttft_ms", sla.get("max_ttft_ms"))):  # fmt: skip
        k = _stat_key(stat, metric)
        if k not in result or result[k] is None:
            raise DataError(f"{_say(source)}: no {k} (run vllm bench serve with --percentile-metrics ttft,tpot "
                            f"--metric-percentiles 50,90,99, as the answer's command does)")  # fmt: skip
        rows.append(_row(name, pred.get(key), float(result[k]), stat, limit,
                         {s: result.get(f"{s}_{metric}_ms") for s in ("mean", "median", "p90", "p99")}))  # fmt: skip
    rows.append(_row("output tok/s", pred.get("output_throughput_tok_s"), float(result["output_throughput"]), "run", None, {}))
    answer = bench.get("answer") or {}
    if answer.get("method") == "none" and isinstance(pred.get("step_ms"), dict) and _finite(result.get("median_itl_ms")):
        # plain decoding: most inter-token gaps are one decode step (a closed loop's prefills come in waves)
        rows.append(_row(STEP_FIGURE, pred["step_ms"], float(result["median_itl_ms"]), "median ITL", None, {}))
    done = result["completed"]
    mean_in, mean_out = result["total_input_tokens"] / done, result["total_output_tokens"] / done
    for what, measured, want in (("prompt", mean_in, bench.get("prompt_len")), ("output", mean_out, bench.get("output_len"))):
        if want and abs(measured - want) > LENGTH_TOLERANCE * want:
            warnings.append(f"mean {what} length {measured:.0f} tokens, predicted for {want}"
                            + (" (--ignore-eos missing? the answer's command has it)" if what == "output" else "")
                            + ": the run is not the answer's shape")  # fmt: skip
    failed = result.get("failed") or 0
    if failed:
        warnings.append(f"{failed} of {failed + done} requests failed; the figures are over the {done} that completed")
    if done < cmd.get("num_prompts", 0):
        warnings.append(f"{done} requests completed, fewer than the {cmd['num_prompts']} of the answer's command: "
                        "ramp-up and drain weigh more than in a steady state")  # fmt: skip
    judged = [r for r in rows if r["limit"] is not None]
    sla_met = None if not judged else all(r["passed"] for r in judged)
    claimed = bool(sla.get("claimed"))
    missed = claimed and sla_met is False
    return {"result": source, "model_id": result["model_id"], "load": load, "compared_with": cmd["pattern"],
            "statistic": stat, "rows": rows, "sla": sla, "sla_met": sla_met, "sla_claimed": claimed,
            "sla_missed": missed, "mean_prompt_len": round(mean_in, 1), "mean_output_len": round(mean_out, 1),
            "completed": done, "failed": failed, "duration_s": result["duration"], "load_matched": load_matched,
            "warnings": warnings}  # fmt: skip


def _row(name: str, band: dict | None, measured: float, stat: str, limit: float | None, spread: dict) -> dict:
    value = band.get("value") if band else None
    err = None if not value else round(100 * (value - measured) / measured, 1) if measured else None
    in_band = None if not band or band.get("low") is None else band["low"] <= measured <= band["high"]
    return {"figure": name, "statistic": stat, "predicted": band, "measured": round(measured, 3),
            "prediction_error_pct": err, "in_band": in_band, "limit": limit,
            "passed": None if limit is None else measured <= limit,
            "measured_spread": {k: round(v, 3) for k, v in spread.items() if _finite(v)}}  # fmt: skip


def text_lines(v: dict) -> list[str]:
    """The comparison as text: the verdict first, then one line per figure, then warnings."""
    out = []
    if v["sla_missed"]:
        bad = [f"{r['statistic']} {r['figure'].split()[0]} {r['measured']:g} ms > {r['limit']:g} ms" for r in v["rows"]
               if r["passed"] is False]  # fmt: skip
        out.append("SLA MISSED: " + "; ".join(bad) + " (the answer claimed it)")
    elif v["sla_met"] is True:
        out.append("SLA met: " + "; ".join(f"{r['statistic']} {r['figure'].split()[0]} {r['measured']:g} <= {r['limit']:g} ms"
                                           for r in v["rows"] if r["limit"] is not None))  # fmt: skip
    elif v["sla_met"] is False:
        out.append("SLA not met, as the answer said (sla_met false): the limits were not claimed")
    else:
        out.append("no SLA limits in the answer: predicted vs measured only")
    load = v["load"]
    failed = f", {v['failed']} failed" if v["failed"] else ""
    out.append(f"run: {_say(v['model_id'])}, {_load_words(load, load['pattern'])}, {v['completed']} completed{failed} in {v['duration_s']:.1f} s, "
               f"mean lengths {v['mean_prompt_len']:g} in / {v['mean_output_len']:g} out; compared with the {v['compared_with']} prediction")  # fmt: skip
    width = max(len(r["figure"]) for r in v["rows"])
    for r in v["rows"]:
        b = r["predicted"]
        pred = "not predicted" if not b or b.get("value") is None else f"{b['value']:g} [{b['low']:g}, {b['high']:g}]"
        err = "" if r["prediction_error_pct"] is None else f"  prediction {r['prediction_error_pct']:+.1f}%" + ("" if r["in_band"] else " (outside the band)")
        verdict = "" if r["passed"] is None else f"  limit {r['limit']:g}: {'pass' if r['passed'] else 'FAIL'}"
        spread = ", ".join(f"{k} {x:g}" for k, x in r["measured_spread"].items() if k != r["statistic"])
        out.append(f"  {r['figure'].ljust(width)}  predicted {pred}  measured {r['statistic']} {r['measured']:g}{err}{verdict}"
                   + (f"  ({spread})" if spread else ""))  # fmt: skip
    for w in v["warnings"]:
        out.append(f"  ! {w}")
    return out


def bench_of_prediction(data: object, source: str) -> dict:
    """The ``benchmark`` object of a ``recommend --json`` output (DataError when it is not one)."""
    src = _say(source)
    if not isinstance(data, dict):
        raise DataError(f"{src}: not the object advisor recommend --json prints")
    bench = data.get("benchmark")
    if not isinstance(bench, dict) or not isinstance(bench.get("commands"), list) or not bench["commands"] \
            or not isinstance(bench.get("model"), str):  # fmt: skip
        raise DataError(f"{src}: no benchmark object: make it with advisor recommend … --json (issue 40 and later)")
    for c in bench["commands"]:
        if not isinstance(c, dict) or c.get("pattern") not in ("closed", "poisson") or not isinstance(c.get("load"), dict):
            raise DataError(f"{src}: benchmark.commands holds an entry that is not one advisor writes")
    if not any(c.get("primary") for c in bench["commands"]):
        raise DataError(f"{src}: benchmark.commands has no primary command")
    return bench


def read_prediction(path: Path) -> dict:
    """The ``benchmark`` object of the answer in ``path`` (what ``recommend --json`` printed)."""
    return bench_of_prediction(read_answer(path), str(path))


def read_answer(path: Path) -> object:
    """The answer file's JSON (``recommend --json`` output, render's advisor-recommendation.json), unchecked."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DataError(f"{_say(path)}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(f"{_say(path)}: cannot read it ({_say(getattr(exc, 'strerror', None) or exc)})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataError(f"{_say(path)}: not JSON ({_say(exc.msg)} at line {exc.lineno}); give what advisor recommend --json printed") from None
    return data


def decision_of_prediction(data: object, source: str):
    """``verify --boot --prediction``: (the answer's Decision, the vLLM line its flags are for or None) from a
    ``recommend --json`` object (render's advisor-recommendation.json; render --json's ``recommendation``).
    DataError, saying that --boot then needs MODEL, when the file holds no decision to launch."""
    from pydantic import ValidationError

    from advisor.domain.decision import Decision
    from advisor.vllm_facts import is_supported

    src = _say(source)
    rec = data.get("recommendation") if isinstance(data, dict) and "decision" not in data else data
    raw = rec.get("decision") if isinstance(rec, dict) else None
    if not isinstance(raw, dict):
        raise DataError(f"{src}: no decision (the answer's launch flags) to boot: --boot needs recommend --json's output "
                        "(advisor-recommendation.json), or MODEL with recommend's options instead of --prediction")  # fmt: skip
    try:
        decision = Decision.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise DataError(f"{src}: decision.{'.'.join(map(str, first['loc']))}: {_say(first['msg'])}: not a decision advisor "
                        "writes; --boot needs it, or MODEL with recommend's options instead of --prediction") from None  # fmt: skip
    vllm = data.get("vllm") if isinstance(data, dict) else None
    version = vllm.get("version") if isinstance(vllm, dict) else None
    return decision, version if isinstance(version, str) and is_supported(version) else None


def boot_argv(bench: dict, decision, version: str, *, server_cmd: str = "vllm serve", extra: list[str] = ()) -> list[str]:
    """``verify --boot``: the server command of the answer, as probe builds one (advisor.probe.campaign
    ``server_program`` and ``model_argument``): the program, the model the benchmark sends (``benchmark.model``), the
    engine flags render writes into launch.sh for ``decision`` (advisor.render.flags ``serve_flags``), the benchmark's
    ``--served-model-name`` when it has one, then ``extra`` (``--extra-args``: a later flag wins in vLLM's parser).
    Host and port are running_server's. UsageError for an answer one host cannot start (a multi-node server)."""
    from advisor.probe.campaign import model_argument, server_program
    from advisor.render.flags import serve_flags

    if decision.nodes > 1:
        raise UsageError(f"--boot starts one server on this host; the answer spans {decision.nodes} nodes "
                         f"(pipeline_parallel_size {decision.pipeline_parallel_size}): start it from advisor render's files "
                         "and check it with --url")  # fmt: skip
    primary = next(c for c in bench["commands"] if c.get("primary"))
    argv = primary.get("argv") if isinstance(primary.get("argv"), list) else []
    served = []
    if "--served-model-name" in argv[:-1] and isinstance(name := argv[argv.index("--served-model-name") + 1], str):
        served = ["--served-model-name", name]
    return [*server_program(server_cmd), model_argument(bench["model"]), *serve_flags(decision, version), *served, *extra]


def run_booted(bench: dict, argv: list[str], *, env: dict[str, str], log_path: Path, boot_timeout_s: float = 900.0,
               vllm_bin: str = "vllm", result_dir: Path, timeout_s: float = 3600.0, say=None) -> tuple[Path, dict]:  # fmt: skip
    """``verify --boot``: start ``argv`` as probe does (advisor.probe.server ``running_server``: 127.0.0.1, a free
    port, the log in ``log_path``, /health and a warm-up request, its own process group), run the answer's benchmark
    against it (:func:`run_bench`), and stop the server whatever happens (a failure, Ctrl-C). Returns the result
    file and ``{"command", "log", "boot_s", "vllm_version"}``. BootFailure (a ProbeError, exit 7: the cause and
    the log's path) when it does not come up; ProbeError when the run fails (the log named; a server that died
    during it is a BootFailure ``crashed``)."""
    from advisor.domain.secrets import redacted_argv
    from advisor.errors import ProbeError
    from advisor.probe.server import BootFailure, running_server, server_api_key

    bench_program(vllm_bin)  # a missing client is said before minutes of boot, not after
    say = say or (lambda line: None)
    with running_server(argv, log_path=log_path, env=env, boot_timeout_s=boot_timeout_s, model=bench["model"]) as srv:
        info = {"command": redacted_argv(srv.argv), "log": str(log_path), "boot_s": round(srv.boot_s, 1),
                "vllm_version": server_version(srv.base_url)}  # fmt: skip
        say(f"verify: vLLM serves at {srv.base_url} after {srv.boot_s:.0f} s; running the answer's vllm bench serve "
            f"(results in {result_dir})")  # fmt: skip
        key = server_api_key(srv.argv, {**os.environ, **env})
        try:
            result = run_bench(bench, srv.base_url, vllm_bin=vllm_bin, result_dir=result_dir, timeout_s=timeout_s, api_key=key)
        except BootFailure:
            raise
        except ProbeError as exc:
            srv.check_alive(grace_s=2.0)  # a server that died under the load crashed: that is the cause to name
            raise ProbeError(f"{exc} (server log: {log_path})") from None
    return result, info


def bench_program(vllm_bin: str) -> str:
    """The program whose ``bench serve`` runs the benchmark, found on PATH (DependencyError otherwise)."""
    import shutil

    from advisor.errors import DependencyError

    exe = shutil.which(vllm_bin)
    if exe is None:
        raise DependencyError(f"--vllm-bin {_say(vllm_bin)}: not found; install vLLM (its `vllm bench serve` runs the benchmark) or name the program")
    return exe


def run_bench(bench: dict, url: str, *, vllm_bin: str = "vllm", result_dir: Path, timeout_s: float = 3600.0,
              extra: list[str] | None = None, api_key: str | None = None) -> Path:  # fmt: skip
    """``verify --url``: run the answer's own (primary) command against the server at ``url`` that is already
    up, the result into ``result_dir``; returns the result file. DependencyError without the program,
    ProbeError when the run fails (server down, timeout, vLLM's error): its last line, nothing stored.
    ``api_key``: the key the server requires, sent as vLLM's client reads it (``OPENAI_API_KEY``)."""
    import subprocess
    from urllib.parse import urlparse

    from advisor.errors import ProbeError

    u = urlparse(url)
    if u.scheme not in ("http", "https") or not u.hostname or any(c.isspace() for c in url):
        raise UsageError(f"--url {_say(url)}: give the server's base URL, e.g. http://127.0.0.1:8000")
    exe = bench_program(vllm_bin)
    cmd = next(c for c in bench["commands"] if c.get("primary"))
    argv = list(cmd["argv"][1:])
    for flag, value in (("--base-url", url.rstrip("/")), ("--result-dir", str(result_dir))):
        if flag in argv:
            argv[argv.index(flag) + 1] = value
        else:
            argv += [flag, value]
    result = Path(result_dir) / cmd["result_file"].rsplit("/", 1)[-1]
    result.unlink(missing_ok=True)
    try:
        proc = subprocess.run([exe, *argv, *(extra or [])], capture_output=True, text=True, timeout=timeout_s,
                              stdin=subprocess.DEVNULL, env={**os.environ, "OPENAI_API_KEY": api_key} if api_key else None)  # fmt: skip
    except subprocess.TimeoutExpired:
        raise ProbeError(f"vllm bench serve against {_say(url)} ran past --timeout {timeout_s:g} s; nothing compared") from None
    except OSError as exc:
        raise ProbeError(f"could not start {_say(exe)}: {_say(exc.strerror or exc)}") from None
    if proc.returncode != 0 or not result.is_file():
        tail = [ln for ln in (proc.stderr + "\n" + proc.stdout).splitlines() if ln.strip()]
        why = next((ln for ln in reversed(tail) if "Error" in ln or "error" in ln), tail[-1] if tail else "no output")
        raise ProbeError(f"vllm bench serve against {_say(url)} failed (exit {proc.returncode}): {_say(why.strip())}")
    return result


def server_version(url: str, timeout_s: float = 5.0) -> str | None:
    """The vLLM version the server at ``url`` reports (``GET /version``), or None when it does not say."""
    import json as _json
    import urllib.request

    try:
        with urllib.request.urlopen(url.rstrip("/") + "/version", timeout=timeout_s) as resp:  # noqa: S310 - the user's server
            data = _json.loads(resp.read(4096).decode("utf-8", "replace"))
    except (OSError, ValueError):
        return None
    v = data.get("version") if isinstance(data, dict) else None
    return _say(v)[:40] if isinstance(v, str) and v.strip() else None


def list_lines(runs: list, store: str) -> list[str]:
    """``verify --list``: one line per stored run (row id, when, model, the host's GPU, load, figures, verdict)."""
    if not runs:
        return [f"no verify runs stored in {store} (advisor verify stores each run it compares)"]
    out = [f"{len(runs)} verify run(s) in {store}:"]
    for row_id, r in runs:
        load = _load_words({"max_concurrency": r.max_concurrency, "request_rate": r.request_rate}, r.pattern)
        figs = []
        for row in r.rows:
            name = row.figure.replace(" ms", "").replace("output ", "")
            pred = row.predicted.value if row.predicted is not None and row.predicted.value else None
            err = f" ({row.prediction_error_pct:+.0f}%)" if row.prediction_error_pct is not None else ""
            figs.append(f"{name} {row.measured:g}" + (f" vs {pred:g}{err}" if pred is not None else ""))
        verdict = "SLA MISSED" if r.sla_missed else "SLA met" if r.sla_met else "SLA not claimed" if r.sla_met is None else "SLA not met (not claimed)"
        host = f"{r.host_gpu or 'no GPU'} host {r.host_fingerprint[:12]}"
        where = f" [{r.campaign}/{r.label}]" if r.campaign else ""
        out.append(f"  #{row_id} {r.created_at} {_say(r.model)}{where} on {r.gpu or '?'} ({host}, vLLM {r.vllm_version or '?'}"
                   f"{', dummy weights' if r.weights == 'dummy' else ''}): {load}; {', '.join(figs)}; {verdict}")  # fmt: skip
    return out
