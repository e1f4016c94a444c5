"""Impossible model configs are refused with exit 4 naming the field; dtype is planned as vLLM loads it."""

from __future__ import annotations

import json

import pytest

LLAMA = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 4096, "num_hidden_layers": 32,
         "vocab_size": 128256, "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336,
         "max_position_embeddings": 8192, "torch_dtype": "bfloat16"}  # fmt: skip
MIXTRAL = {"model_type": "mixtral", "architectures": ["MixtralForCausalLM"], "hidden_size": 4096, "num_hidden_layers": 32,
           "vocab_size": 32000, "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336,
           "num_local_experts": 8, "num_experts_per_tok": 2, "max_position_embeddings": 32768, "torch_dtype": "bfloat16"}  # fmt: skip


def _model(tmp_path, cfg):
    d = tmp_path / "m"
    d.mkdir(exist_ok=True)
    (d / "config.json").write_text(json.dumps(cfg))
    return str(d)


@pytest.mark.parametrize(
    "base, change, field",
    [
        (LLAMA, {"num_key_value_heads": 0}, "num_key_value_heads=0"),
        (LLAMA, {"num_key_value_heads": 64}, "num_key_value_heads=64 > num_attention_heads=32"),
        (LLAMA, {"num_key_value_heads": 5}, "not divisible by num_key_value_heads=5"),
        (LLAMA, {"max_position_embeddings": 0}, "max_position_embeddings=0"),
        (LLAMA, {"head_dim": -128}, "head_dim=-128"),
        (LLAMA, {"intermediate_size": 1.5}, "intermediate_size=1.5"),
        (LLAMA, {"torch_dtype": "int3"}, "torch_dtype='int3'"),
        (MIXTRAL, {"num_local_experts": -8}, "num_local_experts=-8"),
        (MIXTRAL, {"num_experts_per_tok": 362}, "num_experts_per_tok=362"),
        (LLAMA, {"hidden_size": 0}, "hidden_size=0"),
    ],
)
def test_impossible_config_exits_4_naming_the_field(run_cli, tmp_path, base, change, field):
    path = _model(tmp_path, {**base, **change})
    for cmd in (("inspect", path), ("recommend", path, "--gpu", "H100", "--gpus", "1")):
        code, _, err = run_cli(*cmd)
        assert code == 4, (cmd, code, err)
        assert field in err and "internal error" not in err and "Traceback" not in err


def test_null_kv_heads_means_multi_head_attention(run_cli, tmp_path):
    code, out, err = run_cli("inspect", _model(tmp_path, {**LLAMA, "num_key_value_heads": None}), "--json")
    assert code == 0, err
    assert json.loads(out)["num_kv_heads"] == 32


def test_float32_checkpoint_is_planned_at_what_vllm_auto_loads(run_cli, tmp_path):
    """vLLM's dtype=auto downcasts float32 checkpoints (vllm/config/model.py _resolve_auto_dtype)."""
    code, out, _ = run_cli("inspect", _model(tmp_path, {**LLAMA, "torch_dtype": "float32"}), "--json")
    fp32 = json.loads(out)
    code2, out2, _ = run_cli("inspect", _model(tmp_path, LLAMA), "--json")
    bf16 = json.loads(out2)
    assert code == code2 == 0
    assert fp32["weight_bytes"] == bf16["weight_bytes"] and fp32["weights_dtype"] == "bf16"
    assert any("float32" in n and "bfloat16" in n for n in fp32["notes"])


def test_absurd_layer_count_is_refused_before_it_exhausts_memory(run_cli, tmp_path):
    code, _, err = run_cli("inspect", _model(tmp_path, {**LLAMA, "num_hidden_layers": 10**10}))
    assert code == 4 and "num_hidden_layers=10000000000" in err and "MemoryError" not in err
