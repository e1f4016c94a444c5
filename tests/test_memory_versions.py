"""The memory plan follows the vLLM line the server runs (advisor.vllm_facts): 0.26 has no 160 GiB
scheduler tier and caps CUDA graphs at 512 on sm_100, 0.32 gives a B200 16,384 batched tokens and a
1,024-token cap. `--vllm-version` reaches the planner through HostContext.vllm_version."""

from __future__ import annotations

import json

from advisor.domain.decision import Decision
from advisor.hardware.gpus import get_gpu
from advisor.model.load import load_profile
from advisor.plan import memory_terms as t
from advisor.plan.memory import plan_memory
from advisor.vllm_facts import facts


def test_batch_defaults_and_graph_cap_per_version_on_b200():
    b200 = get_gpu("B200")
    assert t.batch_defaults(b200, "0.26") == (8192, 1024) and t.batch_defaults(b200, "0.32") == (16384, 1024)
    sizes26, _ = t.capture_sizes(b200, 0, 1024, 16384, version="0.26")
    sizes32, _ = t.capture_sizes(b200, 0, 1024, 16384, version="0.32")
    assert max(sizes26) == facts("0.26").graph_cap_sm100 == 512 and max(sizes32) == facts("0.32").graph_cap_sm100 == 1024


def test_plan_memory_differs_by_version_where_vllm_does():
    p = load_profile("meta-llama/Llama-3.1-8B-Instruct")
    d = Decision(tensor_parallel_size=1, gpu_memory_utilization=0.85, max_model_len=16384)
    old = plan_memory(p, get_gpu("B200"), d, num_gpus=1, vllm_version="0.26")
    new = plan_memory(p, get_gpu("B200"), d, num_gpus=1, vllm_version="0.32")
    # 0.26 profiles 8,192 tokens and captures fewer graphs: a smaller activation peak and graph pool
    assert old.terms_gib["activation_peak"] < new.terms_gib["activation_peak"]
    assert old.terms_gib["kv_cache"] > new.terms_gib["kv_cache"]
    # an H200 sits in the same tier for both lines
    h26 = plan_memory(p, get_gpu("H200"), d, num_gpus=1, vllm_version="0.26")
    h32 = plan_memory(p, get_gpu("H200"), d, num_gpus=1, vllm_version="0.32")
    assert h26.terms_gib["activation_peak"] == h32.terms_gib["activation_peak"]


def test_recommend_plans_memory_for_the_chosen_version(run_cli):
    outs = {}
    for v in ("0.26", "0.32"):
        code, out, err = run_cli("recommend", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "B200", "--gpus", "1",
                                 "--vllm-version", v, "--json")  # fmt: skip
        assert code == 0, err
        outs[v] = json.loads(out)
    assert outs["0.26"]["vllm"]["version"] == "0.26" and outs["0.32"]["vllm"]["version"] == "0.32"
    assert outs["0.26"]["host"]["vllm_version"] == "0.26"
    assert outs["0.26"]["memory"]["kv_cache_tokens"] != outs["0.32"]["memory"]["kv_cache_tokens"]


def test_each_line_plans_its_own_kv_block_size():
    """vLLM 0.34 raised CacheConfig.DEFAULT_BLOCK_SIZE to 64 (vllm/config/cache.py:185) and FLASH_ATTN, which accepts
    any multiple of 16 (flash_attn.py get_supported_kernel_block_sizes), keeps it (platforms/interface.py
    _preferred_block_size_for_backends): the plan counts whole 64-token blocks there, 16-token blocks before."""
    p = load_profile("meta-llama/Llama-3.1-8B-Instruct")
    d = Decision(tensor_parallel_size=1, gpu_memory_utilization=0.85, max_model_len=16384)
    for version, size in (("0.32", 16), ("0.33", 16), ("0.34", 64)):
        plan = plan_memory(p, get_gpu("H100"), d, num_gpus=1, vllm_version=version)
        assert facts(version).block_size == size and plan.inputs["block_size"] == size
        assert plan.kv_cache_tokens == plan.num_gpu_blocks * size
