"""`advisor render` through the real entry point: refusal of a configuration that does not boot
(exit 8, reason, nearest that boots), the printed summary and warnings, env and secrets, and
one-line errors (never a traceback, never exit 70) for hostile options."""

from __future__ import annotations

import stat

import pytest

from tests.render_helpers import unit as sd

MODEL = "meta-llama/Llama-3.1-70B-Instruct"


def test_a_configuration_that_does_not_boot_is_refused(run_cli, tmp_path):
    """Before: rendered silently with exit 0."""
    code, out, err = run_cli("render", MODEL, "--gpu", "H100", "--gpus", "1", "--out", str(tmp_path / "o"))
    assert code == 8 and out == ""
    assert err.count("\n") == 1 and err.startswith("error: not rendering:")
    assert "does not boot" in err and "nearest configuration that boots: --gpus 4 (" in err and "--force" in err
    assert not (tmp_path / "o").exists()


def test_force_renders_it_with_a_warning(run_cli, tmp_path):
    code, out, err = run_cli("render", MODEL, "--gpu", "H100", "--gpus", "1", "--out", str(tmp_path / "o"), "--force")
    assert code == 0, err
    assert "DOES NOT BOOT" in out and "rendered with --force although it does not boot on 1xH100" in out
    assert sorted(p.name for p in (tmp_path / "o").iterdir()) == ["advisor-recommendation.json", "bench.sh", "launch.sh", "vllm.env", "vllm.service"]


def test_render_prints_the_decision_and_its_warnings(run_cli, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_FROMENV")
    code, out, err = run_cli("render", MODEL, "--gpu", "H100", "--gpus", "4", "--out", str(tmp_path / "o"),
                             "--env", "HF_TOKEN", "--env", "NCCL_DEBUG=WARN", "--host", "0.0.0.0", "--port", "9000",
                             "--spec", "suffix")  # fmt: skip
    assert code == 0, err
    # suffix K=32 boots on 4xH100 with the speculative start-up term measured on vLLM 0.26.0 (docs/memory.md)
    assert "configuration  suffix K=32, gmu 0.85, TP 4" in out and "memory         boots:" in out
    assert "Warnings:" in out and "measure K on your traffic" in out  # the rules' warnings, as recommend prints them
    assert "serves         http://0.0.0.0:9000" in out and "HF_TOKEN=<secret>" in out and "hf_FROMENV" not in out
    env = tmp_path / "o" / "vllm.env"
    assert stat.S_IMODE(env.stat().st_mode) == 0o600 and 'HF_TOKEN="hf_FROMENV"' in env.read_text()
    assert 'NCCL_DEBUG="WARN"' in env.read_text()
    unit = (tmp_path / "o" / "vllm.service").read_text()
    argv = sd.exec_argv(sd.one(unit, "ExecStart"))
    assert argv[argv.index("--host") + 1] == "0.0.0.0" and argv[argv.index("--port") + 1] == "9000"
    assert sd.exec_argv(sd.one(unit, "ExecStartPost"))[-2:] == ["127.0.0.1", "9000"]  # readiness polls the loopback


@pytest.mark.parametrize(
    ("extra", "code", "message"),
    [
        (["--vllm-bin", "-S sh -c touch"], 2, "starts with '-'"),
        (["--vllm-bin", ""], 2, "--vllm-bin is empty"),
        (["--vllm-bin", "vllm\nExecStartPre=/bin/sh"], 2, "control character"),
        (["--host", "127.0.0.1; touch PWNED"], 2, "neither an IP address nor a host name"),
        (["--env-file", "relative/vllm.env"], 2, "must be an absolute path"),
        (["--env-file", "/etc/%h/x\\"], 2, "backslash"),
        (["--env", "BAD-NAME=1"], 2, "not a valid variable name"),
        (["--env", "ADVISOR_NOT_SET_ANYWHERE"], 2, "is not set in this environment"),
        (["--env", "VLLM_X=a\nb"], 2, "newline"),
        (["--served-model-name", "--api-key"], 2, "starts with '-'"),
        (["--format", "helm"], 2, "choose one of"),
        (["--port", "0"], 2, "Invalid value for '--port'"),
        (["--port", "8000; touch PWNED"], 2, "Invalid value for '--port'"),
    ],
)
def test_hostile_options_are_one_line_errors(run_cli, tmp_path, extra, code, message):
    got, out, err = run_cli("render", MODEL, "--gpu", "H100", "--gpus", "4", "--out", str(tmp_path / "o"), *extra)
    assert got == code and message in err and "Traceback" not in err, err
    assert not (tmp_path / "o").exists()


def test_unwritable_target_is_exit_73_and_changes_nothing(run_cli, tmp_path):
    out = tmp_path / "o"
    (out / "vllm.service").mkdir(parents=True)
    code, _, err = run_cli("render", MODEL, "--gpu", "H100", "--gpus", "4", "--out", str(out), "--force")
    assert code == 73 and "is a directory; refusing to replace it" in err and err.count("\n") == 1
    assert sorted(p.name for p in out.iterdir()) == ["vllm.service"]


def test_the_hostile_corpus_through_the_cli_gives_no_traceback(run_cli, tmp_path):
    """Every hostile value in every deployment option at once: exit 0 (files written) or exit 2
    with one `error:` line; never a traceback or an internal error (exit 70)."""
    from tests.render_helpers.corpus import HOSTILE

    outcomes = {0: 0, 2: 0}
    for i, v in enumerate(HOSTILE):
        out = tmp_path / f"o{i}"
        code, _, err = run_cli("render", MODEL, "--gpu", "H100", "--gpus", "4", "--out", str(out), "--vllm-bin", v, "--host", v,
                               "--served-model-name", v, "--env-file", "/etc/vllm/" + v, "--env", f"VLLM_HOSTILE={v}")  # fmt: skip
        assert code in outcomes and "Traceback" not in err and "internal error" not in err, (v, code, err)
        assert (code == 0) == out.is_dir()
        if code == 2:
            assert err.startswith("error: ") and err.count("\n") == 1, (v, err)
        outcomes[code] += 1
    assert outcomes[0] >= 5 and outcomes[2] >= 100  # both paths really taken
