"""Layout x speculative-method search (issue 15): absolute figures, user flags kept, rendered DP/EP."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from advisor.hardware.gpus import get_gpu
from advisor.model.load import load_profile
from advisor.domain.decision import Decision
from advisor.plan.layout import layouts, tp_reasons
from advisor.predict.absolute import ReplicaLayout, decode_step
from advisor.render.flags import serve_flags


def _spec_cfg(d, version=None):
    """The --speculative-config advisor.methods renders for ``d`` on ``version`` (None: the default line)."""
    from advisor.methods import speculative_config
    from advisor.vllm_facts import DEFAULT_VERSION, facts

    return speculative_config(d, facts(version or DEFAULT_VERSION))


ROOT = Path(__file__).resolve().parents[1]


def _rec(run_cli, model, *args):
    code, out, err = run_cli("recommend", model, "--gpu", "H200", "--gpus", "8", *args, "--json")
    assert code == 0, err
    return json.loads(out)


def _band_ok(b):
    return b["low"] <= b["value"] <= b["high"] and b["value"] > 0


def test_llama8b_on_8xh200_at_256_gets_replicas_with_absolute_figures(run_cli):
    rec = _rec(run_cli, "meta-llama/Llama-3.1-8B-Instruct", "--concurrency", "256")
    d = rec["decision"]
    assert d["data_parallel_size"] >= 2 and d["tensor_parallel_size"] * d["data_parallel_size"] == 8
    p = rec["prediction"]
    for key in ("throughput_tok_s", "tpot_ms", "ttft_ms"):
        assert _band_ok(p[key]), key
    assert rec["candidates"] and rec["candidates"][0]["chosen"]
    tp8 = [c for c in rec["candidates"] if c["tensor_parallel_size"] == 8 and c.get("prediction")]
    assert tp8 and all(c["prediction"]["throughput_tok_s"]["value"] < p["throughput_tok_s"]["value"] for c in tp8)
    assert any("layout search" in t for t in rec["trace"])


def test_405b_fp8_stays_tp8(run_cli):
    rec = _rec(run_cli, "meta-llama/Llama-3.1-405B-Instruct-FP8", "--concurrency", "256")
    assert rec["decision"]["tensor_parallel_size"] == 8 and rec["decision"]["data_parallel_size"] == 1
    assert rec["memory"]["boots"]
    assert any(not c["boots"] and c["tensor_parallel_size"] < 8 for c in rec["candidates"])


def test_deepseek_r1_boots_and_mtp_is_considered_with_a_reason(run_cli):
    rec = _rec(run_cli, "deepseek-ai/DeepSeek-R1", "--concurrency", "256")
    assert rec["memory"]["boots"]
    methods = {c["speculative_method"] for c in rec["candidates"]}
    assert {"mtp", "suffix", "ngram", None} <= methods
    d = rec["decision"]
    assert d["speculative_method"] != "suffix"  # the rules' MLA-MoE default_off and P(win)
    assert any("suffix" in t and "default_off" in t for t in rec["trace"])
    if d["speculative_method"] == "mtp":
        assert d["num_speculative_tokens"] == 1


def test_user_tp_is_never_overridden(run_cli):
    rec = _rec(run_cli, "meta-llama/Llama-3.1-8B-Instruct", "--concurrency", "256", "--tp", "2")
    assert rec["decision"]["tensor_parallel_size"] == 2 and rec["decision"]["data_parallel_size"] == 4
    assert {c["tensor_parallel_size"] for c in rec["candidates"]} == {2}


def test_latency_objective_and_tpot_limit(run_cli):
    thr = _rec(run_cli, "meta-llama/Llama-3.1-70B-Instruct", "--concurrency", "64")
    lat = _rec(run_cli, "meta-llama/Llama-3.1-70B-Instruct", "--concurrency", "64", "--objective", "latency")
    e2e = lambda r: r["prediction"]["ttft_ms"]["value"] + 512 * r["prediction"]["tpot_ms"]["value"]  # noqa: E731
    assert e2e(lat) <= e2e(thr)
    assert all(e2e(lat) <= c["prediction"]["ttft_ms"]["value"] + 512 * c["prediction"]["tpot_ms"]["value"]
               for c in lat["candidates"] if c["eligible"])
    limit = thr["prediction"]["tpot_ms"]["value"] * 0.8
    capped = _rec(run_cli, "meta-llama/Llama-3.1-70B-Instruct", "--concurrency", "64", "--max-tpot-ms", f"{limit:.2f}")
    assert capped["prediction"]["tpot_ms"]["value"] <= limit
    assert all(c["prediction"]["tpot_ms"]["value"] <= limit for c in capped["candidates"] if c["eligible"])


def test_text_output_shows_figures_runners_up_and_labels(run_cli):
    code, out, err = run_cli("recommend", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H200", "--gpus", "8", "--concurrency", "256")
    assert code == 0, err
    assert "host output throughput" in out and "TPOT" in out and "TTFT" in out
    assert "Next best:" in out and out.count(" — lost: ") == 3
    assert "ASSUMED" in out and "MEASURED" in out


def test_vllm_divisibility_refusals():
    llama = load_profile("meta-llama/Llama-3.1-8B-Instruct")
    assert tp_reasons(llama, 3, ep=False, group=3) and not tp_reasons(llama, 8, ep=False, group=8)
    lays, refused = layouts(load_profile("Qwen/Qwen2.5-7B-Instruct"), 8)
    assert {x.tp for x in lays} == {1, 2, 4} and any(r.startswith("TP 8") for r in refused)  # 4 KV heads: TP 7 neither splits nor replicates
    r1 = load_profile("deepseek-ai/DeepSeek-R1")
    assert any(x.ep for x in layouts(r1, 8)[0])


def test_plain_decode_step_against_the_h200_grid():
    """The absolute step at TP 1 is the step-cost model itself: within 3 % of real vLLM 0.26.0."""
    p, gpu = load_profile("meta-llama/Llama-3.1-8B-Instruct"), get_gpu("H200")
    rows = [json.loads(x) for x in (ROOT / "calibration/gpu_steps/h200-vllm0.26.0/grid.jsonl").read_text().splitlines()]
    plain = [r for r in rows if r["spec"] == "none" and r["model"] == "Llama-3.1-8B-Instruct"]
    assert plain
    for r in plain:
        t, notes = decode_step(p, gpu, ReplicaLayout(tp=1), r["conc"], r["prompt_len"] + (r["out_short"] + r["out_long"]) / 2)
        assert abs(t * 1e3 / r["step_ms"] - 1) < 0.03, (r["conc"], t * 1e3, r["step_ms"])
        assert notes == []


def test_dp_and_ep_flags_render():
    flags = serve_flags(Decision(tensor_parallel_size=1, data_parallel_size=8, enable_expert_parallel=True))
    assert flags[flags.index("--data-parallel-size") + 1] == "8" and "--enable-expert-parallel" in flags
    assert "--data-parallel-size" not in serve_flags(Decision())
    mtp = _spec_cfg(Decision(speculative_method="mtp", num_speculative_tokens=1))
    assert mtp == {"method": "mtp", "num_speculative_tokens": 1}


@pytest.mark.parametrize("model", ["meta-llama/Llama-3.1-8B-Instruct", "deepseek-ai/DeepSeek-R1"])
def test_render_carries_the_chosen_layout(run_cli, tmp_path, model):
    code, out, err = run_cli("render", model, "--gpu", "H200", "--gpus", "8", "--concurrency", "256", "--out", str(tmp_path), "--json")
    assert code == 0, err
    rec = json.loads(out)["recommendation"]
    launch = (tmp_path / "launch.sh").read_text()
    if rec["decision"]["data_parallel_size"] > 1:
        assert f"--data-parallel-size {rec['decision']['data_parallel_size']}" in launch
    if rec["decision"]["enable_expert_parallel"]:
        assert "--enable-expert-parallel" in launch


def test_rendered_files_ask_for_tp_times_dp_gpus(tmp_path):
    from advisor.render.containers import render_compose, render_k8s
    from advisor.render.files import render_files, summary_line
    from advisor.render.multinode import layout
    from advisor.render.target import make_target

    d = Decision(tensor_parallel_size=2, data_parallel_size=4)
    files = render_files("meta-llama/Llama-3.1-8B-Instruct", d, vllm_bin="/usr/bin/vllm")
    assert "REQUIRED_GPUS=8" in files["launch.sh"]
    target = make_target("meta-llama/Llama-3.1-8B-Instruct", d, resolve=False)
    k8s = render_k8s(target, d, image="vllm/vllm-openai:v0.32.0")
    assert '"nvidia.com/gpu": 8' in k8s["vllm-deployment.yaml"]
    assert "count: 8" in render_compose(target, d, image="vllm/vllm-openai:v0.32.0")["compose.yaml"]
    assert "TP 2 x DP 4" in summary_line(d)
    assert layout(d, 8) is None
    with pytest.raises(Exception, match="across nodes"):
        layout(Decision(tensor_parallel_size=4, data_parallel_size=4), 8)


def test_unreachable_limit_recommends_the_best_that_boots_and_says_so(run_cli):
    rec = _rec(run_cli, "meta-llama/Llama-3.1-70B-Instruct", "--concurrency", "64", "--max-ttft-ms", "1")
    assert rec["prediction"]["ttft_ms"]["value"] > 1 and rec["memory"]["boots"]
    assert any("no configuration meets the limits" in w and "TTFT" in w for w in rec["warnings"])


def test_probe_plan_follows_the_chosen_layout(run_cli):
    """The probe that settles an unsure recommendation runs one replica of the layout the search
    chose, at its per-replica concurrency, judged on the P(win) predicted there (not the rules' TP)."""
    code, out, err = run_cli("recommend", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100", "--gpus", "8",
                             "--corpus", "sharegpt", "--json")  # H100's measured profile: unsure (TP 2 x DP 4 suffix)
    assert code == 0, err
    rec = json.loads(out)
    d, pred, plan = rec["decision"], rec["prediction"], rec["probe_plan"]
    assert plan is not None
    at_layout = [c for c in rec["candidates"] if c["speculative_method"] == "suffix" and c["p_win"] is not None
                 and c["tensor_parallel_size"] == d["tensor_parallel_size"]]  # fmt: skip
    assert at_layout and any(0.30 <= c["p_win"] <= 0.70 for c in at_layout)
    assert plan["tensor_parallel_size"] == d["tensor_parallel_size"]
    assert plan["concurrency"] == pred["running_per_replica"]
    argv = plan["argv"]
    assert argv[argv.index("--tp") + 1] == str(d["tensor_parallel_size"]) and "--data-parallel-size" not in argv
    assert sum("unsure:" in t for t in rec["trace"]) == 1
