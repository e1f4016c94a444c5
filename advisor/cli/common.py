"""Shared CLI plumbing: global options -> settings, JSON output, plain tables."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import typer

from advisor.errors import DependencyError
from advisor.settings import Settings

_overrides: dict[str, Any] = {}


def set_global_overrides(**values: Any) -> None:
    """Called by the app callback with the global flags (None = not given)."""
    _overrides.clear()
    _overrides.update({k: v for k, v in values.items() if v is not None})


def settings() -> Settings:
    """Settings with CLI flags ranked above env, file and defaults."""
    from advisor.settings import load_settings

    return load_settings(**_overrides)


def vllm_choice(flag: str | None) -> Any:
    """The vLLM version a command targets (advisor.vllm_facts.choose_version: flag, setting, installed, default)."""
    from advisor.vllm_facts import choose_version

    return choose_version(flag, settings().vllm_version)


def emit_json(obj: Any) -> None:
    """Write ``obj`` as indented JSON to stdout."""
    sys.stdout.write(json.dumps(obj, indent=2, sort_keys=False, default=str) + "\n")


def table(rows: list[tuple[str, Any]], title: str | None = None) -> str:
    """A two-column plain-text table (no rich on the fast path)."""
    width = max((len(k) for k, _ in rows), default=0)
    lines = [title] if title else []
    lines += [f"  {k.ljust(width)}  {v}" for k, v in rows]
    return "\n".join(lines)


JsonOpt = typer.Option(False, "--json", help="Print one JSON object (stable keys) instead of a table.")


def model_arg() -> Any:
    return typer.Argument(
        ...,
        metavar="MODEL",
        help="Hugging Face id (bundled, in the HF cache, or on the hub when online), a model directory, or a config.json path.",
        show_default=False,
    )


def path_opt(help_text: str) -> Any:
    return typer.Option(None, help=help_text, dir_okay=True, file_okay=True)


__all__ = ["JsonOpt", "Path", "emit_json", "model_arg", "set_global_overrides", "settings", "table", "vllm_choice", "write_html"]


def replay_progress(enabled: bool) -> tuple[Any, Any]:
    """(callback, progress context) drawing a rich progress bar on stderr; (None, None) when off."""
    if not enabled:
        return None, None
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    prog = Progress(
        TextColumn("replaying"),
        BarColumn(),
        DownloadColumn(),
        TextColumn("{task.fields[requests]:,} requests  {task.fields[tokens]:,} tokens  K̄ {task.fields[kbar]}"),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
    )
    task = prog.add_task("kbar", total=None, requests=0, tokens=0, kbar="-")

    def update(p: Any) -> None:
        kbar = f"{p.tokens_per_step:.3f}" if p.tokens_per_step else "-"
        prog.update(task, completed=p.bytes_read, total=p.total_bytes or None, requests=p.requests,
                    tokens=p.tokens, kbar=kbar)  # fmt: skip

    return update, prog


def _report_progress(msg: str) -> None:
    print(f"report: {msg}", file=sys.stderr, flush=True)


def write_html(rec, model: str, out: Path) -> Path:
    """Build the page of ``rec`` (the Recommendation recommend built for ``model``) and write it atomically."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise DependencyError("the HTML report draws with matplotlib, which is not installed: pip install matplotlib "
                              "(a dependency of vllm-advisor; reinstall the package)") from None  # fmt: skip
    from advisor.model.load import load_profile
    from advisor.report.page import build_report, write_report

    s = settings()
    html = build_report(rec, load_profile(model, s), s, progress=_report_progress)
    path = write_report(html, out)
    print(f"report: wrote {path} ({len(html.encode()) // 1024} KiB)", file=sys.stderr)
    return path
