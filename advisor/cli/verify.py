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
    vllm_bin: str = typer.Option("vllm", "--vllm-bin", help="With --url: the program whose `bench serve` runs it."),
    result_dir: Path = typer.Option(Path("bench-results"), "--result-dir", help="With --url: where the result JSON is written."),
    timeout: float = typer.Option(3600.0, "--timeout", min=1, help="With --url: seconds the benchmark may run."),
    prediction: Path = typer.Option(None, "--prediction", metavar="FILE", help="The answer: what `advisor recommend … --json` printed (render writes it as advisor-recommendation.json)."),
    statistic: str = typer.Option("mean", "--statistic", help="What the SLA limits are judged on: mean (what the prediction is), median, p90 or p99."),
    dummy_weights: bool = typer.Option(False, "--dummy-weights", help="The server ran random weights (--load-format dummy): stored with the run (weights: dummy), so calibrate can tell."),
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
    when that run fails: server down, timeout; nothing stored). --list shows the stored runs."""
    from advisor.probe.verify import compare, read_prediction, read_result, text_lines

    if list_runs:
        if any(x is not None for x in (model, result, url, prediction)):
            raise UsageError("--list shows the stored verify runs: give it alone (with --json)")
        _list(json_out)
        return
    if (prediction is None) == (model is None):
        raise UsageError("give the answer either as --prediction FILE (recommend --json output) or as MODEL with recommend's options, not both"
                         if prediction is not None else "give the answer to check: --prediction FILE (recommend --json output), or MODEL with recommend's options")  # fmt: skip
    if (result is None) == (url is None):
        raise UsageError("give the run as --result FILE (a vllm bench serve --save-result JSON) or --url URL (run it now), one of them")
    if prediction is not None:
        bench = read_prediction(prediction)
    else:
        from advisor.cli.recommend import bench_for, build_recommendation

        bench = bench_for(build_recommendation(model, opts), opts)
    if url is not None:
        from advisor.probe.verify import run_bench

        if not json_out:
            print(f"verify: running the answer's vllm bench serve against {url} (results in {result_dir})", file=sys.stderr)
        result = run_bench(bench, url, vllm_bin=vllm_bin, result_dir=result_dir, timeout_s=timeout)
    data = read_result(result)
    verdict = compare(data, bench, statistic=statistic, source=str(result))
    stored = None if no_store else _store(verdict, bench, url, "dummy" if dummy_weights else "real")
    if json_out:
        emit_json({**verdict, "stored": stored, "exit_code": SlaMissedError.exit_code if verdict["sla_missed"] else 0})
    else:
        print("\n".join(text_lines(verdict)))
        if stored is not None:
            print(f"verify: stored as run #{stored['id']} in {stored['store']} (advisor verify --list)"
                  + (f"; advisor calibrate leaves it out of the step corrections: {stored['not_for_correction']}"
                     if stored["not_for_correction"] else ""), file=sys.stderr)  # fmt: skip
    if verdict["sla_missed"]:
        raise typer.Exit(SlaMissedError.exit_code)


def _store(verdict: dict, bench: dict, url: str | None, weights: str) -> dict:
    """Store the compared run with this host's fingerprint (the probe store, its verify_runs table)."""
    from advisor.probe.campaign import host_info
    from advisor.probe.store import open_store
    from advisor.probe.verify import server_version
    from advisor.probe.verify_record import record_of, used_for_correction

    s = settings()
    version = server_version(url) if url is not None else None
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
