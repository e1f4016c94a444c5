"""Boot feasibility (advisor.plan.memory): the seed write-up's boot outcomes, verdicts for hosts too
small for the weights, monotonicity, and the alternative search."""

from __future__ import annotations

from functools import cache
from itertools import pairwise

import pytest

from advisor.hardware.gpus import get_gpu
from advisor.model.load import load_profile
from advisor.plan import memory_terms as t
from advisor.domain.decision import Decision
from advisor.domain.memory import MemoryPlan
from advisor.plan.memory import nearest_bootable, plan_memory

B200 = get_gpu("B200")
LLAMA_405B_FP8 = "meta-llama/Llama-3.1-405B-Instruct-FP8"
OTHER_SEED_MODELS = (
    "Qwen/Qwen2.5-7B-Instruct",
    "Qwen/Qwen2.5-32B-Instruct",
    "Qwen/Qwen2.5-72B-Instruct",
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-7B",
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-32B",
    "meta-llama/Llama-3.1-8B-Instruct",
    "meta-llama/Llama-3.1-70B-Instruct",
    "deepseek-ai/DeepSeek-R1-Distill-Llama-70B",
    "deepseek-ai/DeepSeek-R1",
)


@cache
def profile(model_id: str):
    return load_profile(model_id)


def seed_decision(k: int | None = 32, **kw) -> Decision:
    """The write-up's server settings: gmu 0.85, TP 8, max_model_len 16384, FULL_AND_PIECEWISE."""
    base = {"gpu_memory_utilization": 0.85, "tensor_parallel_size": 8, "max_model_len": 16384, "cudagraph_mode": "FULL_AND_PIECEWISE"}
    base.update(kw)
    if k:
        return Decision(speculative_method="suffix", num_speculative_tokens=k, **base)
    return Decision(**base)


def plan(model_id: str, d: Decision, gpu=B200, num_gpus: int = 8, build: str = "release") -> MemoryPlan:
    return plan_memory(profile(model_id), gpu, d, num_gpus=num_gpus, build=build)


def seed_plan(model_id: str, d: Decision) -> MemoryPlan:
    """The seed write-up's build (vLLM 1.7.dev), whose K-dependent start-up term is FITTED."""
    return plan(model_id, d, build=t.SEED_BUILD)


# --- the seed facts ---------------------------------------------------------------------------


def test_405b_fp8_suffix_k32_does_not_boot_on_8xb200():
    p = seed_plan(LLAMA_405B_FP8, seed_decision(32))
    assert not p.boots
    assert p.num_gpu_blocks == 0 and p.kv_cache_tokens == 0
    assert p.fits_weights
    assert p.dominant_term == "spec_decode_extra"
    assert "No available memory for the cache blocks" in p.reason
    assert p.terms_gib["deficit"] > 0


def test_405b_fp8_without_speculation_boots():
    p = plan(LLAMA_405B_FP8, seed_decision(None))
    assert p.boots and p.num_gpu_blocks > 0
    assert p.dominant_term == "weights"
    assert p.kv_cache_tokens >= 16384 and p.max_concurrency_at_max_len >= 1
    assert p.alternative is None


@pytest.mark.parametrize("model_id", OTHER_SEED_MODELS)
def test_other_seed_models_boot_with_suffix_k32(model_id):
    p = plan(model_id, seed_decision(32))
    assert p.boots, p.reason
    assert p.max_concurrency_at_max_len >= 1


def test_405b_alternative_keeps_suffix_and_boots():
    p = seed_plan(LLAMA_405B_FP8, seed_decision(32))
    alt = p.alternative
    assert alt is not None
    assert alt.decision.speculative_method == "suffix"
    assert alt.decision.num_speculative_tokens < 32
    assert alt.change.startswith("num_speculative_tokens 32 -> ")
    assert alt.plan_summary.boots and alt.plan_summary.kv_cache_tokens > 0
    # the model agrees with itself: the suggested decision, planned afresh, boots
    again = plan_memory(profile(LLAMA_405B_FP8), B200, alt.decision, num_gpus=8, build=t.SEED_BUILD)
    assert again.boots and again.kv_cache_tokens == alt.plan_summary.kv_cache_tokens


