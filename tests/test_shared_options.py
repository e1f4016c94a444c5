"""recommend, render and report take the same options (one definition: advisor.cli.options.SHARED),
and README's command table names only flags the commands' --help has (issue 24)."""

from __future__ import annotations

import re
from pathlib import Path

import typer

from advisor.cli.app import app
from advisor.cli.options import SHARED

README = Path(__file__).resolve().parents[1] / "README.md"


def _flags(name: str, sub: str | None = None) -> set[str]:
    cmd = typer.main.get_command(app).commands[name]
    if sub:  # a command group's subcommand (``calibrate rebuild``)
        cmd = cmd.commands[sub]
    return {o for p in cmd.params for o in getattr(p, "opts", []) if o.startswith("--")}


def test_the_three_commands_accept_the_same_shared_options():
    shared = {opt.param_decls[0] for _, _, opt in SHARED}
    assert {"--objective", "--max-tpot-ms", "--max-ttft-ms", "--prompt-len", "--output-len", "--vllm-version"} <= shared
    for name in ("recommend", "render", "report"):
        assert shared <= _flags(name), (name, shared - _flags(name))


def test_render_and_report_take_the_layout_options(run_cli, tmp_path):
    args = ("meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H200", "--gpus", "1", "--objective", "latency",
            "--max-tpot-ms", "50", "--prompt-len", "512", "--output-len", "128", "--vllm-version", "0.33")  # fmt: skip
    code, _, err = run_cli("render", *args, "--out", str(tmp_path / "r"), "--json")
    assert code == 0, err
    code, _, err = run_cli("report", *args, "--out", str(tmp_path / "p.html"))
    assert code == 0, err


def test_readme_command_table_matches_help():
    rows = [line for line in README.read_text(encoding="utf-8").splitlines() if line.startswith("| `advisor ")]
    assert rows
    for row in rows:
        cmd, sub = re.match(r"\| `advisor (\w+)(?: (\w+))?", row).groups()
        if cmd not in {c for c in typer.main.get_command(app).commands}:
            continue
        group = getattr(typer.main.get_command(app).commands[cmd], "commands", {})
        sub = sub if sub in group else None
        usage = re.split(r"(?<!\\)\|", row)[1]
        named = set(re.findall(r"(--[a-z][a-z0-9-]*)", usage))
        known = _flags(cmd, sub) | {"--help"}
        if cmd == "report":  # the row also names `recommend … --html FILE`
            known |= _flags("recommend")
        assert named <= known, (cmd, named - known)
        if cmd in ("render", "report"):
            assert "same options" in usage, row
    # the recommend rows name every shared option (render and report say "same options")
    named = {f for row in rows if row.startswith("| `advisor recommend") for f in re.findall(r"(--[a-z][a-z0-9-]*)", re.split(r"(?<!\\)\|", row)[1])}
    shared = {opt.param_decls[0] for _, _, opt in SHARED}
    assert shared <= named, sorted(shared - named)
