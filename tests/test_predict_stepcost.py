"""Step-cost physics: R moves the way the roofline and vLLM's code paths say."""

from __future__ import annotations

import pytest

from advisor.hardware.gpus import get_gpu
from advisor.model.load import load_profile
from advisor.predict import mechanisms as mech
from advisor.predict.stepcost import StepShape, experts_touched, r_ratio, step_cost, weight_bytes_read


@pytest.fixture(scope="module")
def llama70():
    return load_profile("meta-llama/Llama-3.1-70B-Instruct")


@pytest.fixture(scope="module")
def r1():
    return load_profile("deepseek-ai/DeepSeek-R1")


def test_experts_touched_formula():
    assert experts_touched(256, 8, 1) == pytest.approx(8)
    assert experts_touched(256, 8, 32) == pytest.approx(256 * (1 - (1 - 8 / 256) ** 32))
    assert experts_touched(256, 8, 10_000) == pytest.approx(256, rel=1e-6)
    assert experts_touched(0, 0, 100) == 0


def test_more_concurrency_raises_r(llama70):
    gpu = get_gpu("B200")
    rs = [r_ratio(llama70, gpu, 8, concurrency=c, draft_tokens=8, context=2000, k=32).r for c in (4, 32, 128)]
    assert rs[0] < rs[1] < rs[2]


def test_more_drafted_tokens_raise_r(llama70):
    gpu = get_gpu("B200")
    rs = [r_ratio(llama70, gpu, 8, concurrency=32, draft_tokens=d, context=2000, k=32).r for d in (1, 4, 12)]
    assert rs[0] < rs[1] < rs[2]


def test_moe_with_more_experts_touched_reads_more_weights(r1):
    assert weight_bytes_read(r1, 1056, 8) > weight_bytes_read(r1, 32, 8) > weight_bytes_read(r1, 1, 8)
    gpu = get_gpu("H200")  # no MLA prefill fallback on Hopper: isolate the expert-read effect
    r = r_ratio(r1, gpu, 8, concurrency=32, draft_tokens=4, context=1000, k=32)
    assert r.spec.weight_bytes > r.plain.weight_bytes  # verification touches more experts
    # R grows with the experts the verification adds: sparse routing (few experts read at one token
    # per sequence) leaves more to add; top-16 routing already reads most of them in a plain step.
    sparse = r1.model_copy(update={"experts_per_token": 2})
    wide = r1.model_copy(update={"experts_per_token": 16})
    r_sparse, r_wide = (r_ratio(x, gpu, 8, concurrency=32, draft_tokens=4, context=1000, k=32) for x in (sparse, wide))
    added = lambda x: x.spec.weight_bytes - x.plain.weight_bytes  # noqa: E731
    assert added(r_sparse) > added(r) > added(r_wide)
    assert r_sparse.r > r.r > r_wide.r


def test_faster_memory_changes_r_as_the_roofline_says(llama70):
    b200, h200 = get_gpu("B200"), get_gpu("H200")
    shape = StepShape(seqs=32, tokens_per_seq=1, context=2000)
    t_b, t_h = step_cost(llama70, b200, 8, shape), step_cost(llama70, h200, 8, shape)
    assert t_h.t_memory / t_b.t_memory == pytest.approx(b200.bandwidth_tbs / h200.bandwidth_tbs, rel=1e-6)
    # the plain step is memory-bound: faster memory shrinks it, so fixed verification costs weigh more
    # and a compute-heavier verification step becomes relatively dearer on the faster-memory GPU.
    slow = h200.model_copy(update={"bandwidth_tbs": 2.0})
    r_fast = r_ratio(llama70, h200, 8, concurrency=32, draft_tokens=12, context=2000, k=32).r
    r_slow = r_ratio(llama70, slow, 8, concurrency=32, draft_tokens=12, context=2000, k=32).r
    assert r_fast > r_slow


def test_mla_prefill_fallback_depends_on_the_backend(r1):
    assert mech.mla_backend("B200")[1] == "uniform"
    assert mech.mla_backend("H200")[1] == "varlen"
    b200 = r_ratio(r1, get_gpu("B200"), 8, concurrency=32, draft_tokens=3, context=3000, k=32)
    h200 = r_ratio(r1, get_gpu("H200"), 8, concurrency=32, draft_tokens=3, context=3000, k=32)
    assert b200.spec.t_mla_prefill > 0 and h200.spec.t_mla_prefill == 0
    longer = r_ratio(r1, get_gpu("B200"), 8, concurrency=32, draft_tokens=3, context=6000, k=32)
    assert longer.spec.t_mla_prefill > b200.spec.t_mla_prefill


def test_large_verification_batches_lose_cuda_graphs(llama70):
    assert mech.spec_step_graph_mode(200, "uniform_batch", k=32) == "piecewise"
    assert mech.spec_step_graph_mode(600, "uniform_batch", k=32) == "none"
    # 32 x 21 = 672 tokens: above the 495-token cap of H200 (512 cap) and of the seed build, under
    # B200's 990 (vLLM 0.32's 1024 cap on sm_100, advisor.vllm_facts)
    big = r_ratio(llama70, get_gpu("H200"), 8, concurrency=32, draft_tokens=20, context=2000, k=32)
    assert big.spec.graph_mode == "none" and big.plain.graph_mode == "full"
    b200 = r_ratio(llama70, get_gpu("B200"), 8, concurrency=32, draft_tokens=20, context=2000, k=32)
    seed = r_ratio(llama70, get_gpu("B200"), 8, concurrency=32, draft_tokens=20, context=2000, k=32, build="seed")
    assert b200.spec.graph_mode == "piecewise" and seed.spec.graph_mode == "none"
    assert mech.spec_step_graph_mode(672, "uniform_batch", k=32, sm100=True) == "piecewise"


def test_mla_prefill_path_uses_the_profiles_head_dims():
    from advisor.predict.stepcost import mla_prefill_path

    r1 = load_profile("deepseek-ai/DeepSeek-R1")
    wide = r1.model_copy(update={"mla": r1.mla.model_copy(update={"qk_nope_head_dim": 256, "v_head_dim": 256})})
    base_bytes, base_flops = mla_prefill_path(r1, 16, 4096, 4, 8)
    wide_bytes, wide_flops = mla_prefill_path(wide, 16, 4096, 4, 8)
    assert wide_flops > 1.5 * base_flops and wide_bytes > 1.5 * base_bytes