def test_nearest_bootable_is_none_when_it_already_boots():
    assert nearest_bootable(profile(LLAMA_405B_FP8), B200, seed_decision(None), num_gpus=8) is None


def test_terms_add_up_to_the_budget():
    for k in (32, None):
        terms = plan(LLAMA_405B_FP8, seed_decision(k)).terms_gib
        used = sum(terms[n] for n in ("weights", "activation_peak", "spec_decode_extra", "cudagraph", "non_torch", "kv_cache"))
        assert used - terms["deficit"] == pytest.approx(terms["budget"], abs=0.05)
        assert terms["spec_decode_fitted"] <= terms["spec_decode_extra"]


def test_405b_weights_per_gpu_reflect_the_ignore_list():
    # Meta's FP8 keeps attention and the first/last MLP in bf16: ~454 GiB in all, ~56.7 GiB per GPU at TP 8.
    p = profile(LLAMA_405B_FP8)
    w = t.weights_per_gpu(p, 8)
    assert 440 * t.GiB < p.weight_bytes < 470 * t.GiB
    assert 55 * t.GiB < w.per_gpu < 59 * t.GiB


def test_mla_kv_is_not_split_by_tp_and_gqa_is():
    ds, llama = profile("deepseek-ai/DeepSeek-R1"), profile("meta-llama/Llama-3.1-70B-Instruct")
    assert t.kv_bytes_per_token_gpu(ds, 8)[0] == ds.kv_bytes_per_token
    assert t.kv_bytes_per_token_gpu(llama, 8)[0] == llama.kv_bytes_per_token // 8
    # 4 KV heads on 8 ranks: each rank keeps one whole head
    qwen7 = profile("Qwen/Qwen2.5-7B-Instruct")
    assert t.kv_bytes_per_token_gpu(qwen7, 8)[0] == qwen7.kv_bytes_per_token // 4


def test_tp_that_vllm_rejects_is_noted():
    p = plan("Qwen/Qwen2.5-7B-Instruct", seed_decision(32))
    assert any("not divisible" in n for n in p.notes)


# --- hosts too small for the weights --------------------------------------------------------------


def test_405b_fp8_on_one_h100_is_a_clear_verdict():
    p = plan(LLAMA_405B_FP8, Decision(tensor_parallel_size=1, gpu_memory_utilization=0.9), gpu=get_gpu("H100"), num_gpus=1)
    assert not p.boots and not p.fits_weights
    assert p.min_gpus_for_weights == 8
    assert "4-bit" in p.reason and "8 x H100" in p.reason
    assert p.alternative is None


def test_llama70b_bf16_on_one_l40s_suggests_quantization():
    p = plan("meta-llama/Llama-3.1-70B-Instruct", Decision(tensor_parallel_size=1), gpu=get_gpu("L40S"), num_gpus=1)
    assert not p.boots and not p.fits_weights
    assert p.min_gpus_for_weights is not None and p.min_gpus_for_weights >= 4
    assert "FP8" in p.reason
    assert p.dominant_term == "weights"


def test_small_host_with_more_gpus_offers_higher_tp():
    p = plan("meta-llama/Llama-3.1-70B-Instruct", Decision(tensor_parallel_size=1), gpu=get_gpu("L40S"), num_gpus=4)
    assert not p.boots
    assert p.alternative is not None and p.alternative.decision.tensor_parallel_size == 4


def test_tp_larger_than_host():
    p = plan("meta-llama/Llama-3.1-8B-Instruct", seed_decision(None), num_gpus=4)
    assert not p.boots and "needs 8 GPUs" in p.reason


def test_gmu_too_high_for_free_memory():
    p = plan("meta-llama/Llama-3.1-8B-Instruct", Decision(gpu_memory_utilization=0.99), gpu=get_gpu("L40S"), num_gpus=1)
    assert not p.boots and "less than desired" in p.reason


