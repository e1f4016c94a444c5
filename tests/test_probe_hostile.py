"""A misbehaving server (tests/vllm_helpers/fake_vllm.py, FAKE_MISBEHAVE) never aborts a campaign:
the configuration it serves is recorded with what went wrong and the next one is probed; the
warm-up is bounded by --boot-timeout and /metrics in time and size, outside the measured window;
nothing the server writes reaches the terminal or the store as an escape sequence."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from advisor.cli.app import main
from advisor.probe import metrics

ROOT = Path(__file__).resolve().parents[1]
FAKE = ROOT / "tests" / "vllm_helpers" / "fake_vllm.py"

# misbehaviour -> outcomes the suffix configuration may end in (vanilla, served well, must be ok)
CASES = {
    "version_list": {"ok"}, "version_int": {"ok"},  # the version is just not recorded
    "models_str": {"boot_failed"}, "models_list": {"boot_failed"}, "models_empty": {"boot_failed"},
    "sse_list": {"error"}, "usage_str": {"error"}, "choices_str": {"error"},
    "warm_hang": {"timeout"}, "metrics_slow": {"error"}, "metrics_huge": {"error"},
    "metrics_esc": {"ok"}, "metrics_garbage": {"error"},
    # issue 43 item 6: a lying /metrics is recorded as an implausible measurement, never as ok
    "metrics_x100": {"error"}, "metrics_accept_gt_draft": {"error"}, "metrics_60_per_step": {"error"},
}  # fmt: skip


@pytest.fixture()
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("FAKE_TOKEN_S", "0.001")
    monkeypatch.setenv("FAKE_MISBEHAVE_ONLY", "spec")
    monkeypatch.setattr(metrics, "SCRAPE_TIMEOUT_S", 2.0)
    monkeypatch.setattr(metrics, "MAX_METRICS_BYTES", 2 * 2**20)
    corpus = tmp_path / "prompts.jsonl"
    corpus.write_text("".join(json.dumps({"prompt": f"prompt number {i}"}) + "\n" for i in range(20)))
    (tmp_path / "good").mkdir()
    return tmp_path


def _args(tmp: Path, boot_timeout: str = "30") -> list[str]:
    return ["--data-dir", str(tmp / "data"), "probe", str(tmp / "good"), "--corpus", str(tmp / "prompts.jsonl"),
            "--configs", "vanilla,suffix:4", "--requests", "4", "--duration", "30", "--concurrency", "2",
            "--max-tokens", "8", "--max-model-len", "512", "--server-cmd", f"{sys.executable} {FAKE}",
            "--boot-timeout", boot_timeout, "--json"]  # fmt: skip


@pytest.mark.parametrize("mode", sorted(CASES))
def test_misbehaving_server_is_recorded_and_the_campaign_goes_on(env, capsys, monkeypatch, mode):
    monkeypatch.setenv("FAKE_MISBEHAVE", mode)
    t0 = time.monotonic()
    rc = main(_args(env, boot_timeout="4" if mode == "warm_hang" else "30"))
    took = time.monotonic() - t0
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert "Traceback" not in err and "internal error" not in err
    recs = {r["config"]: r for r in json.loads(out)["records"]}
    assert recs["vanilla"]["outcome"] == "ok", recs["vanilla"]
    assert recs["suffix:4"]["outcome"] in CASES[mode], recs["suffix:4"]
    for text in (out, err, json.dumps(recs)):
        assert "\x1b" not in text and "\u202e" not in text
    if mode.startswith("version"):
        assert recs["suffix:4"]["vllm_version"] is None
    if mode == "warm_hang":
        assert took < 4 + 25, took  # the warm-up ended at the boot deadline, not 2 x 300 s later
        assert "warmup_timeout" in recs["suffix:4"]["failure"]
    if mode in ("metrics_slow", "metrics_huge"):
        assert "/metrics" in recs["suffix:4"]["failure"]
    if mode in ("metrics_x100", "metrics_accept_gt_draft", "metrics_60_per_step"):
        assert "implausible measurement" in recs["suffix:4"]["failure"], recs["suffix:4"]
        assert {"metrics_x100": "client", "metrics_accept_gt_draft": "spec_accepted_tokens",
                "metrics_60_per_step": "tokens_per_step"}[mode] in recs["suffix:4"]["failure"]  # fmt: skip


def test_measured_window_is_the_load_not_the_scrapes(env, capsys, monkeypatch):
    """A /metrics that takes seconds to answer does not enter the throughput's denominator: the measured
    window lies between the end of the scrape before the load and the start of the one after it (a
    bound that holds on a loaded CI machine too, where the load itself may take seconds)."""
    real = metrics.scrape
    calls: list[tuple[float, float]] = []  # (called, returned), monotonic

    def slow(base_url, *a, **k):
        called = time.monotonic()
        time.sleep(1.5)
        snap = real(base_url, *a, **k)
        calls.append((called, time.monotonic()))
        return snap

    monkeypatch.setattr(metrics, "scrape", slow)
    monkeypatch.delenv("FAKE_MISBEHAVE_ONLY")
    args = _args(env)
    args[args.index("vanilla,suffix:4")] = "vanilla"
    rc = main(args)
    out, err = capsys.readouterr()
    assert rc == 0, err
    rec = json.loads(out)["records"][0]
    assert rec["outcome"] == "ok"
    assert len(calls) == 2, calls  # one scrape before the load, one after
    gap = calls[1][0] - calls[0][1]  # from the first scrape's answer to the second one's call
    assert 0 < rec["duration_s"] <= gap + 0.01, (rec["duration_s"], gap)  # scrape to scrape would be >= gap + 1.5
    assert rec["throughput_tok_s"] == pytest.approx(rec["output_tokens"] / rec["duration_s"], rel=0.01)


def test_two_probes_of_one_campaign_one_wins_the_other_says_so(env, capsys, monkeypatch):
    import os
    import sqlite3
    import subprocess

    args = _args(env)
    child_env = {**os.environ, "FAKE_TOKEN_S": "0.05", "FAKE_BOOT_S": "1.0", "PYTHONPATH": str(ROOT)}
    child_env.pop("FAKE_MISBEHAVE_ONLY", None)
    first = subprocess.Popen([sys.executable, "-m", "advisor", *args], env=child_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        locks = []
        while not locks and time.monotonic() < deadline:
            locks = [p for p in (env / "data" / "campaigns").glob("*/.lock") if p.read_text().strip().isdigit()]
            time.sleep(0.1)
        assert locks, "the first probe never took its campaign lock"
        rc = main(args)
        _, err = capsys.readouterr()
        assert rc == 7 and "being probed by another advisor process" in err and str(first.pid) in err, err
    finally:
        out, err = first.communicate(timeout=120)
    assert first.returncode == 0, err
    rows = sqlite3.connect(env / "data" / "probes.sqlite").execute("SELECT config FROM probes ORDER BY id").fetchall()
    assert [r[0] for r in rows] == ["vanilla", "suffix:4"]  # each configuration probed once
    # Once the first is done, the same command resumes: nothing left.
    rc = main(args)
    out, err = capsys.readouterr()
    assert rc == 0 and json.loads(out)["probed"] == [] and "nothing left to probe" in err
