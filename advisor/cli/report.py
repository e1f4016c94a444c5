"""``advisor report``: the recommendation ``recommend`` makes, as one self-contained HTML page."""

from __future__ import annotations

from pathlib import Path

import typer

from advisor.cli import options as o
from advisor.cli._app import app
from advisor.cli.common import model_arg, vllm_choice, write_html


@app.command("report")
def report_cmd(
    model: str = model_arg(),
    out: Path = typer.Option(..., "--out", "-o", metavar="FILE", help="Where to write the HTML page (replaced atomically)."),
    gpu: str = o.GPU, gpus: int = o.GPUS, tp: int = o.TP, corpus: str = o.CORPUS, tokenizer: str = o.TOKENIZER,
    concurrency: int = o.CONCURRENCY, max_model_len: int = o.MAX_MODEL_LEN, k: int = o.K, gmu: float = o.GMU,
    probe: bool = o.PROBE, probe_duration: float = o.PROBE_DURATION, probe_requests: int = o.PROBE_REQUESTS,
    server_cmd: str = o.SERVER_CMD,
) -> None:  # fmt: skip
    """Write what `advisor recommend` decides for MODEL (same options) as one self-contained HTML page:
    the K-R plane (K̄ against R, break-even K̄ = R, the seed sweep, this host's probes, this
    recommendation), predicted against measured gain and R with the error figures, per-GPU start-up
    memory of the chosen and alternative configurations, layout candidates when the recommendation
    has them, and the decision trace (rules, warnings, command, host fingerprint).

    The page fetches nothing (inline SVG and CSS): it opens from a file on an air-gapped host.
    The first report on a machine runs the leave-one-model-out evaluation (seconds; cached after)."""
    from advisor.atomic import check_target
    from advisor.cli.recommend import recommend_maybe_probe

    check_target(out)
    # the same vLLM line `recommend` would choose here (setting, installed vLLM, default): same plan
    args = (model, gpu, gpus, tp, corpus, tokenizer, concurrency, max_model_len, k, gmu, None, vllm_choice(None).version)
    rec, _probed = recommend_maybe_probe(args, probe, probe_duration, probe_requests, server_cmd, quiet=False)
    path = write_html(rec, model, out)
    print(path)
