"""Weights of weight-quantized (4-bit) checkpoints: what the checkpoint holds, per method (issue 43, Also).

Published sizes (Hugging Face file listings, decimal GB, as shown on each repository's "Files" page):
- hugging-quants/Meta-Llama-3.1-8B-Instruct-GPTQ-INT4: model-00001-of-00002.safetensors 4.97 GB
  + model-00002-of-00002.safetensors 764 MB = 5.734e9 bytes
  (https://huggingface.co/hugging-quants/Meta-Llama-3.1-8B-Instruct-GPTQ-INT4/tree/main).
- hugging-quants/Meta-Llama-3.1-8B-Instruct-AWQ-INT4: 4.68 GB + 1.05 GB = 5.73e9 bytes
  (https://huggingface.co/hugging-quants/Meta-Llama-3.1-8B-Instruct-AWQ-INT4/tree/main).
Before the fix the profile planned 4.80e9 bytes (4.47 GiB): every Linear, the LM head included, at 4 bits
and no scales, zeros or g_idx.
"""

from __future__ import annotations

import json


from advisor.model.profile import build_profile, parse_quant
from advisor.model.quant_weights import (awq_linear_bytes, bnb_linear_bytes, compressed_wna16_bytes,
                                         gptq_linear_bytes)
from advisor.plan.memory import requantized
from conftest import CATALOG

GPTQ_PUBLISHED = 4.97e9 + 764e6
AWQ_PUBLISHED = 4.68e9 + 1.05e9
GPTQ = {"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": False, "sym": True}
AWQ = {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True, "version": "gemm"}

H, INTER, V, KV, LAYERS = 4096, 14336, 128256, 1024, 32
LLAMA_LINEARS = [(H, H), (H, KV), (H, KV), (H, H), (H, INTER), (H, INTER), (INTER, H)]  # q k v o gate up down: (in, out)


def _llama(qc: dict | None, model: str = "meta-llama/Llama-3.1-8B-Instruct") -> dict:
    raw = json.loads((CATALOG / model / "config.json").read_text())
    raw["torch_dtype"] = "float16"
    if qc is not None:
        raw["quantization_config"] = qc
    return raw


def _bytes(qc: dict | None, model: str = "meta-llama/Llama-3.1-8B-Instruct") -> int:
    return build_profile("t", _llama(qc, model), source="test").weight_bytes


def _dense_16bit() -> int:
    """embed_tokens + lm_head + the RMSNorm weights, kept in 16 bit by GPTQ/AWQ."""
    return 2 * V * H * 2 + (2 * LAYERS + 1) * H * 2


def test_gptq_llama_8b_within_2_percent_of_the_checkpoint():
    got = _bytes(GPTQ)
    assert abs(got / GPTQ_PUBLISHED - 1) < 0.02, got
    assert got > 5.2 * 2**30  # was 4.47 GiB: LM head at 4 bits, no scales / zeros / g_idx


def test_awq_llama_8b_within_2_percent_of_the_checkpoint():
    got = _bytes(AWQ)
    assert abs(got / AWQ_PUBLISHED - 1) < 0.02, got


def test_gptq_is_the_sum_of_its_tensors():
    per_layer = sum(gptq_linear_bytes(i, o, 4, 128) for i, o in LLAMA_LINEARS)
    assert _bytes(GPTQ) == LAYERS * per_layer + _dense_16bit()


def test_gptq_holds_g_idx_awq_does_not():
    # The two layouts differ only by GPTQ's int32 g_idx [in_features] per Linear.
    g_idx = LAYERS * sum(i for i, _ in LLAMA_LINEARS) * 4
    assert _bytes(GPTQ) - _bytes(AWQ) == g_idx


def test_desc_act_keeps_g_idx_counted():
    # AutoGPTQ saves g_idx whether or not desc_act is set, and vLLM registers it either way.
    assert _bytes({**GPTQ, "desc_act": True}) == _bytes(GPTQ)
    assert gptq_linear_bytes(4096, 4096, 4, 128) - awq_linear_bytes(4096, 4096, 4, 128) == 4096 * 4


def test_per_channel_group_size_minus_one():
    # group_size -1: one scale row and one zero row per Linear (vLLM: group_size = input_size).
    i, o = 4096, 14336
    assert gptq_linear_bytes(i, o, 4, -1) == i * o // 2 + o * 2 + o // 8 * 4 + i * 4
    got = _bytes({**GPTQ, "group_size": -1})
    assert got < _bytes(GPTQ)
    assert got == LAYERS * sum(gptq_linear_bytes(i, o, 4, -1) for i, o in LLAMA_LINEARS) + _dense_16bit()


