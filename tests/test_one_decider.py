"""One decider (issue 24): across the seed models, the MTP models and the hosts and concurrencies the
issue names, every "Why" line, the header and ``--json prediction`` describe the method, K, P(win)
and layout that are launched; other configurations appear only as ``candidate <label>:`` lines with
their own figures. The pure core is called in-process (real predictor, real memory planner)."""

from __future__ import annotations

import re
from functools import lru_cache

import pytest

from advisor.cli.recommend import gain_row
from advisor.domain.host import HostContext
from advisor.domain.workload import Workload
from advisor.plan.planner import planner
from advisor.plan.predictor import predictor
from advisor.plan.recommend import recommend
from advisor.rules.loader import load_rules
from advisor.rules.policy import load_policy

SEED = ["Qwen/Qwen2.5-7B-Instruct", "Qwen/Qwen2.5-32B-Instruct", "Qwen/Qwen2.5-72B-Instruct",
        "meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-70B-Instruct", "meta-llama/Llama-3.1-405B-Instruct-FP8",
        "deepseek-ai/DeepSeek-R1-Distill-Qwen-7B", "deepseek-ai/DeepSeek-R1-Distill-Qwen-32B",
        "deepseek-ai/DeepSeek-R1-Distill-Llama-70B", "deepseek-ai/DeepSeek-R1"]  # fmt: skip
MTP = ["deepseek-ai/DeepSeek-V3", "zai-org/GLM-4.5-Air"]
OTHER = ["mistralai/Mixtral-8x7B-Instruct-v0.1"]
HOSTS = [("B200", 8), ("H200", 8), ("H200", 1)]
CONCURRENCY = [1, 32, 256]

K_RE = re.compile(r"\bK=(\d+)")
P_RE = re.compile(r"P\(win\)=(\d\.\d\d)")


@lru_cache(maxsize=None)
def _profile(model: str):
    from advisor.cli.common import settings
    from advisor.model.load import load_profile

    return load_profile(model, settings())


@lru_cache(maxsize=1)
def _rules():
    from advisor.plan.recommend import fact_names

    return load_rules(facts=fact_names())


def _recommend(model: str, gpu: str, gpus: int, concurrency: int, corpus: str | None = None):
    host = HostContext(gpu=gpu, gpus=gpus, origin="test")
    return recommend(_profile(model), host, Workload(corpus=corpus, concurrency=concurrency), _rules(),
                     predictor=predictor, planner=planner)  # fmt: skip


def _chosen(rec):
    (c,) = [c for c in rec.candidates if c.chosen]
    return c


def check_consistent(rec) -> None:
    """The invariant the issue asks for, on one recommendation."""
    d = rec.decision
    c = _chosen(rec)
    method = d.speculative_method or "none"
    assert (c.speculative_method or "none") == method and c.num_speculative_tokens == d.num_speculative_tokens
    p = rec.prediction
    assert p is not None and p.method == method and p.layout == c.prediction.layout
    if method == "suffix":
        assert p.p_win == c.p_win
        assert f"P(win)={p.p_win:.2f}" in gain_row(p)
    else:
        assert p.p_win is None and "P(win)" not in gain_row(p)
    if method in ("mtp", "ngram"):
        assert p.gain == c.prediction.speculative_gain.value and gain_row(p).startswith(method)
    if method == "none":
        assert p.gain == 1.0
    by_label = {x.label: x for x in rec.candidates}
    launched_k = d.num_speculative_tokens
    launched_p = f"{p.p_win:.2f}" if p.p_win is not None else None
    lines = list(rec.trace) + [f"prediction: {t}" for t in p.explanation]
    for line in lines:
        ks, ps = K_RE.findall(line), P_RE.findall(line)
        if line.startswith("candidate "):
            named = [x for label, x in by_label.items() if label in line]
            assert named, line
            assert all(int(k) in {x.num_speculative_tokens for x in named} for k in ks), line
            assert all(pw in {f"{x.p_win:.2f}" for x in named if x.p_win is not None} for pw in ps), line
            continue
        assert all(int(k) == launched_k for k in ks), f"names K other than the launched {launched_k}: {line}"
        assert all(pw == launched_p for pw in ps), f"names P(win) other than the launched {launched_p}: {line}"
        said_on = re.search(r"suffix (is )?on\b|keeps suffix on|turns suffix on", line)
        said_off = re.search(r"suffix (is )?off\b|turns suffix off", line)
        assert not (said_on and method != "suffix"), line
        assert not (said_off and method == "suffix"), line
        for m in re.findall(r"\b(suffix|ngram|mtp) K=\d+", line):
            assert m == method, f"names {m} as launched while {method} is: {line}"
    if rec.probe_plan is not None:
        assert rec.probe_plan.tensor_parallel_size == d.tensor_parallel_size
        assert rec.probe_plan.concurrency == p.running_per_replica


