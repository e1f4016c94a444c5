"""The prediction is for the decision actually recommended (its TP and K), and a user's explicit
flag is never changed silently (issue 13, issue 14)."""

from __future__ import annotations

import json

import pytest

LLAMA_8B = "meta-llama/Llama-3.1-8B-Instruct"
LLAMA_405B_FP8 = "meta-llama/Llama-3.1-405B-Instruct-FP8"


def _rec(run_cli, model, *args):
    code, out, err = run_cli("recommend", model, *args, "--json")
    assert code == 0, err
    return json.loads(out)


def test_prediction_uses_the_users_tp(run_cli):
    from advisor.hardware.gpus import get_gpu
    from advisor.model.load import load_profile
    from advisor.domain.workload import Workload
    from advisor.predict.api import predict
    from advisor.settings import load_settings

    tp1 = _rec(run_cli, LLAMA_8B, "--gpu", "H200", "--gpus", "8", "--tp", "1")
    tp8 = _rec(run_cli, LLAMA_8B, "--gpu", "H200", "--gpus", "8", "--tp", "8")  # without --tp the layout search picks DP
    assert tp1["decision"]["tensor_parallel_size"] == 1 and tp8["decision"]["tensor_parallel_size"] == 8
    profile = load_profile(LLAMA_8B, load_settings())
    # the layout search serves TP 1 as replicas: each replica sees its share of the concurrency
    dp = tp1["decision"].get("data_parallel_size") or 1
    direct = {tp: predict(profile, get_gpu("H200"), tp, Workload(concurrency=32 // (dp if tp == 1 else 1)), k=32).gain
              for tp in (1, 8)}  # fmt: skip
    assert direct[1] != direct[8]

    def suffix_gain(rec):  # the launched suffix's, else the suffix candidate's at the launched layout (its own figures)
        if rec["decision"]["speculative_method"] == "suffix":
            return rec["prediction"]["gain"]
        d = rec["decision"]
        c = next(c for c in rec["candidates"] if c["speculative_method"] == "suffix" and c.get("prediction")
                 and (c["tensor_parallel_size"], c["data_parallel_size"]) == (d["tensor_parallel_size"], d["data_parallel_size"]))
        return c["prediction"]["speculative_gain"]["value"]

    assert suffix_gain(tp1) == pytest.approx(direct[1], rel=1e-3)
    assert suffix_gain(tp8) == pytest.approx(direct[8], rel=1e-3)


@pytest.mark.parametrize("k", [1, 2, 4])
def test_kbar_is_bounded_by_one_plus_k(run_cli, k):
    # on the seed's host class (B200) suffix wins for this model, so the decision carries the K asked for
    rec = _rec(run_cli, LLAMA_8B, "--gpu", "B200", "--gpus", "8", "--k", str(k), "--corpus", "mix")
    default = _rec(run_cli, LLAMA_8B, "--gpu", "B200", "--gpus", "8", "--corpus", "mix")
    p = rec["prediction"]
    assert rec["decision"]["num_speculative_tokens"] == k
    assert 1.0 <= p["k_bar"] <= 1 + k
    assert p["k_bar"] < default["prediction"]["k_bar"]  # mix's prior (K=32) exceeds what K=1..4 allows... or is carried down
    assert f"to K={k}" in p["k_bar_source"] and "ASSUMED" in p["k_bar_source"]


def test_kbar_at_k_bound_and_identity():
    from advisor.predict.kbar_prior import kbar_at_k

    assert kbar_at_k(2.5, 32, 32) == 2.5
    assert kbar_at_k(2.5, 32, 16) == 2.5  # both draft at most 12 tokens at vLLM's defaults
    for k in (1, 2, 3, 6):
        assert kbar_at_k(2.5, 32, k) <= 1 + k
    assert kbar_at_k(2.5, 32, 1) < kbar_at_k(2.5, 32, 3) < 2.5
    assert kbar_at_k(1.5, 4, 32) > 1.5  # a measurement at a small K is carried up
    assert kbar_at_k(13.0, 32, 1) == pytest.approx(2.0)  # every token accepted


def _seed_build_recommend(**flags):
    """recommend() with the real predictor and the real memory planner under the seed build's start-up
    terms (memory_terms: its FITTED K term), where 405B-FP8 at K=32 does not boot on 8 x B200."""
    from functools import partial

    from advisor.model.load import load_profile
    from advisor.domain.host import HostContext
    from advisor.plan.recommend import recommend
    from advisor.plan.planner import planner
    from advisor.plan.predictor import predictor
    from advisor.domain.workload import Workload
    from advisor.rules.loader import load_rules

    host = HostContext(gpu="B200", gpus=8, origin="test")
    return recommend(load_profile(LLAMA_405B_FP8), host, Workload(corpus="mix"), load_rules(),
                     predictor=predictor, planner=partial(planner, build="seed"), build="seed", **flags)  # fmt: skip


def test_reasons_and_prediction_follow_the_planners_k():
    rec = _seed_build_recommend()
    k = rec.decision.num_speculative_tokens
    assert k is not None and k < 32
    k_lines = [t for t in rec.trace if t.startswith("K=")]
    assert k_lines and all(t.startswith(f"K={k}:") for t in k_lines)
    assert rec.prediction.method == "suffix" and rec.prediction.draft_tokens <= k  # predicted at the launched K
    assert any(t.startswith("candidate TP 8, suffix K=32: does not boot") for t in rec.trace)


def test_reasons_name_the_users_k(run_cli):
    rec = _rec(run_cli, LLAMA_8B, "--gpu", "B200", "--gpus", "8", "--k", "8")
    k_lines = [t for t in rec["trace"] if t.startswith("K=")]
    assert rec["decision"]["num_speculative_tokens"] == 8 and k_lines and all(t.startswith("K=8:") for t in k_lines)


def test_explicit_k_is_kept_when_the_planner_needs_memory():
    rec = _seed_build_recommend(num_speculative_tokens=32)
    assert rec.decision.num_speculative_tokens == 32
    assert rec.memory.boots is True  # something else (max_num_seqs) changed, with a warning
    assert any("changed max_num_seqs" in w for w in rec.warnings)


def test_explicit_gmu_is_kept_and_reported_as_not_booting(run_cli):
    code, out, err = run_cli("recommend", LLAMA_8B, "--gpu", "H100", "--gpus", "1", "--gmu", "0.05", "--json")
    assert code == 8, err  # nothing boots: exit 8, the JSON still printed
    rec = json.loads(out)
    assert rec["decision"]["gpu_memory_utilization"] == 0.05
    assert rec["memory"]["boots"] is False
    w = [w for w in rec["warnings"] if "--gmu 0.05" in w]
    assert w and "kept as given" in w[0] and "gpu_memory_utilization 0.05 -> " in w[0]


def test_explicit_k_unused_when_suffix_is_off_is_a_warning(run_cli):
    rec = _rec(run_cli, "deepseek-ai/DeepSeek-R1", "--gpu", "B200", "--gpus", "8", "--k", "8")
    # --k is suffix's K; the layout search may still pick the checkpoint's MTP at its own K
    d = rec["decision"]
    assert d["speculative_method"] != "suffix"
    assert d["speculative_method"] is None or d["num_speculative_tokens"] != 8
    assert any(w.startswith("--k 8 not used: suffix decoding is not launched") for w in rec["warnings"])


def test_explicit_max_model_len_capped_with_a_warning(run_cli):
    rec = _rec(run_cli, LLAMA_8B, "--gpu", "H200", "--gpus", "1", "--max-model-len", "1000000")
    assert rec["decision"]["max_model_len"] == rec["model"]["max_context"]
    assert any("--max-model-len 1000000" in w for w in rec["warnings"])


def test_nearest_bootable_never_changes_a_fixed_field():
    from advisor.hardware.gpus import get_gpu
    from advisor.model.load import load_profile
    from advisor.domain.decision import Decision
    from advisor.plan.memory import nearest_bootable
    from advisor.settings import load_settings

    profile = load_profile(LLAMA_8B, load_settings())
    d = Decision(gpu_memory_utilization=0.05, tensor_parallel_size=1)
    free = nearest_bootable(profile, get_gpu("H100"), d, num_gpus=1)
    assert free is not None and free.field == "gpu_memory_utilization"
    assert nearest_bootable(profile, get_gpu("H100"), d, num_gpus=1, fixed=frozenset({"gpu_memory_utilization"})) is None


def test_unfitted_concurrency_and_tp_trends_are_labelled_in_plain_text(run_cli):
    # 48 running: past the seed's 32 but inside the load suffix was measured at (above 64 it is held off:
    # advisor.plan.operating_point.suffix_load_guard), so suffix is launched and its prediction printed
    code, out, _ = run_cli("recommend", LLAMA_8B, "--gpu", "A100", "--gpus", "1", "--concurrency", "48", "--spec", "suffix")
    assert code == 0  # (--spec suffix: the catalog's EAGLE-3 head wins this query; the labels are suffix's)
    assert "prediction: concurrency 48: the seed measured gains only at 32" in out and "NOT FITTED" in out
    assert "prediction: TP 1: the seed measured only TP 8" in out
    # the seed's own shape (TP 8 at concurrency 32) is not labelled
    code, out, _ = run_cli("recommend", LLAMA_8B, "--gpu", "B200", "--gpus", "8", "--tp", "8")
    assert code == 0 and "prediction: concurrency" not in out and "prediction: TP" not in out
    assert "prediction: left to calibration" in out  # the fitted part is labelled too


def test_the_decomposition_names_the_launched_methods_own_kbar_source(run_cli):
    """An MTP (or n-gram) launch at TP > 1 prints its K̄'s source in the decomposition line, not the first note its
    figures carry (the TP step-sync note, which said "K̄ prior (corpus unknown: TP step sync 0.3 ms)")."""
    import json

    code, out, err = run_cli("recommend", "deepseek-ai/DeepSeek-V3", "--gpu", "H200", "--gpus", "8")
    assert code == 0, err
    line = next(x for x in out.splitlines() if x.strip().startswith("gain = K̄ / R x fitted"))
    assert "MTP acceptance" in line and "TP step sync" not in line, line
    code, out, err = run_cli("recommend", "deepseek-ai/DeepSeek-V3", "--gpu", "H200", "--gpus", "8", "--json")
    assert code == 0, err
    pred = json.loads(out)["prediction"]
    assert pred["method"] == "mtp" and pred["decomposition"]["sources"]["k_bar"].startswith("MTP acceptance")
    assert pred["k_bar_source"] == pred["decomposition"]["sources"]["k_bar"]
