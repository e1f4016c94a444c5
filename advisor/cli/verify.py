"""``advisor verify``: a ``vllm bench serve`` result against the answer that predicted it (issue 40)."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from advisor.cli import options as o
from advisor.cli._app import app
from advisor.cli.common import JsonOpt, emit_json, settings
from advisor.errors import SlaMissedError, UsageError


@app.command("verify")
@o.with_recommend_options
def verify_cmd(
    model: str = typer.Argument(None, metavar="[MODEL]", show_default=False,
                                help="Recompute the prediction for MODEL with the same options as recommend (instead of --prediction)."),
    result: Path = typer.Option(None, "--result", metavar="FILE", help="The JSON `vllm bench serve --save-result` wrote (bench.sh's bench-results/…)."),
    url: str = typer.Option(None, "--url", help="Instead of --result: run the answer's benchmark now against the server at this base URL (already up), then compare."),
    boot: bool = typer.Option(False, "--boot", help="Instead of --result or --url: start vLLM here with the answer's own launch flags (those of render's launch.sh; --server-cmd, --extra-args) on 127.0.0.1 and a free port, run the answer's benchmark against it, stop it, then compare."),
    extra_args: str = typer.Option("", "--extra-args", help="With --boot: more server flags, shell-quoted, after the answer's (a later flag wins: e.g. \"--max-model-len 4096 --enforce-eager\")."),
    boot_timeout: float = typer.Option(None, "--boot-timeout", min=1, show_default=False, help="With --boot: seconds the server may take to serve its first request (default 900)."),
    vllm_bin: str = typer.Option("vllm", "--vllm-bin", help="With --url or --boot: the program whose `bench serve` runs the benchmark."),
    result_dir: Path = typer.Option(Path("bench-results"), "--result-dir", help="With --url or --boot: where the result JSON is written."),
    timeout: float = typer.Option(3600.0, "--timeout", min=1, help="With --url or --boot: seconds the benchmark may run."),
    prediction: Path = typer.Option(None, "--prediction", metavar="FILE", help="The answer: what `advisor recommend … --json` printed (render writes it as advisor-recommendation.json)."),
    statistic: str = typer.Option("mean", "--statistic", help="What the SLA limits are judged on: mean (what the prediction is), median, p90 or p99."),
    dummy_weights: bool = typer.Option(False, "--dummy-weights", help="The server ran random weights (--load-format dummy; with --boot it is started so): stored with the run (weights: dummy), so calibrate can tell."),
    no_store: bool = typer.Option(False, "--no-store", help="Compare only: do not store the run in the probe store."),
    list_runs: bool = typer.Option(False, "--list", help="List the verify runs stored in the probe store (nothing else is run)."),
    opts: o.RecommendOptions = None,
    json_out: bool = JsonOpt,
) -> None:  # fmt: skip
    """Compare a `vllm bench serve` result with the prediction, per figure, and judge the SLA the answer claimed.

    Prints predicted vs measured TPOT, TTFT and output tok/s (and, for plain decoding, the decode step against the
    median inter-token latency) with the bands and the limits, and stores the run with this host's fingerprint in
    the probe store (--no-store: not), where `advisor calibrate` turns plain-decoding runs into measured step
    corrections. Exit 9 when the answer claimed the SLA (recommend's sla_met true) and the run misses it; 5 for a
    result file that is not a usable vllm bench serve result (malformed, fields missing, another model, nothing
    completed); nothing is stored then. --url runs the answer's own command against a server that is already up (7
    when that run fails: server down, timeout; nothing stored). --boot starts the server first, as `advisor probe`
    does, with the answer's launch flags (MODEL's recommendation, or the decision in --prediction's file), and
    always stops it (7 when it does not come up: the cause and the server log's path; nothing stored). --list
    shows the stored runs."""
    from advisor.probe.verify import compare, read_result, text_lines

    if list_runs:
        if any(x is not None for x in (model, result, url, prediction)) or boot:
            raise UsageError("--list shows the stored verify runs: give it alone (with --json)")
        _list(json_out)
        return
    if (prediction is None) == (model is None):
        raise UsageError("give the answer either as --prediction FILE (recommend --json output) or as MODEL with recommend's options, not both"
                         if prediction is not None else "give the answer to check: --prediction FILE (recommend --json output), or MODEL with recommend's options")  # fmt: skip
    if (result is not None) + (url is not None) + boot != 1:
        raise UsageError("give the run as --result FILE (a vllm bench serve --save-result JSON), --url URL (run it now against "
                         "a server that is up) or --boot (start one here and run it), one of them")  # fmt: skip
    if not boot and (extra_args or boot_timeout is not None):
        raise UsageError(f"{'--extra-args' if extra_args else '--boot-timeout'} is for the server --boot starts: add --boot, or drop it")
    from advisor.probe.campaign import server_extra_args

    extra = server_extra_args(extra_args, dummy_weights) if boot else []
    bench, decision, version = _answer(model, prediction, opts, boot)
    booted = None
    if url is not None:
        from advisor.probe.verify import run_bench

        if not json_out:
            print(f"verify: running the answer's vllm bench serve against {url} (results in {result_dir})", file=sys.stderr)
        result = run_bench(bench, url, vllm_bin=vllm_bin, result_dir=result_dir, timeout_s=timeout)
    elif boot:
        result, booted = _boot_and_run(bench, decision, version, opts.server_cmd, extra, boot_timeout=boot_timeout or 900.0,
                                       vllm_bin=vllm_bin, result_dir=result_dir, timeout=timeout, quiet=json_out)  # fmt: skip
    data = read_result(result)
    verdict = compare(data, bench, statistic=statistic, source=str(result))
    from advisor.probe.campaign import load_format

    weights = "dummy" if dummy_weights or load_format(extra) == "dummy" else "real"
    stored = None
    if not no_store:
        from advisor.probe.verify import server_version

        version_seen = booted["vllm_version"] if booted else server_version(url) if url is not None else None
        stored = _store(verdict, bench, version_seen, weights)
    if json_out:
        emit_json({**verdict, "stored": stored, **({"server": booted} if boot else {}),
                   "exit_code": SlaMissedError.exit_code if verdict["sla_missed"] else 0})  # fmt: skip
    else:
        print("\n".join(text_lines(verdict)))
        if stored is not None:
            print(f"verify: stored as run #{stored['id']} in {stored['store']} (advisor verify --list)"
                  + (f"; advisor calibrate leaves it out of the step corrections: {stored['not_for_correction']}"
                     if stored["not_for_correction"] else ""), file=sys.stderr)  # fmt: skip
    if verdict["sla_missed"]:
        raise typer.Exit(SlaMissedError.exit_code)


def _answer(model: str | None, prediction: Path | None, opts, boot: bool):
    """(the benchmark object, the Decision to launch, the vLLM line its flags are for), from --prediction's file or
    recomputed for MODEL; the last two only with --boot (the line: the file's, else --vllm-version's)."""
    from advisor.cli.common import vllm_choice

    if prediction is not None:
        from advisor.probe.verify import bench_of_prediction, decision_of_prediction, read_answer

        data = read_answer(prediction)
        bench = bench_of_prediction(data, str(prediction))
        if not boot:
            return bench, None, None
        decision, version = decision_of_prediction(data, str(prediction))
        return bench, decision, version or vllm_choice(opts.vllm_version).version
    from advisor.cli.recommend import bench_for, build_recommendation

    rec = build_recommendation(model, opts)
    return bench_for(rec, opts), rec.decision, vllm_choice(opts.vllm_version).version if boot else None


def _boot_and_run(bench: dict, decision, version: str, server_cmd: str, extra: list[str], *, boot_timeout: float,
                  vllm_bin: str, result_dir: Path, timeout: float, quiet: bool) -> tuple[Path, dict]:  # fmt: skip
    """--boot: the answer's server started (its log under the data dir's verify/), the benchmark run, the server stopped."""
    import shlex
    from datetime import datetime

    from advisor.domain.secrets import redacted_argv
    from advisor.probe.verify import bench_program, boot_argv, run_booted

    argv = boot_argv(bench, decision, version, server_cmd=server_cmd, extra=extra)
    name = "".join(c if c.isalnum() or c in "-_." else "_" for c in Path(bench["model"]).name)[:80] or "model"
    log_path = Path(settings().data_dir) / "verify" / f"{name}-{datetime.now().strftime('%Y%m%dT%H%M%S')}.log"

    def say(line: str) -> None:
        if not quiet:
            print(line, file=sys.stderr, flush=True)

    bench_program(vllm_bin)  # a missing client is said before the boot
    say(f"verify: starting vLLM with the answer's flags (log: {log_path}): {' '.join(shlex.quote(a) for a in redacted_argv(argv))}")
    try:
        out = run_booted(bench, argv, env=dict(decision.env), log_path=log_path, boot_timeout_s=boot_timeout, vllm_bin=vllm_bin,
                         result_dir=result_dir, timeout_s=timeout, say=say)  # fmt: skip
    except KeyboardInterrupt:
        print(f"verify: interrupted; the server is stopped, nothing compared or stored (log: {log_path})", file=sys.stderr, flush=True)
        raise
    say("verify: the server is stopped")
    return out


def _store(verdict: dict, bench: dict, version: str | None, weights: str) -> dict:
    """Store the compared run with this host's fingerprint (the probe store, its verify_runs table); ``version``:
    the vLLM version the server reported (GET /version), if any."""
    from advisor.probe.campaign import host_info
    from advisor.probe.store import open_store
    from advisor.probe.verify_record import record_of, used_for_correction

    s = settings()
    rec = record_of(verdict, bench, host_info(s), weights=weights, vllm_version=version,
                    vllm_version_source="server" if version else None)  # fmt: skip
    with open_store(s) as store:
        row = store.insert_verify(rec)
        path = str(store.path)
    return {"id": row, "store": path, "host_fingerprint": rec.host_fingerprint, "not_for_correction": used_for_correction(rec)}


def _list(json_out: bool) -> None:
    from advisor.probe.store import open_store, store_path
    from advisor.probe.verify import list_lines

    s = settings()
    path = store_path(s)
    runs, skipped = [], []
    if path.is_file():
        with open_store(s, busy_timeout_s=2.0) as store:
            runs, skipped = store.list_verify(), list(store.skipped)
    for line in skipped:
        print(f"warning: {line}", file=sys.stderr)
    if json_out:
        emit_json({"store": str(path), "runs": [{"id": i, **r.model_dump(mode="json")} for i, r in runs], "skipped": skipped})
    else:
        print("\n".join(list_lines(runs, str(path))))