def test_one_full_length_request_must_fit():
    # Llama-70B bf16 on 4 x L40S: blocks exist, but not enough for one 128k-token request.
    p = plan("meta-llama/Llama-3.1-70B-Instruct", Decision(tensor_parallel_size=4, max_model_len=131072), gpu=get_gpu("L40S"), num_gpus=4)
    assert not p.boots and p.num_gpu_blocks > 0 and p.fits_weights
    assert "To serve at least one request" in p.reason
    assert p.alternative is not None and p.alternative.change == "max_model_len 131072 -> 65536"


# --- monotonicity ---------------------------------------------------------------------------------


@pytest.mark.parametrize("model_id", ["meta-llama/Llama-3.1-70B-Instruct", "deepseek-ai/DeepSeek-R1"])
def test_higher_k_fewer_kv_tokens_on_the_seed_build(model_id):
    tokens = [seed_plan(model_id, seed_decision(k)).kv_cache_tokens for k in (None, 4, 8, 16, 24, 32)]
    assert all(a > b for a, b in pairwise(tokens)), tokens


@pytest.mark.parametrize("model_id", ["meta-llama/Llama-3.1-70B-Instruct", "deepseek-ai/DeepSeek-R1"])
def test_speculation_costs_kv_but_k_barely_matters_on_releases(model_id):
    """vLLM 0.26.0 on an H200 (calibration/gpu_steps/h200-vllm0.26.0): 2.4 GiB less KV cache with
    suffix, and K=4 vs K=32 within 0.2 GiB; only the CUDA-graph sizes still move with K."""
    off = plan(model_id, seed_decision(None)).kv_cache_tokens
    on = [plan(model_id, seed_decision(k)).kv_cache_tokens for k in (4, 8, 16, 24, 32)]
    assert all(t_ < off for t_ in on), (off, on)
    assert max(on) / min(on) < 1.01, on


@pytest.mark.parametrize("model_id", ["meta-llama/Llama-3.1-70B-Instruct", LLAMA_405B_FP8])
def test_higher_gmu_more_kv_tokens(model_id):
    tokens = [plan(model_id, seed_decision(None, gpu_memory_utilization=g)).kv_cache_tokens for g in (0.7, 0.8, 0.85, 0.9, 0.95)]
    assert all(a < b for a, b in pairwise(tokens)), tokens


@pytest.mark.parametrize("model_id", ["meta-llama/Llama-3.1-70B-Instruct", "Qwen/Qwen2.5-32B-Instruct", "deepseek-ai/DeepSeek-R1"])
def test_higher_tp_more_kv_per_gpu(model_id):
    gpu = get_gpu("B200")
    plans = [plan(model_id, seed_decision(None, tensor_parallel_size=tp), gpu=gpu, num_gpus=8) for tp in (4, 8)]
    assert plans[0].terms_gib["kv_cache"] < plans[1].terms_gib["kv_cache"]
    assert plans[0].kv_cache_tokens < plans[1].kv_cache_tokens


def test_lower_max_num_seqs_shrinks_the_speculative_term():
    a = plan(LLAMA_405B_FP8, seed_decision(32, max_num_seqs=1024))
    b = plan(LLAMA_405B_FP8, seed_decision(32, max_num_seqs=256))
    assert b.terms_gib["spec_decode_extra"] < a.terms_gib["spec_decode_extra"]
    assert b.boots


# --- source-derived pieces ---------------------------------------------------------------------


def test_batch_defaults_follow_vllm_get_batch_defaults():
    assert t.batch_defaults(get_gpu("B200")) == (16384, 1024)
    assert t.batch_defaults(get_gpu("H100")) == (8192, 1024)
    assert t.batch_defaults(get_gpu("H200")) == (8192, 1024)
    assert t.batch_defaults(get_gpu("A100")) == (2048, 256)
    assert t.batch_defaults(get_gpu("L40S")) == (2048, 256)


