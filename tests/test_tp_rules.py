"""TP sizes vLLM refuses are refused here, by vLLM's own divisibility rules (advisor.model.tp_rules)."""

from __future__ import annotations

import json

import pytest

from advisor.model.profile import build_profile
from advisor.model.tp_rules import tp_refusal
from advisor.plan.recommend import valid_tp

LLAMA = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 4096, "num_hidden_layers": 4,
         "vocab_size": 128256, "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336,
         "max_position_embeddings": 8192, "torch_dtype": "bfloat16"}  # fmt: skip


def _profile(**over):
    return build_profile("t/x-Instruct", {**LLAMA, **over}, source="test")


def test_qwen_7b_tp_7_is_refused_for_its_kv_heads(run_cli):
    code, _, err = run_cli("recommend", "Qwen/Qwen2.5-7B-Instruct", "--gpu", "H100", "--gpus", "8", "--tp", "7")
    assert code == 2 and "--tp 7" in err and "4 KV heads" in err


def test_tp_above_kv_heads_is_accepted_when_it_replicates_evenly():
    p = _profile()  # 32 heads, 8 KV heads: vLLM's QKVParallelLinear replicates each KV head tp // 8 times
    assert tp_refusal(p, 16) is None and tp_refusal(p, 32) is None
    assert "6 KV heads" in tp_refusal(_profile(num_key_value_heads=6, num_attention_heads=48), 16)  # 16 % 6 != 0


def test_mlp_width_must_divide():
    p = _profile(intermediate_size=14340)  # 14340 % 8 == 4, % 4 == 0
    assert "intermediate_size 14340" in tp_refusal(p, 8)
    assert valid_tp(p, 8) == 4


def test_expert_width_must_divide():
    moe = {"model_type": "qwen3_moe", "architectures": ["Qwen3MoeForCausalLM"], "hidden_size": 2048, "num_hidden_layers": 4,
           "vocab_size": 151936, "num_attention_heads": 32, "num_key_value_heads": 4, "intermediate_size": 6144,
           "moe_intermediate_size": 770, "num_experts": 128, "num_experts_per_tok": 8, "head_dim": 128,
           "max_position_embeddings": 32768}  # fmt: skip
    p = build_profile("t/moe", moe, source="test")
    assert p.intermediate_size == 0  # every layer is MoE: the dense width does not constrain TP
    assert "moe_intermediate_size 770" in tp_refusal(p, 4)
    assert tp_refusal(p, 2) is None and valid_tp(p, 8) == 2


def test_padded_vocab_must_divide():
    p = _profile(num_attention_heads=24, num_key_value_heads=24, hidden_size=3072, intermediate_size=8192 * 3, vocab_size=128000)
    assert "vocabulary padded to a multiple of 64 (128000)" in tp_refusal(p, 3)
    assert tp_refusal(_profile(num_attention_heads=24, num_key_value_heads=24, hidden_size=3072,
                               intermediate_size=8192 * 3, vocab_size=128001), 3) is None  # padded to 128064 = 3 x 42688


@pytest.mark.parametrize("tp, ok", [(1, True), (2, True), (4, True), (8, True), (16, True), (3, False), (5, False), (12, False)])
def test_rules_agree_with_vllm_linear_layers(tp, ok):
    """The same arithmetic vLLM's layers do (divide() asserts), on Llama-3.1-8B's widths."""
    p = _profile()
    assert (tp_refusal(p, tp) is None) == ok


def test_recommend_default_tp_is_valid_for_qwen_7b(run_cli):
    code, out, _ = run_cli("recommend", "Qwen/Qwen2.5-7B-Instruct", "--gpu", "H100", "--gpus", "8", "--json")
    rec = json.loads(out)
    assert code == 0 and rec["decision"]["tensor_parallel_size"] == 4
    assert any("tensor_parallel_size 8" in t and "not divisible" in t for t in rec["trace"])


def test_memory_planner_never_proposes_a_tp_vllm_refuses():
    from advisor.hardware.gpus import get_gpu
    from advisor.model.load import load_profile
    from advisor.domain.decision import Decision
    from advisor.plan.memory import _candidates

    qwen = load_profile("Qwen/Qwen2.5-7B-Instruct")  # 28 heads: TP 8 is refused
    tps = [c[0].tensor_parallel_size for c in _candidates(qwen, get_gpu("L40S"), Decision(tensor_parallel_size=2), 8)
           if c[1] == "tensor_parallel_size"]  # fmt: skip
    assert tps == [4]
