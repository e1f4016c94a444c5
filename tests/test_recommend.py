"""`advisor recommend`: the write-up's tree for the ten seed models, the JSON contract, rules as data."""

from __future__ import annotations

import json

import pytest

from advisor.errors import DataError
from advisor.rules.loader import load_rules

# model -> (speculative_method, K, dsa_env, host DSA queues) from the seed README's decision tree.
TREE = {
    "Qwen/Qwen2.5-7B-Instruct": ("suffix", 32, False, "disabled"),
    "Qwen/Qwen2.5-32B-Instruct": ("suffix", 32, False, "disabled"),
    "Qwen/Qwen2.5-72B-Instruct": ("suffix", 32, False, "disabled"),
    "meta-llama/Llama-3.1-8B-Instruct": ("suffix", 32, False, "disabled"),
    "meta-llama/Llama-3.1-70B-Instruct": ("suffix", 32, False, "disabled"),
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-7B": ("suffix", 32, False, "enabled"),
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-32B": ("suffix", 32, True, "enabled"),
    "deepseek-ai/DeepSeek-R1-Distill-Llama-70B": ("suffix", 32, False, "enabled"),
    # 405B-FP8: suffix kept, K lowered by the memory planner because K=32 at gmu 0.85 does not boot.
    "meta-llama/Llama-3.1-405B-Instruct-FP8": ("suffix", None, False, "disabled"),
    # The tree turns suffix off for MLA MoE; the layout search (issue 15) then takes the checkpoint's MTP layer.
    "deepseek-ai/DeepSeek-R1": ("mtp", 1, False, "either"),
}


def _rec(run_cli, *args):
    code, out, err = run_cli("recommend", *args, "--gpu", "B200", "--gpus", "8", "--json")
    assert code == 0, err
    return json.loads(out)


@pytest.mark.parametrize("model", sorted(TREE))
def test_seed_models_follow_the_writeup_tree(run_cli, model):
    method, k, dsa, queues = TREE[model]
    rec = _rec(run_cli, model, "--corpus", "mix")
    d = rec["decision"]
    assert d["speculative_method"] == method
    if k is not None:
        assert d["num_speculative_tokens"] == k
    # Every GPU used by TP x DP where vLLM accepts the TP (Qwen2.5-7B's 28 heads: TP 1, 2, 4 or 7).
    tp, dp = d["tensor_parallel_size"], d["data_parallel_size"]
    assert rec["model"]["num_attention_heads"] % tp == 0 and tp * dp in (7, 8)
    assert d["gpu_memory_utilization"] == 0.85 and d["max_model_len"] == 16384
    assert d["cudagraph_mode"] == "FULL_AND_PIECEWISE"
    assert ("VLLM_LHC_DSA" in d["env"]) == dsa
    assert rec["host_dsa_queues"] == queues
    assert rec["memory"]["boots"] is True


def test_405b_fp8_k32_boots_on_releases_and_the_seed_build_failure_is_a_warning(run_cli):
    """vLLM 0.26.0 measured no K-dependent start-up term (docs/memory.md), so K=32 boots on 8xB200;
    the seed build's failure stays visible as the large-fp8 rule's warning."""
    rec = _rec(run_cli, "meta-llama/Llama-3.1-405B-Instruct-FP8")
    d = rec["decision"]
    assert d["speculative_method"] == "suffix" and d["num_speculative_tokens"] == 32
    assert rec["memory"]["boots"]
    assert any(f["id"] == "large-fp8-suffix-boot-risk" for f in rec["rules_fired"])
    assert any("seed" in w and "did not boot" in w for w in rec["warnings"])


def test_mla_moe_is_off_by_default_and_the_prediction_may_not_flip_it_cheaply(run_cli):
    rec = _rec(run_cli, "deepseek-ai/DeepSeek-R1")
    assert rec["decision"]["speculative_method"] != "suffix"
    assert any(f["id"] == "mla-moe-speculation-off" for f in rec["rules_fired"])
    # on the seed's own host class the measured R1 loss forbids suffix outright (a measurement, not advice)
    assert any(f["id"] == "mla-moe-671b-suffix-measured-loss" for f in rec["rules_fired"])
    assert any("forbids suffix decoding" in t for t in rec["trace"])


def test_gqa_moe_is_left_to_the_predictor_with_a_warning(run_cli):
    rec = _rec(run_cli, "Qwen/Qwen3-30B-A3B")
    assert any(f["id"] == "gqa-moe-predictor-decides" for f in rec["rules_fired"])
    assert any("the prediction ranks" in t for t in rec["trace"])
    assert any("No GQA mixture-of-experts model was measured" in w for w in rec["warnings"])


def test_json_contract(run_cli):
    rec = _rec(run_cli, "meta-llama/Llama-3.1-70B")
    assert {"model", "decision", "rules_fired", "warnings", "prediction", "memory"} <= rec.keys()
    assert {"id", "arch", "params_total_b", "params_active_b"} <= rec["model"].keys()
    assert {"speculative_method", "num_speculative_tokens", "gpu_memory_utilization", "tensor_parallel_size",
            "max_model_len", "cudagraph_mode", "env"} <= rec["decision"].keys()  # fmt: skip
    assert all({"id", "rationale"} <= f.keys() for f in rec["rules_fired"])
    assert isinstance(rec["warnings"], list)
    assert {"kv_cache_tokens", "max_concurrency_at_max_len", "boots", "dominant_term"} <= rec["memory"].keys()


