"""``advisor kbar --corpus FILE``: K̄ of suffix decoding on recorded traffic, estimated offline."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import typer

from advisor.cli._app import app
from advisor.cli.common import JsonOpt, emit_json, replay_progress, settings, table


def _fmt(x: float | None, digits: int = 3) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def _ci(ci: tuple[float, float] | None, digits: int = 3, pct: bool = False) -> str:
    if ci is None:
        return ""
    lo, hi = (ci[0] * 100, ci[1] * 100) if pct else ci
    return f"  [{lo:.{digits}f}, {hi:.{digits}f}]"


def render(r: Any) -> str:
    """The human-readable report of a KbarResult."""
    level = f"{r.ci_level * 100:.0f}% CI"
    fmts = ", ".join(f"{k} {v:,}" for k, v in sorted(r.formats.items())) or "-"
    skipped = ", ".join(f"{k} {v:,}" for k, v in r.skipped.items()) or "none"
    p = r.params
    eos = f"EOS appended: {'no' if p.get('eos_token_id') is None else 'id ' + str(p['eos_token_id'])}"
    if r.method == "ngram":
        cfg = (f"K={r.k}, prompt_lookup_min={p['prompt_lookup_min']}, prompt_lookup_max={p['prompt_lookup_max']}, "
               f"{eos} (to text responses)")  # fmt: skip
    else:
        cfg = (f"K={r.k}, max_tree_depth={p['max_tree_depth']}, max_cached_requests={p['max_cached_requests']}, "
               f"max_spec_factor={p['max_spec_factor']}, min_token_prob={p['min_token_prob']}, "
               f"concurrency={p['concurrency']}, {eos} (to text responses)")  # fmt: skip
    nz = [x for x in r.per_position if x > 0]
    per_pos = " ".join(f"{x:.2f}" for x in nz[:16]) + (" ..." if len(nz) > 16 else "") if nz else "-"
    rate = "-" if r.acceptance_rate is None else f"{r.acceptance_rate * 100:.1f}%"
    stop = {"until_ci": "early: the CI reached the --until-ci target", "max_requests": "at --max-requests",
            None: "no: the whole corpus"}[r.stop_reason]  # fmt: skip
    tok_s = r.tokens / r.elapsed_s if r.elapsed_s else 0.0
    rows = [
        ("corpus", r.corpus),
        ("formats", f"{fmts} (requests read from {r.records:,} records)"),
        ("responses", "the model's own outputs" + (f" (configuration {r.replayed_config})" if r.replayed_config else "")
         if r.own_outputs else "as recorded in the file (reference responses, not this model's own outputs)"),
        ("tokenizer", r.tokenizer),
        (f"{r.method} config", cfg),
        ("requests", f"{r.requests:,} replayed: {r.tokens:,} output tokens, {r.prompt_tokens:,} prompt tokens"),
        ("skipped", skipped),
        ("K̄ tokens/step", f"{_fmt(r.tokens_per_step)}{_ci(r.ci['tokens_per_step'])}  ({level}; all steps, empty drafts included)"),
        ("mean accept len", f"{_fmt(r.mean_acceptance_length)}{_ci(r.ci['mean_acceptance_length'])}  (as vLLM reports it: 1 + accepted/drafts)"),
        ("acceptance rate", f"{rate}{_ci(r.ci['acceptance_rate'], 1, pct=True)}  (accepted / drafted tokens)"),
        ("per position", per_pos),
        ("drafts", f"{r.drafts:,} of {r.steps:,} steps drafted {r.draft_tokens:,} tokens, {r.accepted_tokens:,} accepted"),
        ("stopped", stop),
        ("time", f"{r.elapsed_s:.1f} s ({r.replay_s:.1f} s replay, {r.prepare_s:.1f} s waiting on read/tokenize); {tok_s:,.0f} output tok/s"),
    ]  # fmt: skip
    what = "n-gram (prompt lookup)" if r.method == "ngram" else "suffix decoding"
    lines = [table(rows, title=f"advisor kbar: {what} replayed on recorded traffic")]
    lines += [f"  note: {n}" for n in r.notes]
    return "\n".join(lines)


@app.command("kbar")
def kbar_cmd(
    corpus: Path = typer.Option(..., "--corpus", help="Recorded traffic: JSONL prompt/response, OpenAI chat logs, ShareGPT (JSON or JSONL), vllm bench custom JSONL with outputs; .gz ok.", show_default=False),
    tokenizer: str = typer.Option(None, "--tokenizer", help="The target model's tokenizer: HF id (HF cache), model dir or tokenizer.json. Omitted or 'builtin': a labelled approximate fallback.", show_default=False),
    method: str = typer.Option("suffix", "--method", help="suffix (Arctic Inference's suffix cache, as vLLM drives it) or ngram (vLLM's prompt-lookup proposer)."),
    k: int = typer.Option(None, "--k", help="num_speculative_tokens K (default: rules/policy/decider.yaml's for suffix, advisor.kbar.ngram's 4 for ngram).", show_default=False),
    prompt_lookup_min: int = typer.Option(None, "--prompt-lookup-min", help="ngram: shortest n-gram matched (vLLM's prompt_lookup_min; default: vLLM's, 5, or --prompt-lookup-max).", show_default=False),
    prompt_lookup_max: int = typer.Option(None, "--prompt-lookup-max", help="ngram: longest n-gram matched (vLLM's prompt_lookup_max; default: vLLM's, 5, or --prompt-lookup-min).", show_default=False),
    config: str = typer.Option(None, "--config", help="In a file of the model's own outputs from `advisor probe --save-responses`: the configuration whose outputs to replay (default: the first in the file).", show_default=False),
    concurrency: int = typer.Option(1, "--concurrency", help="Requests in flight, interleaved step by step (they share the global tree)."),
    max_requests: int = typer.Option(None, "--max-requests", help="Replay at most this many requests.", show_default=False),
    until_ci: float = typer.Option(None, "--until-ci", help="Stop once K̄'s relative CI half-width is at most this (e.g. 0.05).", show_default=False),
    check_every: int = typer.Option(200, "--check-every", help="Requests between --until-ci checks."),
    fmt: str = typer.Option("auto", "--format", help="auto, prompt_response, openai_chat, sharegpt or vllm_custom."),
    max_tree_depth: int = typer.Option(None, "--max-tree-depth", help="suffix_decoding_max_tree_depth (default: vLLM's, advisor.vllm_facts).", show_default=False),
    max_cached_requests: int = typer.Option(None, "--max-cached-requests", help="suffix_decoding_max_cached_requests (default: vLLM's).", show_default=False),
    max_spec_factor: float = typer.Option(None, "--max-spec-factor", help="suffix_decoding_max_spec_factor (default: vLLM's).", show_default=False),
    min_token_prob: float = typer.Option(None, "--min-token-prob", help="suffix_decoding_min_token_prob (default: vLLM's).", show_default=False),
    max_model_len: int = typer.Option(None, "--max-model-len", help="Skip prompts that do not fit; cut responses at it.", show_default=False),
    seed: int = typer.Option(0, "--seed", help="Bootstrap seed."),
    eos: bool = typer.Option(True, "--eos/--no-eos", help="End each response with the model's EOS token, as generated (off: traces cut at max_tokens)."),
    json_out: bool = JsonOpt,
) -> None:  # fmt: skip
    """Estimate K̄ (tokens per step) of suffix decoding or n-gram on your own traffic, offline, as vLLM drafts.

    The traffic may be recorded request/response logs or the model's own outputs
    (``advisor probe --save-responses FILE``), which is what vLLM will verify drafts against."""
    from advisor.errors import UsageError
    from advisor.kbar.estimate import estimate_kbar

    if method not in ("suffix", "ngram"):
        raise UsageError(f"--method must be suffix or ngram, not {method!r}")
    if method == "suffix" and (prompt_lookup_min is not None or prompt_lookup_max is not None):
        raise UsageError("--prompt-lookup-min/--prompt-lookup-max apply to --method ngram")
    s = settings()
    on_progress, prog = replay_progress(not json_out and sys.stderr.isatty())
    kwargs = {
        "method": method, "prompt_lookup_min": prompt_lookup_min, "prompt_lookup_max": prompt_lookup_max,
        "config": config, "concurrency": concurrency, "max_requests": max_requests, "until_ci": until_ci, "check_every": check_every,
        "fmt": fmt, "max_model_len": max_model_len,
        "seed": seed, "append_eos": eos, "offline": s.offline, "cache_dir": s.hf_cache_dir,
        "allow_fallback": False, "on_progress": on_progress,
    }  # fmt: skip
    suffix = {"max_tree_depth": max_tree_depth, "max_cached_requests": max_cached_requests,
              "max_spec_factor": max_spec_factor, "min_token_prob": min_token_prob}  # fmt: skip
    if method == "ngram" and any(v is not None for v in suffix.values()):
        raise UsageError("--max-tree-depth/--max-cached-requests/--max-spec-factor/--min-token-prob apply to --method suffix")
    kwargs.update({name: value for name, value in suffix.items() if value is not None})  # unset: vLLM's defaults
    if prog is None:
        result = estimate_kbar(corpus, tokenizer, k, **kwargs)
    else:
        with prog:
            result = estimate_kbar(corpus, tokenizer, k, **kwargs)
    if json_out:
        emit_json(result.model_dump())
    else:
        print(render(result))
