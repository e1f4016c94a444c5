"""``advisor probe MODEL``: short real vLLM runs per configuration, recorded in the probe store."""

from __future__ import annotations

import sys

import typer

from advisor.cli._app import app
from advisor.cli.common import JsonOpt, emit_json, settings
from advisor.vllm_facts import facts as _vllm_facts


def run_spec(spec, *, quiet: bool):
    """Run one campaign into the store, progress on stderr; returns (CampaignResult, store path).
    Ctrl-C keeps every finished configuration (each is committed as it ends) and says how to resume."""
    from advisor.probe.campaign import run_campaign
    from advisor.probe.store import StoreWriteError, open_store

    s = settings()
    show_progress = not quiet and sys.stderr.isatty()

    def say(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    probed = []
    with open_store(s) as store:
        try:
            result = run_campaign(spec, s, store, say=say, show_progress=show_progress, on_record=probed.append)
        except KeyboardInterrupt:
            say(f"interrupted: {len(probed)} configuration(s) probed in this run are kept in {store.path}; "
                "rerun the same command to resume")  # fmt: skip
            raise
        except StoreWriteError:
            say(f"{len(probed)} configuration(s) probed in this run before it are kept in {store.path}")
            raise
    return result, store.path


@app.command("probe")
def probe_cmd(
    model: str = typer.Argument(..., metavar="MODEL", help="Model id or directory, passed to vLLM as is."),
    corpus: str = typer.Option("humaneval", "--corpus", help="Prompt file (.jsonl/.json: prompt, messages or ShareGPT records) or a built-in corpus: humaneval, sharegpt."),
    configs: str = typer.Option("vanilla,suffix", "--configs", help="Comma-separated: vanilla, suffix[:K] (K: rules/policy/decider.yaml's), ngram[:K], ngram_gpu[:K], mtp[:K] (models with MTP layers), each with optional @key=value overrides (e.g. suffix:16@gmu=0.8)."),
    duration: float = typer.Option(120.0, "--duration", min=1, help="Seconds of load per configuration."),
    requests: int = typer.Option(None, "--requests", min=1, help="At most this many requests per configuration."),
    concurrency: int = typer.Option(32, "--concurrency", min=1, help="Requests in flight."),
    max_tokens: int = typer.Option(1024, "--max-tokens", min=1, help="max_tokens of each request."),
    temperature: float = typer.Option(0.0, "--temperature", min=0.0, help="Sampling temperature of each request."),
    ignore_eos: bool = typer.Option(False, "--ignore-eos", help="Generate max_tokens for every request (vLLM's ignore_eos)."),
    server_cmd: str = typer.Option("vllm serve", "--server-cmd", help="Program that starts vLLM; MODEL follows it (after --model unless it ends in 'serve')."),
    extra_args: str = typer.Option("", "--extra-args", help="More server flags for every configuration, shell-quoted (e.g. \"--dtype float32 --enforce-eager\")."),
    gmu: float = typer.Option(None, "--gpu-memory-utilization", help=f"gpu_memory_utilization (default: vLLM's {_vllm_facts().gpu_memory_utilization:g})."),
    max_model_len: int = typer.Option(None, "--max-model-len", help="max_model_len (default 16384)."),
    tp: int = typer.Option(None, "--tensor-parallel-size", "--tp", help="Tensor parallel size (default 1)."),
    max_num_seqs: int = typer.Option(None, "--max-num-seqs", help="max_num_seqs (default: vLLM's)."),
    cudagraph_mode: str = typer.Option(None, "--cudagraph-mode", help="NONE, PIECEWISE, FULL, FULL_DECODE_ONLY or FULL_AND_PIECEWISE."),
    api: str = typer.Option("auto", "--api", help="chat, completions, or auto (chat when the model has a chat template)."),
    boot_timeout: float = typer.Option(900.0, "--boot-timeout", min=1, help="Seconds a server may take to serve its first request."),
    campaign: str = typer.Option(None, "--campaign", help="Campaign id to record under (default: derived from the settings, so reruns resume)."),
    retry_failed: bool = typer.Option(False, "--retry-failed", help="Probe again configurations whose earlier record failed."),
    repeat: int = typer.Option(1, "--repeat", min=1, max=10, help="Boot every configuration this many times (passes, vanilla first in each), so `advisor calibrate` measures how much R varies from one boot to the next on this host (on the H200 of calibration/gpu_real/ it was sigma(ln R) 0.25 for suffix, more than most gains). Rerunning with a larger count adds passes."),
    dummy_weights: bool = typer.Option(False, "--dummy-weights", help="Serve random weights (vLLM's --load-format dummy), e.g. on a GPU host without the checkpoint: the records measure step cost, memory and boot time, and say so (weights: dummy); the predictor never learns K̄ from them. The model directory needs only config.json and a tokenizer whose vocabulary fits the config's vocab_size."),
    save_responses: str = typer.Option(None, "--save-responses", help="Keep the model's own outputs (text and vLLM's token ids) of every configuration probed in this JSON Lines file; `advisor kbar --corpus FILE` and `recommend --corpus FILE` replay them.", show_default=False),
    json_out: bool = JsonOpt,
) -> None:
    """Probe MODEL with each configuration on a real vLLM server and record throughput, K̄ and R.

    Every finished configuration is written to the probe store at once; rerunning the same command
    skips what is done. A configuration that does not boot is recorded as such and the campaign goes on.
    """

    from pydantic import ValidationError

    from advisor.errors import UsageError
    from advisor.domain.decision import Decision
    from advisor.probe.campaign import CampaignSpec
    from advisor.probe.configs import parse_configs
    from advisor.probe.load import LoadSpec

    if api not in ("auto", "chat", "completions"):
        raise UsageError(f"--api must be auto, chat or completions, not {api!r}")
    given = {
        "gpu_memory_utilization": gmu, "max_model_len": max_model_len, "tensor_parallel_size": tp,
        "max_num_seqs": max_num_seqs, "cudagraph_mode": cudagraph_mode.upper() if cudagraph_mode else None,
    }  # fmt: skip
    try:
        base = Decision(**{k: v for k, v in given.items() if v is not None})
        load = LoadSpec(
            concurrency=concurrency, duration_s=duration, max_requests=requests, max_tokens=max_tokens,
            temperature=temperature, ignore_eos=ignore_eos,
        )  # fmt: skip
    except ValidationError as exc:
        first = exc.errors()[0]
        raise UsageError(f"{'.'.join(map(str, first['loc']))}: {first['msg']}") from None
    from advisor.probe.campaign import server_extra_args

    extra = server_extra_args(extra_args, dummy_weights)
    parsed = parse_configs(configs)
    if any(c.method == "mtp" for c in parsed):
        _check_mtp_layers(model)
    try:
        spec = CampaignSpec(
            model=model, corpus=corpus, configs=parsed, load=load, base=base, server_cmd=server_cmd,
            extra_args=extra, api=api, campaign=campaign, boot_timeout_s=boot_timeout, retry_failed=retry_failed,
            passes=repeat, save_responses=save_responses,
        )  # fmt: skip
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(map(str, first["loc"]))
        hint = (" (letters, digits, '.', '_', '-'; it names a folder under the data dir)" if field == "campaign" else "")
        raise UsageError(f"--{field} {first.get('input')!r}: {first['msg']}{hint}") from None
    result, store = run_spec(spec, quiet=json_out)
    failed = bool(result.records) and all(r.outcome != "ok" for r in result.records)
    _report(result, store, json_out, model=model, save_responses=save_responses)
    if failed:  # every configuration failed: exit 7 (ProbeError's code) once the records are shown
        from advisor.errors import ProbeError

        print(f"error: every probed configuration failed ({', '.join(sorted({r.outcome for r in result.records}))})",
              file=sys.stderr)  # fmt: skip
        raise typer.Exit(ProbeError.exit_code)


def _check_mtp_layers(model: str) -> None:
    """``mtp[:K]`` needs the checkpoint's own MTP layers: refuse before any boot when the model's config is at hand
    (a local directory or the bundled catalog, read offline) and has none; otherwise vLLM's refusal is recorded."""
    from advisor.errors import AdvisorError, UsageError
    from advisor.model.load import load_profile
    from advisor.settings import load_settings

    try:
        profile = load_profile(model, load_settings().model_copy(update={"offline": True}))
    except AdvisorError:
        return
    if not profile.mtp_layers:
        raise UsageError(f"--configs mtp: {model} has no MTP layers (num_nextn_predict_layers is 0 or absent in its "
                         "config.json); probe suffix[:K] or ngram[:K] for it instead")  # fmt: skip


def _report(result, store, json_out: bool, *, model: str, save_responses: str | None) -> None:
    """The campaign's records: JSON, or one line each (and where the model's own outputs went)."""
    import shlex

    if json_out:
        emit_json({
            "campaign_id": result.campaign_id,
            "store": str(store),
            "probed": [r.config for r in result.probed],
            "skipped": [r.config for r in result.skipped],
            "records": [r.model_dump(mode="json", exclude={"host"}) for r in result.records],
            "responses": save_responses,
        })  # fmt: skip
        return
    from advisor.probe.campaign import summary_line

    vanilla = next((r.throughput_tok_s for r in result.records if r.config == "vanilla" and r.outcome == "ok"), None)
    print(f"campaign {result.campaign_id} ({len(result.probed)} probed, {len(result.skipped)} already done), store {store}")
    for rec in result.records:
        print(f"  {summary_line(rec, vanilla)}")
    if save_responses:
        print(f"the model's own outputs: {save_responses} (replay them: advisor kbar --corpus {shlex.quote(save_responses)} "
              f"--tokenizer {shlex.quote(model)})")  # fmt: skip