def test_mix_warning_and_single_corpus_distill(run_cli):
    mix = _rec(run_cli, "deepseek-ai/DeepSeek-R1-Distill-Llama-70B")
    assert any("mix" in w for w in mix["warnings"])
    single = _rec(run_cli, "deepseek-ai/DeepSeek-R1-Distill-Llama-70B", "--corpus", "swebench")
    assert any(f["id"] == "reasoning-distill-single-corpus" for f in single["rules_fired"])


def test_text_output_has_reasons(run_cli):
    code, out, _ = run_cli("recommend", "meta-llama/Llama-3.1-70B-Instruct", "--gpu", "B200", "--gpus", "8")
    assert code == 0
    assert "suffix, K=32" in out and "vllm serve" in out and "Why:" in out and "dense-suffix" in out


def test_no_gpu_detected_falls_back_to_settings_default_with_a_warning(run_cli):
    code, out, _ = run_cli("recommend", "meta-llama/Llama-3.1-8B-Instruct", "--json")
    assert code == 0
    rec = json.loads(out)
    assert rec["host"]["origin"].startswith("default") and any("no GPU detected" in w for w in rec["warnings"])


def test_too_small_host_gets_a_clear_verdict(run_cli):
    """Nothing boots: exit 8 (like render), the JSON still printed with the nearest configuration that boots."""
    code, out, err = run_cli("recommend", "meta-llama/Llama-3.1-405B-Instruct-FP8", "--gpu", "H100", "--gpus", "1", "--json")
    assert code == 8, err
    rec = json.loads(out)
    assert rec["memory"]["fits_weights"] is False and rec["memory"]["min_gpus_for_weights"] > 1
    assert any("does not fit" in w or "does not boot" in w for w in rec["warnings"])
    assert rec["nearest_bootable"].startswith("--gpus ")
    code, out, _ = run_cli("recommend", "meta-llama/Llama-3.1-405B-Instruct-FP8", "--gpu", "H100", "--gpus", "1")
    first = out.splitlines()[0]
    assert code == 8 and first.startswith("DOES NOT BOOT on 1xH100") and "nearest configuration that boots: --gpus " in first


def test_unknown_gpu_and_bad_tp_are_usage_errors(run_cli):
    code, _, err = run_cli("recommend", "meta-llama/Llama-3.1-8B", "--gpu", "TPU9", "--gpus", "1")
    assert code == 2 and "unknown GPU" in err
    code, _, err = run_cli("recommend", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--gpus", "2", "--tp", "4")
    assert code == 2 and "--tp 4" in err


def test_user_rules_dir_overrides_by_id(run_cli, tmp_path):
    (tmp_path / "mine.yaml").write_text(
        "rules:\n  - id: gqa-moe-predictor-decides\n    when: {model.arch: moe}\n    then: {speculation: required, num_speculative_tokens: 8}\n"
        "    rationale: we measured our MoE traffic\n    source: our probe 2026-11\n"
    )
    code, out, _ = run_cli("--rules-dir", str(tmp_path), "recommend", "Qwen/Qwen3-30B-A3B", "--gpu", "H200", "--gpus", "1", "--json")
    assert code == 0
    d = json.loads(out)["decision"]
    assert d["speculative_method"] == "suffix" and d["num_speculative_tokens"] == 8


@pytest.mark.parametrize(
    "body, expected",
    [
        ("rules:\n  - id: x\n    then: {speculation: maybe}\n    rationale: r\n    source: s\n", "rule x: then.speculation"),
        ("rules:\n  - id: y\n    then: {}\n    rationale: r\n    source: s\n    colour: red\n", "rule y: colour"),
        ("rules:\n  - id: z\n    when: {gpu: B200}\n    then: {}\n    rationale: r\n    source: s\n", "rule z"),
        ("rules: [\n", "cannot read"),
    ],
)
def test_bad_rule_files_fail_at_load_naming_file_and_rule(tmp_path, body, expected):
    (tmp_path / "bad.yaml").write_text(body)
    with pytest.raises(DataError) as err:
        load_rules([tmp_path])
    assert "bad.yaml" in str(err.value) and expected in str(err.value)


def test_every_bundled_rule_has_rationale_and_source():
    rules = load_rules()
    assert len({r.id for r in rules}) == len(rules) >= 10
    assert all(r.rationale.strip() and r.source.strip() for r in rules)


def test_probe_records_in_the_store_move_the_prediction(run_cli, isolated_home):
    from advisor.probe.record import ProbeRecord
    from advisor.settings import load_settings
    from advisor.probe.store import open_store

    args = ("meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H200", "--gpus", "1", "--corpus", "sharegpt")
    before = _rec(run_cli, *args)["prediction"]
    base = dict(campaign_id="c1", model="meta-llama/Llama-3.1-8B-Instruct", gpu="H200", gpus=1, corpus="sharegpt",
                concurrency=32, outcome="ok", started_at="2026-11-29T10:00:00Z")  # fmt: skip
    with open_store(load_settings()) as store:
        store.insert(ProbeRecord(**base, config="vanilla", throughput_tok_s=4000.0))
        store.insert(ProbeRecord(**base, config="suffix:32", throughput_tok_s=2000.0, tokens_per_step=1.2))
    after = _rec(run_cli, *args)["prediction"]
    assert after["gain"] < before["gain"]  # this host measured suffix at half the vanilla speed
