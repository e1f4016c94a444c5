"""``advisor verify``: a ``vllm bench serve`` result against the answer that predicted it (issue 40)."""

from __future__ import annotations

from pathlib import Path

import typer

from advisor.cli import options as o
from advisor.cli._app import app
from advisor.cli.common import JsonOpt, emit_json
from advisor.errors import SlaMissedError, UsageError


@app.command("verify")
@o.with_recommend_options
def verify_cmd(
    model: str = typer.Argument(None, metavar="[MODEL]", show_default=False,
                                help="Recompute the prediction for MODEL with the same options as recommend (instead of --prediction)."),
    result: Path = typer.Option(..., "--result", metavar="FILE", help="The JSON `vllm bench serve --save-result` wrote (bench.sh's bench-results/…)."),
    prediction: Path = typer.Option(None, "--prediction", metavar="FILE", help="The answer: what `advisor recommend … --json` printed (render writes it as advisor-recommendation.json)."),
    statistic: str = typer.Option("mean", "--statistic", help="What the SLA limits are judged on: mean (what the prediction is), median, p90 or p99."),
    opts: o.RecommendOptions = None,
    json_out: bool = JsonOpt,
) -> None:  # fmt: skip
    """Compare a `vllm bench serve` result with the prediction, per figure, and judge the SLA the answer claimed.

    Prints predicted vs measured TPOT, TTFT and output tok/s with the bands and the limits. Exit 9 when the
    answer claimed the SLA (recommend's sla_met true) and the run misses it; 5 for a result file that is not
    a usable vllm bench serve result (malformed, fields missing, another model, nothing completed)."""
    from advisor.probe.verify import compare, read_prediction, read_result, text_lines

    if (prediction is None) == (model is None):
        raise UsageError("give the answer either as --prediction FILE (recommend --json output) or as MODEL with recommend's options, not both"
                         if prediction is not None else "give the answer to check: --prediction FILE (recommend --json output), or MODEL with recommend's options")  # fmt: skip
    data = read_result(result)
    if prediction is not None:
        bench = read_prediction(prediction)
    else:
        from advisor.cli.recommend import bench_for, build_recommendation

        bench = bench_for(build_recommendation(model, opts), opts)
    verdict = compare(data, bench, statistic=statistic, source=str(result))
    if json_out:
        emit_json({**verdict, "exit_code": SlaMissedError.exit_code if verdict["sla_missed"] else 0})
    else:
        print("\n".join(text_lines(verdict)))
    if verdict["sla_missed"]:
        raise typer.Exit(SlaMissedError.exit_code)
