"""``advisor probe`` end to end against the stand-in server (tests/vllm_helpers/fake_vllm.py):
records, vanilla first, gain and R, a failed boot recorded while the campaign goes on, resume,
--retry-failed, and Ctrl-C keeping finished records. The same flow against real vLLM is in
tests/test_probe_e2e.py."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from advisor.cli.app import main
from tests.vllm_helpers.procs import pids_where, sigint_default, stored_configs

ROOT = Path(__file__).resolve().parents[1]
FAKE = ROOT / "tests" / "vllm_helpers" / "fake_vllm.py"


@pytest.fixture()
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "absent.toml").write_text("")  # an empty settings file: no ./advisor.toml or ~/.config one is read
    monkeypatch.setenv("ADVISOR_CONFIG", str(tmp_path / "absent.toml"))
    monkeypatch.setenv("FAKE_TOKEN_S", "0.001")
    corpus = tmp_path / "prompts.jsonl"
    corpus.write_text("".join(json.dumps({"prompt": f"prompt number {i}"}) + "\n" for i in range(50)))
    (tmp_path / "good").mkdir()
    return tmp_path


def probe_args(tmp: Path, configs: str, *extra: str) -> list[str]:
    return [
        "--data-dir", str(tmp / "data"), "probe", str(tmp / "good"), "--corpus", str(tmp / "prompts.jsonl"),
        "--configs", configs, "--requests", "6", "--duration", "30", "--concurrency", "2", "--max-tokens", "8",
        "--max-model-len", "512", "--server-cmd", f"{sys.executable} {FAKE}", "--boot-timeout", "30", *extra,
    ]  # fmt: skip


def run_json(capsys: pytest.CaptureFixture[str], args: list[str]) -> tuple[int, dict, str]:
    rc = main([*args, "--json"])
    out, err = capsys.readouterr()
    return rc, (json.loads(out) if rc in (0, 7) and out.strip() else {}), err  # 7: every configuration failed, records printed


def test_campaign_records_resume_and_retry(env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = probe_args(env, "suffix:4,vanilla,ngram:2,vanilla@gmu=0.1")
    rc, out, err = run_json(capsys, args)
    assert rc == 0, err
    assert out["probed"] == ["vanilla", "vanilla@gmu=0.1", "suffix:4", "ngram:2"]  # vanilla first
    assert out["skipped"] == []
    recs = {r["config"]: r for r in out["records"]}
    van, suf, broken = recs["vanilla"], recs["suffix:4"], recs["vanilla@gmu=0.1"]
    assert van["outcome"] == "ok" and van["requests"] == 6 and van["tokens_per_step"] == 1.0
    assert van["vllm_version"] == "0.0.fake" and van["boot_s"] > 0
    assert van["command"][-4:-2] == ["--host", "127.0.0.1"]
    # The stand-in emits two tokens per step with one accepted draft token each.
    assert suf["outcome"] == "ok" and suf["tokens_per_step"] == pytest.approx(2.0)
    assert suf["mean_acceptance_length"] == pytest.approx(2.0)
    assert suf["implied_r"] == pytest.approx(2.0 / (suf["throughput_tok_s"] / van["throughput_tok_s"]))
    assert suf["spec_drafts"] > 0 and len(suf["acceptance_per_position"]) == 4
    assert suf["speculative_method"] == "suffix" and suf["num_speculative_tokens"] == 4
    assert recs["ngram:2"]["speculative_method"] == "ngram"
    assert broken["outcome"] == "boot_failed" and broken["failure"].startswith("no_kv_blocks: ")
    assert Path(broken["log_path"]).is_file() and broken["throughput_tok_s"] is None
    assert "[2/4] vanilla@gmu=0.1: boot_failed" in err

    # Same command again: nothing to probe.
    rc, again, err = run_json(capsys, args)
    assert rc == 0 and again["probed"] == [] and len(again["skipped"]) == 4
    assert again["campaign_id"] == out["campaign_id"]
    assert "resuming campaign" in err and "nothing left to probe" in err

    # --retry-failed probes only the failed boot again (it fails again, and is recorded again).
    rc, retry, err = run_json(capsys, [*args, "--retry-failed"])
    assert rc == 0 and retry["probed"] == ["vanilla@gmu=0.1"]

    # A different load is a different campaign.
    rc, other, _ = run_json(capsys, probe_args(env, "vanilla", "--temperature", "0.5"))
    assert rc == 0 and other["campaign_id"] != out["campaign_id"] and other["probed"] == ["vanilla"]

    from advisor.settings import load_settings
    from advisor.probe.store import open_store

    with open_store(load_settings(data_dir=env / "data")) as store:
        assert len(store.list_records(campaign_id=out["campaign_id"])) == 5
        assert len(store.list_records(model=str(env / "good"), outcome="ok")) == 4


def test_repeat_boots_each_configuration_again_pass_by_pass(env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--repeat N: N fresh boots of every configuration, vanilla first in each pass, each speculative run against
    its own pass's vanilla; the same campaign (rerunning resumes; a larger N adds passes)."""
    args = probe_args(env, "suffix:4,vanilla")
    rc, out, err = run_json(capsys, [*args, "--repeat", "2"])
    assert rc == 0, err
    assert out["probed"] == ["vanilla", "suffix:4", "vanilla", "suffix:4"]
    assert "[3/4] pass 2/2 vanilla: starting vLLM" in err
    recs = out["records"]
    for van, suf in ((recs[0], recs[1]), (recs[2], recs[3])):
        assert suf["implied_r"] == pytest.approx(suf["tokens_per_step"] / (suf["throughput_tok_s"] / van["throughput_tok_s"]))
    rc, again, err = run_json(capsys, [*args, "--repeat", "2"])
    assert rc == 0 and again["probed"] == [] and again["campaign_id"] == out["campaign_id"]
    assert "nothing left to probe" in err
    rc, more, err = run_json(capsys, [*args, "--repeat", "3"])
    assert rc == 0 and more["probed"] == ["vanilla", "suffix:4"] and more["campaign_id"] == out["campaign_id"]
    assert "resuming campaign" in err and "2 boot(s) left" in err
    assert main([*args, "--repeat", "0"]) == 2
    assert "--repeat" in capsys.readouterr().err


