"""Unsure recommendations: the probe plan they print, and ``recommend --probe`` closing the loop
against the stand-in vLLM server (tests/vllm_helpers/fake_vllm.py) and a real SQLite probe store."""

from __future__ import annotations

import json
import math
import re
import os
import shlex
import sys
from pathlib import Path

import pytest

from advisor.cli.app import main
from advisor.domain.decision import Decision
from advisor.domain.prediction import Decomposition, RecommendedPrediction
from advisor.plan.probe_plan import probe_plan
from advisor.domain.workload import Workload

FAKE = Path(__file__).resolve().parent / "vllm_helpers" / "fake_vllm.py"
UNSURE = "meta-llama/Llama-3.1-8B-Instruct"  # humaneval on 8 x H200: P(win) ≈ 0.67 (the host is matched only by its GPU; K̄ the own-output prior)
UNSURE_CORPUS = "humaneval"


def plan_for(p_win: float, *, policy: str = "default_on", measured=None, workload=None, model="acme/m", fitted_factor=1.0,
             fitted_within=None, gain=1.0, run_sigma=0.0):  # fmt: skip
    pred = RecommendedPrediction(
        gain=gain, gain_low=0.9, gain_high=1.1, p_win=p_win, k_bar=2.0, k_bar_source="test", r=2.0, host_state=None,
        draft_tokens=1.0, context_tokens=1000.0, spec_graph_mode="piecewise", mla_prefill_ms=0.0, calibration_shift=1.0,
        model_seen=False, explanation=[], measured=measured, host_profile="h200-vllm0.26.0", host_match="given",
        decomposition=Decomposition(k_bar=2.0, r=2.0, fitted_factor=fitted_factor, sources={}),
    )  # fmt: skip
    return probe_plan(model, Decision(tensor_parallel_size=4, gpu_memory_utilization=0.85), workload or Workload(corpus="sharegpt"),
                      pred, policy=policy, k=16, low=0.3, high=0.7, fitted_within=fitted_within, run_sigma=run_sigma)  # fmt: skip


def test_plan_only_inside_the_unsure_band_and_where_rules_leave_room():
    assert plan_for(0.5) is not None
    assert plan_for(0.29) is None and plan_for(0.71) is None
    assert plan_for(0.5, policy="forbidden") is None and plan_for(0.5, policy="required") is None
    assert plan_for(0.5, measured={"gain": 1.2, "runs": 1, "campaigns": ["c1"]}) is None


def test_plan_repeats_the_boots_where_the_host_noise_exceeds_the_margin():
    """A host class whose R varies more from boot to boot (its measured run sigma) than the predicted margin
    |ln gain| gets --repeat 3 in its plan and says why; a margin beyond the noise, or no measured noise, one boot."""
    from advisor.rules.policy import load_policy

    noisy = plan_for(0.45, gain=0.9, run_sigma=0.27)
    assert noisy.passes == load_policy().probe_repeat_passes == 3 and noisy.argv[-2:] == ["--repeat", "3"]
    assert "sigma(ln R) 0.27" in noisy.reason and "|ln 0.90| = 0.11" in noisy.reason
    assert shlex.split(noisy.command) == noisy.argv
    for quiet in (plan_for(0.45, gain=0.9), plan_for(0.45, gain=0.7, run_sigma=0.27)):
        assert quiet.passes == 1 and "--repeat" not in quiet.argv


def test_a_prediction_carried_by_fitted_terms_is_unsure():
    """Outside the P(win) band, a gain the fitted terms move beyond exp(±fitted_within) gets the probe plan
    (issue #22: |ln fitted_factor| <= 0.2 wherever a decision is printed without "unsure")."""
    from advisor.rules.policy import load_policy

    within = load_policy().fitted_factor_within
    assert within == 0.2
    assert plan_for(0.9, fitted_factor=1.21, fitted_within=within) is None
    assert plan_for(0.9, fitted_factor=1 / 1.21, fitted_within=within) is None
    for ff in (1.33, 0.7):
        plan = plan_for(0.9, fitted_factor=ff, fitted_within=within)
        assert plan is not None and f"x{ff:.2f}" in plan.reason and "rests on a fit" in plan.reason
    # the rules still decide where they require or forbid; a measurement on this host settles it
    assert plan_for(0.9, fitted_factor=1.5, fitted_within=within, policy="required") is None
    assert plan_for(0.9, fitted_factor=1.5, fitted_within=within, measured={"gain": 1.2, "runs": 1, "campaigns": ["c"]}) is None


def test_recommend_prints_why_a_fitted_prediction_is_unsure(run_cli):
    """On the seed host a Llama model's suffix gain carries the Llama-instruct term (x1.3 or more) on a corpus whose K̄
    is the seed sweep's own (mbpp: no own-output or published prior, so no seed-host K̄ term offsets it): the Why line
    and the plan say the fit is what carries it."""
    code, out, err = run_cli("recommend", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "B200", "--gpus", "8", "--corpus",
                             "mbpp", "--json")  # fmt: skip
    assert code == 0, err
    rec = json.loads(out)
    ff = rec["prediction"]["decomposition"]["fitted_factor"]
    assert abs(math.log(ff)) > 0.2, ff
    assert rec["probe_plan"] is not None and "fitted terms multiply" in rec["probe_plan"]["reason"]
    assert any("fitted terms multiply by" in t for t in rec["trace"])


