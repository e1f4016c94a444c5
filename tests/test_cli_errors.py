"""Usage errors from the argument parser are clean usage errors (exit 2), never 'internal error'.

typer ≥ 0.20 raises its own vendored click exceptions; the CLI edge must recognise them too."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["recommend", "meta-llama/Llama-3.1-8B-Instruct", "--gpus", "0"], "Invalid value for '--gpus'"),
        (["recommend", "meta-llama/Llama-3.1-8B-Instruct", "--bogus"], "No such option: --bogus"),
        (["recommend"], "Missing argument 'MODEL'"),
        (["bogus-command"], "No such command 'bogus-command'"),
        (["probe", "m", "--duration", "0"], "Invalid value for '--duration'"),
        (["calibrate", "--evaluate", "--json", "extra"], "No such command"),
    ],
)
def test_usage_errors_exit_2(run_cli, args, message):
    code, out, err = run_cli(*args)
    assert code == 2, (code, err)
    assert message in err and "internal error" not in err and "Traceback" not in err


def test_global_option_after_the_command_gets_a_hint(run_cli):
    code, _, err = run_cli("recommend", "meta-llama/Llama-3.1-8B-Instruct", "--offline")
    assert code == 2 and "hint: --offline is a global option: put it before the command" in err


def test_help_exits_0(run_cli):
    code, out, _ = run_cli("recommend", "--help")
    assert code == 0 and "--probe" in out