@pytest.mark.parametrize(("kind", "outcome", "failure"), [("dies", "crashed", "fatal_error: Fatal Python error: Segmentation fault"),
                                                         ("nometrics", "error", "probe_error: cannot read")])
def test_server_trouble_after_boot_is_recorded(env: Path, capsys: pytest.CaptureFixture[str], kind: str,
                                               outcome: str, failure: str) -> None:
    (env / kind).mkdir()
    args = probe_args(env, "vanilla,suffix:4")
    args[args.index(str(env / "good"))] = str(env / kind)
    rc, out, err = run_json(capsys, args)
    assert rc == 7, err  # every configuration failed: ProbeError's exit code, the records still printed
    assert [(r["config"], r["outcome"]) for r in out["records"]] == [("vanilla", outcome), ("suffix:4", outcome)]
    assert all(r["failure"].startswith(failure) for r in out["records"])


def test_plain_output(env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(probe_args(env, "vanilla,suffix:4"))
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert out.splitlines()[0].startswith("campaign c-") and "2 probed" in out
    assert "suffix:4: ok" in out and "K̄ 2.00" in out and "gain " in out and " R " in out


def test_usage_errors(env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(probe_args(env, "vanilla", "--api", "grpc")) == 2
    assert main(probe_args(env, "medusa:3")) == 2
    assert main(probe_args(env, "eagle:3")) == 2  # a drafter method without @draft=
    assert main(probe_args(env, "vanilla", "--extra-args", "'unclosed")) == 2
    assert main(probe_args(env, "vanilla", "--max-tokens", "600")) == 2  # no room in max_model_len 512
    err = capsys.readouterr().err
    assert "error: --api must be" in err and "unknown probe configuration" in err and "--extra-args" in err
    assert "eagle needs its drafter: add @draft=DIR_OR_ID" in err


def _records(db: Path) -> list[str]:
    return stored_configs(db)


def _fake_servers(marker: str) -> list[int]:
    def is_fake(proc: Path) -> bool:
        cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        return "fake_vllm.py" in cmd and marker in cmd

    return pids_where(is_fake)


def test_ctrl_c_keeps_finished_records_and_rerun_resumes(env: Path) -> None:
    args = probe_args(env, "vanilla,suffix:4,ngram:2")
    child_env = {**os.environ, "FAKE_TOKEN_S": "0.1", "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "advisor", *args], env=child_env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=sigint_default)  # fmt: skip
    db = env / "data" / "probes.sqlite"
    try:
        deadline = time.monotonic() + 60
        while not _records(db) and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.1)
        assert _records(db) == ["vanilla"]
        time.sleep(1.0)  # the next configuration's server is up and under load
        assert _fake_servers(str(env / "good"))
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:  # an assertion above failed: do not leave the campaign running
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, err
    assert "interrupted: 1 configuration(s) probed in this run are kept" in err
    assert _records(db) == ["vanilla"]
    assert _fake_servers(str(env / "good")) == []  # the server of the interrupted configuration is gone

    rerun = subprocess.run([sys.executable, "-m", "advisor", *args, "--json"], env={**child_env, "FAKE_TOKEN_S": "0.001"},
                           capture_output=True, text=True, timeout=120)  # fmt: skip
    assert rerun.returncode == 0, rerun.stderr
    assert "resuming campaign" in rerun.stderr and "already done: vanilla" in rerun.stderr
    assert json.loads(rerun.stdout)["probed"] == ["suffix:4", "ngram:2"]
    assert _records(db) == ["vanilla", "suffix:4", "ngram:2"]


def test_dummy_weight_probe_is_flagged_and_never_teaches_kbar(env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`--dummy-weights` (the GPU machine has no checkpoints): vLLM gets --load-format dummy, every
    record says weights=dummy, the text says what it measures, and the predictor's dataset skips it."""
    from advisor.predict.dataset import probe_observations
    from advisor.settings import load_settings
    from advisor.probe.store import open_store

    rc, out, err = run_json(capsys, probe_args(env, "vanilla,suffix:4", "--dummy-weights"))
    assert rc == 0, err
    recs = out["records"]
    assert [r["outcome"] for r in recs] == ["ok", "ok"]
    assert all(r["weights"] == "dummy" for r in recs)
    assert all(r["command"][r["command"].index("--load-format") + 1] == "dummy" for r in recs)
    rc = main(probe_args(env, "vanilla,suffix:4", "--dummy-weights"))  # resume: the text form
    assert rc == 0 and "dummy weights: step cost and memory only" in capsys.readouterr().out
    with open_store(load_settings(data_dir=str(env / "data"))) as store:
        stored = store.list_records()
    assert stored and all(r.weights == "dummy" for r in stored)
    assert probe_observations(stored) == []
    # the same vLLM flag given through --extra-args is recognised too: the same servers, so the same
    # campaign (resumed, nothing probed again)
    rc, out2, err = run_json(capsys, probe_args(env, "vanilla", "--extra-args", "--load-format dummy"))
    assert rc == 0, err
    assert out2["campaign_id"] == out["campaign_id"] and out2["probed"] == []
    assert out2["records"][0]["weights"] == "dummy"
    rc = main(probe_args(env, "vanilla", "--dummy-weights", "--extra-args", "--load-format auto"))
    assert rc == 2 and "--dummy-weights contradicts" in capsys.readouterr().err


def test_a_corpus_that_runs_out_before_the_window_is_said(env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Seen on the H200 (calibration/gpu_probes/): 42 prompts were done in 6.7 s of a 25 s window. The
    record says so and the text line tells the user, instead of a silently short measurement."""
    small = env / "few.jsonl"
    small.write_text("".join(json.dumps({"prompt": f"p {i}"}) + "\n" for i in range(3)))
    args = [a if a != str(env / "prompts.jsonl") else str(small) for a in probe_args(env, "vanilla")]
    args[args.index("--requests"):args.index("--requests") + 2] = []  # only the 30 s window bounds it
    rc, out, err = run_json(capsys, args)
    assert rc == 0, err
    rec = out["records"][0]
    assert rec["outcome"] == "ok" and rec["corpus_exhausted"] is True and rec["requests"] == 3
    assert rec["duration_s"] < 30
    rc = main(args)  # resumed: the text form of the same record
    assert rc == 0 and "corpus ran out after 3 requests" in capsys.readouterr().out
    # a corpus larger than the request budget did not run out
    rc, out, err = run_json(capsys, probe_args(env, "vanilla@gmu=0.5"))
    assert rc == 0 and out["records"][0]["corpus_exhausted"] is False


def test_save_responses_keeps_own_outputs_per_configuration_and_kbar_replays_them(
    env: Path, capsys: pytest.CaptureFixture[str]
) -> None:  # fmt: skip
    """`--save-responses FILE`: every finished request of every configuration, with vLLM's token ids
    (asked for with return_token_ids); same campaign id as without it; a resumed campaign keeps the
    lines of the configurations done before; `advisor kbar` replays one configuration's outputs."""
    own = env / "own.jsonl"
    rc, plain, err = run_json(capsys, probe_args(env, "vanilla"))
    assert rc == 0, err
    rc, out, err = run_json(capsys, probe_args(env, "vanilla,ngram:2", "--save-responses", str(own)))
    assert rc == 0, err
    assert out["campaign_id"] == plain["campaign_id"] and out["probed"] == ["ngram:2"]  # vanilla resumed
    lines = [json.loads(x) for x in own.read_text().splitlines()]
    assert [x["config"] for x in lines] == ["ngram:2"] * 6 and [x["index"] for x in lines] == list(range(6))
    first = lines[0]
    assert first["format"] == "advisor-probe-responses/1" and first["api"] == "chat"
    assert first["prompt"] == "prompt number 0" and first["finish_reason"] == "length"
    assert first["token_ids"] == [97, 98] * 4 and first["response"] == "ab" * 4
    assert first["prompt_token_ids"] == [ord(c) for c in "prompt number 0"]
    rc, _, err = run_json(capsys, probe_args(env, "vanilla,ngram:2", "--save-responses", str(own), "--retry-failed",
                                             "--campaign", "other"))  # fmt: skip
    assert rc == 0, err
    lines = [json.loads(x) for x in own.read_text().splitlines()]
    assert [(x["campaign_id"], x["config"]) for x in lines[::6]] == [
        (out["campaign_id"], "ngram:2"), ("other", "vanilla"), ("other", "ngram:2")]
    rc = main(["kbar", "--corpus", str(own), "--method", "ngram", "--k", "2", "--config", "vanilla",
               "--prompt-lookup-min", "1", "--prompt-lookup-max", "2", "--tokenizer", "builtin", "--json"])  # fmt: skip
    res = json.loads(capsys.readouterr().out)
    assert rc == 0 and res["own_outputs"] and res["replayed_config"] == "vanilla" and res["requests"] == 6
    assert res["skipped"] == {"other_config": 12} and res["tokens"] == 48  # the recorded ids, no EOS added
    assert res["tokenizer"].startswith("none needed") and not res["tokenizer_fallback"]
    # 97 98 97 98 97 98 97 98 after "prompt number 0": prefill 97 (no earlier 97); 98 (none drafted);
    # 97 (98 matched the "b" of "number": draft "er" rejected); then 98 97 + bonus 98; then 97 98,
    # the end: 8 tokens in 5 steps.
    assert res["tokens_per_step"] == pytest.approx(1.6) and res["drafts"] == 18 and res["accepted_tokens"] == 24
