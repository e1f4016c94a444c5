"""The Typer object every ``advisor`` command registers on (advisor.cli.app imports the command modules)."""

from __future__ import annotations

import typer

app = typer.Typer(
    name="advisor",
    help=(
        "Recommend the fastest vLLM configuration for a model on a GPU host "
        "(suffix speculative decoding on/off, K, gpu_memory_utilization, cudagraph mode, env), "
        "render launch files, and calibrate from short probe runs."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


@app.callback()
def _global(
    offline: bool = typer.Option(None, "--offline/--online", help="Never contact the Hugging Face hub (env ADVISOR_HUB_OFFLINE)."),
    catalog_dir: list[str] = typer.Option(None, "--catalog-dir", help="Extra model catalog directory <dir>/<org>/<name>/config.json (repeatable; env ADVISOR_CATALOG_DIRS)."),
    rules_dir: list[str] = typer.Option(None, "--rules-dir", help="Extra rules directory; rules override bundled ones by id (repeatable; env ADVISOR_RULES_DIRS)."),
    data_dir: str = typer.Option(None, "--data-dir", help="User data directory for the probe store (env ADVISOR_DATA_DIR)."),
) -> None:
    from advisor.cli.common import set_global_overrides
    from advisor.errors import UsageError

    for flag, values in (("--catalog-dir", catalog_dir or []), ("--rules-dir", rules_dir or []),
                         ("--data-dir", [] if data_dir is None else [data_dir])):  # fmt: skip
        if any(not v.strip() for v in values):
            raise UsageError(f"{flag} is empty: an empty path would silently mean the current directory; give a directory")

    set_global_overrides(hub_offline=offline, catalog_dirs=catalog_dir or None, rules_dirs=rules_dir or None, data_dir=data_dir)