def test_lm_head_true_quantizes_the_head():
    assert _bytes({**GPTQ, "lm_head": True}) == _bytes(GPTQ) - V * H * 2 + gptq_linear_bytes(H, V, 4, 128)


def test_bad_group_size_falls_back_without_crashing():
    for g in ("x", None, float("inf"), float("nan"), True, 0):
        q = parse_quant({"quantization_config": {**GPTQ, "group_size": g}})
        assert q.group_size in (128, -1)


def test_compressed_tensors_w4a16():
    qc = {"quant_method": "compressed-tensors", "format": "pack-quantized", "ignore": ["lm_head"],
          "config_groups": {"group_0": {"targets": ["Linear"], "weights": {
              "num_bits": 4, "type": "int", "symmetric": True, "strategy": "group", "group_size": 128}}}}
    q = parse_quant({"quantization_config": qc})
    assert (q.weight_bits, q.group_size, q.symmetric, q.desc_act) == (4, 128, True, False)
    per_layer = sum(compressed_wna16_bytes(i, o, 4, 128) for i, o in LLAMA_LINEARS)
    assert _bytes(qc) == LAYERS * per_layer + _dense_16bit()
    # symmetric: no zero points; asymmetric adds int32-packed zeros [out/8, groups]
    assert compressed_wna16_bytes(4096, 4096, 4, 128, symmetric=False) - compressed_wna16_bytes(4096, 4096, 4, 128) \
        == 4096 // 8 * 32 * 4
    assert abs(_bytes(qc) / GPTQ_PUBLISHED - 1) < 0.03


def test_bitsandbytes_nf4():
    qc = {"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4",
          "bnb_4bit_use_double_quant": False}
    plain = _bytes(qc)
    # 4 bits + one fp32 absmax per 64 weights (+16-entry quant map per Linear); LM head 16-bit
    assert plain == LAYERS * sum(bnb_linear_bytes(i, o, 4) for i, o in LLAMA_LINEARS) + _dense_16bit()
    assert bnb_linear_bytes(4096, 4096, 4) == 4096 * 4096 // 2 + 4096 * 4096 // 64 * 4 + 64
    double = _bytes({**qc, "bnb_4bit_use_double_quant": True})
    assert double < plain  # absmax as uint8 (+ fp32 per 256 blocks)
    assert parse_quant({"quantization_config": {"quant_method": "bitsandbytes", "load_in_8bit": True}}).weight_bits == 8


def test_gptq_moe_counts_every_expert_matrix():
    raw = json.loads((CATALOG / "Qwen/Qwen3-30B-A3B" / "config.json").read_text())
    dense = build_profile("t", raw, source="test")
    raw["quantization_config"] = GPTQ
    p = build_profile("t", raw, source="test")
    h, e_inter, e = raw["hidden_size"], raw["moe_intermediate_size"], raw["num_experts"]
    per_expert_16 = 3 * h * e_inter * 2
    per_expert_q = 2 * gptq_linear_bytes(h, e_inter, 4, 128) + gptq_linear_bytes(e_inter, h, 4, 128)
    experts = raw["num_hidden_layers"] * e
    # the experts are where a 4-bit MoE's bytes go: each expert Linear packed, scaled and g_idx'd
    assert dense.weight_bytes - p.weight_bytes > experts * (per_expert_16 - per_expert_q)
    assert p.weight_bytes > experts * per_expert_q


def test_fp8_and_bf16_unchanged():
    # FP8 keeps its bits-per-weight arithmetic (no per-matrix rule): 1 byte per quantized weight.
    raw = json.loads((CATALOG / "RedHatAI/Meta-Llama-3.1-8B-Instruct-FP8" / "config.json").read_text())
    p = build_profile("t", raw, source="test")
    linear = LAYERS * sum(i * o for i, o in LLAMA_LINEARS)
    assert p.weight_bytes == linear + 2 * V * H * 2 + (2 * LAYERS + 1) * H * 2
    assert _bytes(None) == 2 * (linear + 2 * V * H + (2 * LAYERS + 1) * H)


def test_requantized_hint_counts_group_scales():
    bf16 = build_profile("t", _llama(None), source="test")
    four = requantized(bf16, 4)
    assert abs(four.weight_bytes / GPTQ_PUBLISHED - 1) < 0.03, four.weight_bytes
    assert requantized(bf16, 8).weight_bytes < bf16.weight_bytes