GRID = [(m, g, n, c) for m in SEED + MTP + OTHER for g, n in HOSTS for c in CONCURRENCY]


@pytest.mark.parametrize("model", SEED + MTP + OTHER)
def test_every_why_line_names_what_is_launched(model):
    for _, gpu, gpus, conc in (x for x in GRID if x[0] == model):
        rec = _recommend(model, gpu, gpus, conc)
        if rec.memory is not None and not rec.memory.boots:
            # nothing boots: no candidates; a prediction only of the (not booting) suffix configuration shown
            assert not rec.candidates and (rec.prediction is None or rec.decision.speculative_method == "suffix")
            continue
        try:
            check_consistent(rec)
        except AssertionError as exc:
            raise AssertionError(f"{model} on {gpus}x{gpu} at concurrency {conc}: {exc}") from None


@pytest.mark.parametrize("model, gpu, gpus, conc, corpus", [
    ("meta-llama/Llama-3.1-8B-Instruct", "H200", 8, 256, None),
    ("Qwen/Qwen2.5-72B-Instruct", "B200", 8, 32, "humaneval"),
    ("deepseek-ai/DeepSeek-R1-Distill-Qwen-32B", "B200", 8, 32, "humaneval"),
])  # fmt: skip
def test_the_issue_examples_with_a_corpus(model, gpu, gpus, conc, corpus):
    check_consistent(_recommend(model, gpu, gpus, conc, corpus))


def test_mtp_decisions_carry_mtp_figures_not_suffix():
    """DeepSeek-R1 on 8 x H200: the decision is MTP; the header and prediction are MTP's, suffix is a candidate."""
    rec = _recommend("deepseek-ai/DeepSeek-R1", "H200", 8, 32)
    assert rec.decision.speculative_method == "mtp"
    suffix = [c for c in rec.candidates if c.speculative_method == "suffix" and c.prediction]
    assert suffix and rec.prediction.gain != suffix[0].prediction.speculative_gain.value
    assert rec.prediction.gain > 1 and rec.prediction.k_bar > 1
    assert not any("turns suffix on" in t for t in rec.trace)


def test_default_on_inside_the_band_keeps_suffix_as_the_docs_say():
    """default_on with P(win) >= 0.30 at a layout: plain decoding is not launched at that layout (docs/architecture.md);
    plain decoding launched is at a layout where no suffix candidate qualifies; a launched suffix inside the band is
    unsure. Qwen2.5-72B, 8 x B200 at 256: suffix qualifies at TP 1 x DP 8 (P(win) 0.96) only, and plain decoding at
    TP 4 x DP 2 is predicted faster than it."""
    bands = load_policy().p_win
    for model, gpu, gpus, conc in [("Qwen/Qwen2.5-72B-Instruct", "B200", 8, 256), ("meta-llama/Llama-3.1-8B-Instruct", "H100", 8, 32)]:
        rec = _recommend(model, gpu, gpus, conc, "humaneval")
        d = rec.decision
        qualifying = {(c.tensor_parallel_size, c.data_parallel_size) for c in rec.candidates
                      if c.speculative_method == "suffix" and c.p_win is not None and c.p_win >= bands.flip_off_below
                      and not c.why_not}  # fmt: skip
        assert qualifying, model
        if d.speculative_method is None:
            assert (d.tensor_parallel_size, d.data_parallel_size) not in qualifying, model
        if d.speculative_method == "suffix" and bands.unsure(rec.prediction.p_win):
            assert rec.probe_plan is not None


def test_the_thresholds_live_in_the_policy_table():
    """No second copy of the bands or K's default in the decider's code."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "advisor"
    for name in ("plan/recommend.py", "plan/layout.py", "plan/choose.py", "plan/layout_wiring.py", "plan/probe_plan.py",
                 "calibrate/evaluate_product.py"):
        text = (root / name).read_text()
        assert not re.search(r"\b0\.30\b|\b0\.70\b|FLIP_|SUFFIX_THRESHOLDS|or 32\b|k_rules: int = 32", text), name