def test_plan_command_is_quoted_and_uses_the_traffic():
    plan = plan_for(0.5, model="acme/$(touch pwned)'x")
    assert shlex.split(plan.command) == plan.argv
    assert plan.argv[:3] == ["advisor", "probe", "acme/$(touch pwned)'x"]
    args = dict(zip(plan.argv[3::2], plan.argv[4::2]))
    assert args == {"--corpus": "sharegpt", "--configs": "vanilla,suffix:16", "--tp": "4", "--gpu-memory-utilization": "0.85",
                    "--max-model-len": "16384", "--concurrency": "32"}  # fmt: skip
    other = plan_for(0.5, workload=Workload(corpus="wildchat"))
    assert other.corpus == "humaneval" and "wildchat" in other.corpus_note


@pytest.fixture()
def data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    # recommend and the probe run on one "8 x H200" host (an nvidia-smi on PATH that prints a captured
    # H200's answer): a measurement decides only for the host, GPU, TP and concurrency it was taken at.
    from tests.test_host_collect import H200_QUERY, fake_nvidia_smi

    bindir = tmp_path / "bin"
    bindir.mkdir()
    fake_nvidia_smi(bindir, "".join(H200_QUERY.replace("0, ", f"{i}, ", 1) for i in range(8)))  # 8 x H200: unsure
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_TOKEN_S", "0.005")
    monkeypatch.setenv("FAKE_TOKENS", "64")  # long enough replies that HTTP overheads do not blur the ratio
    monkeypatch.setenv("FAKE_SPEC_STEP_COST", "1.25")  # K̄ = 2 > R = 1.25: suffix ≈ 1.6x on this "host"
    return tmp_path / "data"


def recommend_json(capsys, data: Path, *extra: str) -> dict:
    assert main(["--data-dir", str(data), "recommend", UNSURE, "--corpus", UNSURE_CORPUS, *extra, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_printed_plan_runs_and_its_measurement_then_decides(data: Path, capsys) -> None:
    before = recommend_json(capsys, data)
    plan = before["probe_plan"]
    # the suffix candidate the plan settles: at the launched layout, its own P(win) inside the band
    d = before["decision"]
    sfx = next(c for c in before["candidates"] if c["speculative_method"] == "suffix" and c["p_win"] is not None
               and c["tensor_parallel_size"] == d["tensor_parallel_size"] == plan["tensor_parallel_size"]
               and c["data_parallel_size"] == d["data_parallel_size"])  # fmt: skip
    assert plan and 0.3 <= sfx["p_win"] <= 0.7 and f"P(win)={sfx['p_win']:.2f}" in plan["reason"]
    assert before["prediction"]["measured"] is None
    # the printed command, as a user would paste it, is accepted by `advisor probe`
    argv = shlex.split(plan["command"])[1:]
    rc = main(["--data-dir", str(data), *argv, "--requests", "6", "--server-cmd", f"{sys.executable} {FAKE}", "--json"])
    probed = json.loads(capsys.readouterr().out)
    assert rc == 0 and [r["outcome"] for r in probed["records"]] == ["ok", "ok"]
    after = recommend_json(capsys, data)
    measured = after["prediction"]["measured"]
    # the stand-in accepts one draft token per step; at the plan's per-replica concurrency (a few
    # requests) HTTP overheads blur its 1.6x, so the decision follows whichever way it measured
    assert measured["runs"] == 1 and measured["k_bar"] == pytest.approx(2.0)
    assert measured["campaigns"] == [probed["campaign_id"]]
    assert plan["concurrency"] == before["prediction"]["running_per_replica"]  # one replica, as launched
    assert after["probe_plan"] is None
    assert (after["decision"]["speculative_method"] == "suffix") == (measured["gain"] > 1.0)
    assert any("measurement outranks the prediction" in t for t in after["trace"])


def test_recommend_probe_runs_the_plan_and_recommends_again(data: Path, capsys) -> None:
    out = recommend_json(capsys, data, "--probe", "--probe-requests", "6", "--server-cmd", f"{sys.executable} {FAKE}")
    assert [r["config"] for r in out["probed"]["records"]] == ["vanilla", "suffix:32"]
    assert (data / "probes.sqlite").exists() or list(data.glob("*.sqlite"))
    assert out["prediction"]["measured"]["runs"] == 1 and out["probe_plan"] is None
    # settled now: --probe again runs nothing
    again = recommend_json(capsys, data, "--probe", "--server-cmd", "/nonexistent/vllm")
    assert "probed" not in again and again["prediction"]["measured"]["runs"] == 1


def test_plain_output_shows_the_plan(data: Path, capsys) -> None:
    assert main(["--data-dir", str(data), "recommend", UNSURE, "--corpus", UNSURE_CORPUS]) == 0
    out = capsys.readouterr().out
    assert re.search(r"Unsure: suffix K=32 against plain decoding at TP \d+, \d+ running per replica: P\(win\)=", out) and f"advisor probe {UNSURE} --corpus {UNSURE_CORPUS}" in out and "--probe" in out


def test_probe_that_cannot_boot_leaves_a_warning(data: Path, capsys) -> None:
    out = recommend_json(capsys, data, "--probe", "--probe-requests", "2", "--server-cmd", "/nonexistent/vllm serve")
    assert [r["outcome"] for r in out["probed"]["records"]] == ["boot_failed", "boot_failed"]
    assert out["prediction"]["measured"] is None and out["probe_plan"] is not None
    assert any(w.startswith("--probe did not settle it (vanilla boot_failed") for w in out["warnings"])
