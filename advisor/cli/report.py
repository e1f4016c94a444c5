"""``advisor report``: the recommendation ``recommend`` makes, as one self-contained HTML page."""

from __future__ import annotations

from pathlib import Path

import typer

from advisor.cli import options as o
from advisor.cli._app import app
from advisor.cli.common import model_arg, write_html


@app.command("report")
@o.with_recommend_options
def report_cmd(
    model: str = model_arg(),
    opts: o.RecommendOptions = None,
    out: Path = typer.Option(..., "--out", "-o", metavar="FILE", help="Where to write the HTML page (replaced atomically)."),
) -> None:  # fmt: skip
    """Write what `advisor recommend` decides for MODEL (same options) as one self-contained HTML page:
    the K-R plane (K̄ against R, break-even K̄ = R, the seed sweep, this host's probes, this
    recommendation), predicted against measured gain and R with the error figures, per-GPU start-up
    memory of the chosen and alternative configurations, layout candidates when the recommendation
    has them, and the decision trace (rules, warnings, command, host fingerprint).

    The page fetches nothing (inline SVG and CSS): it opens from a file on an air-gapped host.
    The first report on a machine runs the leave-one-model-out evaluation (seconds; cached after).
    Exit 8 when nothing boots, like `recommend` and `render`: the page is still written (it shows
    why and the alternatives), and the reason is the first line on stderr."""
    from advisor.atomic import check_target
    from advisor.cli.recommend import recommend_maybe_probe

    check_target(out)
    rec, _probed = recommend_maybe_probe(model, opts, quiet=False)
    path = write_html(rec, model, out)
    print(path)
    if rec.memory is not None and not rec.memory.boots:
        import sys

        from advisor.errors import NotBootableError

        print(f"DOES NOT BOOT on {rec.host.gpus}x{rec.host.gpu}: {rec.memory.reason} (the page says what would)", file=sys.stderr)
        raise typer.Exit(NotBootableError.exit_code)