def test_capture_sizes_follow_vllm_set_cudagraph_sizes():
    sizes, qlen = t.capture_sizes(B200, 0, 1024, 16384)
    assert qlen == 1 and sizes[:4] == [1, 2, 4, 8] and max(sizes) == 1024
    sizes, qlen = t.capture_sizes(B200, 32, 1024, 16384)
    # adjust_cudagraph_sizes_for_spec_decode: multiples of 1 + K only, the largest under the cap
    assert qlen == 33 and max(sizes) == 1023 and all(s % 33 == 0 for s in sizes) and {33, 66, 132, 264, 528, 792} <= set(sizes)
    # as vLLM 0.26.0 captured them on an H200 (calibration/gpu_steps/h200-vllm0.26.0/boots.jsonl)
    sizes, _ = t.capture_sizes(get_gpu("H200"), 32, 1024, 16384)
    assert sizes == list(range(33, 496, 33))
    sizes, _ = t.capture_sizes(B200, 32, 1024, 16384, mode="PIECEWISE")
    assert max(sizes) == 1024  # no FULL decode graphs: no rounding
    sizes, _ = t.capture_sizes(get_gpu("H100"), 0, 1024, 8192)
    assert max(sizes) == 512


def test_cudagraph_none_costs_nothing():
    p = plan(LLAMA_405B_FP8, seed_decision(None, cudagraph_mode="NONE"))
    assert p.terms_gib["cudagraph"] == 0 and p.inputs["cudagraph_graphs"] == 0


def test_cli_table(capsys):
    from advisor.calibrate.memory_cli import main

    assert main([LLAMA_405B_FP8, "--gpu", "B200", "--gpus", "8", "--gmu", "0.85", "--k", "32", "--k", "0", "--build", "seed"]) == 0
    out = capsys.readouterr().out
    assert "| term (GiB per GPU) | K=32 | no speculation |" in out
    assert "| boots | **no** | yes |" in out
    assert main([LLAMA_405B_FP8, "--gpu", "B200", "--gpus", "8", "--gmu", "0.85", "--k", "32", "--k", "0"]) == 0
    assert "| boots | yes | yes |" in capsys.readouterr().out


# --- calibration ------------------------------------------------------------------------------


def test_fitted_constant_lies_inside_the_seed_bracket():
    from advisor.calibrate.memory_cli import SEED_OUTCOMES
    from advisor.calibrate.memory_fit import bound, bracket

    d = seed_decision(32)
    bounds = [bound(profile(m), B200, d, booted) for m, booted in SEED_OUTCOMES]
    lo, hi = bracket(bounds)
    assert lo < t.SPEC_BYTES_PER_LAYER_HIDDEN < hi
    # a term that only grows with the vocabulary cannot reproduce the seed: DeepSeek-R1 (vocab 129k,
    # heavier weights per GPU) would fail before Llama-405B-FP8 (vocab 128k)
    vocab = [bound(profile(m), B200, d, booted, "logits_vocab") for m, booted in SEED_OUTCOMES]
    vlo, vhi = bracket(vocab)
    assert vlo > vhi


def test_calibration_cli(capsys):
    from advisor.calibrate.memory_cli import main

    assert main(["--calibration"]) == 0
    out = capsys.readouterr().out
    assert "allowed:" in out and "no c fits" in out


def test_docs_table_is_current(capsys):
    """docs/memory.md carries the CLI's table verbatim; rerun the command in the doc when this fails."""
    from pathlib import Path

    from advisor.calibrate.memory_cli import main

    main([LLAMA_405B_FP8, "--gpu", "B200", "--gpus", "8", "--gmu", "0.85", "--k", "32", "--k", "16", "--k", "0", "--build", "seed"])
    out = capsys.readouterr().out
    table = "\n".join(line for line in out.splitlines() if line.startswith("|"))
    doc = (Path(__file__).resolve().parent.parent / "docs" / "memory.md").read_text()
    assert table in doc
