"""ModelProfile against the model cards' published figures, and the profile's structure."""

from __future__ import annotations

import json

import pytest
import yaml

from advisor.model.load import load_profile
from conftest import CATALOG

CARDS = sorted(CATALOG.glob("*/*/card.yaml"))
IDS = [c["id"] for c in (yaml.safe_load(p.read_text()) for p in CARDS) if c["family"] != "drafter"]
"""Models with a profile: EAGLE heads (family drafter) are drafters, not models (tests/test_drafter.py)."""


def _card(model_id: str) -> dict:
    return yaml.safe_load((CATALOG / model_id / "card.yaml").read_text())


@pytest.mark.parametrize("model_id", IDS)
def test_total_params_within_3_percent_of_card(model_id):
    p = load_profile(model_id)
    published = _card(model_id)["published"]["params_total_b"]
    assert abs(p.params_total_b / published - 1) <= 0.03, (p.params_total_b, published)


@pytest.mark.parametrize("model_id", IDS)
def test_active_params_within_5_percent_of_card(model_id):
    p = load_profile(model_id)
    pub = _card(model_id)["published"]
    if pub.get("params_active_b") is None:
        # Dense: every weight but the input embedding table is used for every token.
        assert p.arch == "dense"
        # A tied table is also the LM head, used by every token (Llama-3.2-1B): then all of it is active.
        unused = 0.0 if p.tie_word_embeddings else p.params_embedding_b
        assert p.params_active_b == pytest.approx(p.params_total_b - unused, abs=0.002)
        return
    counting = pub.get("active_counting", "excl_input_embedding")
    ours = p.params_active_b
    if counting == "incl_embeddings":
        ours += p.params_embedding_b
    elif counting == "excl_embeddings_and_head" and not p.tie_word_embeddings:
        ours -= p.params_embedding_b  # the LM head is the same size as the input table
    tolerance = max(0.05 * pub["params_active_b"], pub.get("rounding_b", 0) / 2)
    assert abs(ours - pub["params_active_b"]) <= tolerance, (ours, pub)


def test_seed_models_arch_dtype_and_family():
    expect = {
        "Qwen/Qwen2.5-7B-Instruct": ("dense", "bf16", None, "instruct"),
        "deepseek-ai/DeepSeek-R1-Distill-Qwen-7B": ("dense", "bf16", None, "reasoning-distill"),
        "meta-llama/Llama-3.1-405B-Instruct-FP8": ("dense", "fp8", "fbgemm_fp8", "instruct"),
        "deepseek-ai/DeepSeek-R1": ("moe", "fp8", "fp8", "reasoning"),
        "RedHatAI/Meta-Llama-3.1-8B-Instruct-FP8": ("dense", "fp8", "compressed-tensors", "instruct"),
        "openai/gpt-oss-120b": ("moe", "mxfp4", "mxfp4", "reasoning"),
        "meta-llama/Llama-3.1-70B": ("dense", "bf16", None, "base"),
    }
    for model_id, (arch, dtype, quant, family) in expect.items():
        p = load_profile(model_id)
        assert (p.arch, p.weights_dtype, p.quant_method, p.family) == (arch, dtype, quant, family), model_id


def test_deepseek_mla_and_moe_structure():
    p = load_profile("deepseek-ai/DeepSeek-R1")
    assert p.attention == "mla"
    assert p.kv_bytes_per_token == (512 + 64) * 2 * 61  # latent + rope key, bf16, 61 layers
    assert (p.experts, p.experts_per_token, p.shared_experts) == (256, 8, 1)
    assert p.dense_layers == [0, 1, 2] and p.moe_layers == 58
    assert p.mtp_layers == 1
    assert p.quant.block_size == [128, 128]
    assert 620 < p.weight_bytes / 2**30 < 640  # FP8 weights, bf16 embeddings/head/norms


def test_gqa_kv_bytes_llama_70b():
    p = load_profile("meta-llama/Llama-3.1-70B-Instruct")
    assert p.attention == "gqa" and p.num_kv_heads == 8 and p.head_dim == 128
    assert p.kv_bytes_per_token == 2 * 8 * 128 * 2 * 80


def test_fbgemm_ignore_list_keeps_attention_in_bf16():
    p = load_profile("meta-llama/Llama-3.1-405B-Instruct-FP8")
    assert p.quant.ignored and any("self_attn" in m for m in p.quant.ignored)
    all_fp8 = p.params_total_b * 1e9  # bytes if every weight were 1 byte
    assert p.weight_bytes > all_fp8 * 1.05  # ignored modules stay 16-bit


def test_sliding_and_hybrid_layers():
    oss = load_profile("openai/gpt-oss-120b")
    assert oss.sliding_window == 128 and oss.sliding_window_layers == 18
    assert oss.kv_bytes_per_token_full == oss.kv_bytes_per_token // 2
    nxt = load_profile("Qwen/Qwen3-Next-80B-A3B-Instruct")
    assert nxt.linear_attention_layers == 36
    assert nxt.kv_bytes_per_token == 2 * 2 * 256 * 2 * 12  # only the 12 full-attention layers cache KV


def test_llama4_nested_text_config():
    p = load_profile("meta-llama/Llama-4-Scout-17B-16E-Instruct")
    assert p.multimodal and p.model_type == "llama4_text"
    assert (p.experts, p.experts_per_token, p.shared_experts) == (16, 1, 1)


def test_local_directory_and_config_path(tmp_path):
    src = CATALOG / "meta-llama" / "Llama-3.1-8B-Instruct" / "config.json"
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text(src.read_text())
    a = load_profile(str(tmp_path / "m"))
    b = load_profile(str(tmp_path / "m" / "config.json"))
    assert a.params_total_b == b.params_total_b == pytest.approx(8.03, abs=0.01)
    assert a.source == "local path"


def test_hf_cache_is_searched(tmp_path, monkeypatch):
    snap = tmp_path / "hub" / "models--acme--tiny-llama" / "snapshots" / "abc123"
    snap.mkdir(parents=True)
    (tmp_path / "hub" / "models--acme--tiny-llama" / "refs").mkdir()
    (tmp_path / "hub" / "models--acme--tiny-llama" / "refs" / "main").write_text("abc123")
    cfg = json.loads((CATALOG / "meta-llama" / "Llama-3.1-8B" / "config.json").read_text())
    (snap / "config.json").write_text(json.dumps(cfg))
    monkeypatch.setenv("ADVISOR_HF_CACHE_DIR", str(tmp_path / "hub"))
    p = load_profile("acme/tiny-llama")
    assert p.source == "HF cache" and p.params_total_b == pytest.approx(8.03, abs=0.01)


def test_user_catalog_dir_wins(tmp_path, monkeypatch):
    d = tmp_path / "cat" / "meta-llama" / "Llama-3.1-8B"
    d.mkdir(parents=True)
    cfg = json.loads((CATALOG / "meta-llama" / "Llama-3.1-8B" / "config.json").read_text())
    cfg["num_hidden_layers"] = 16
    (d / "config.json").write_text(json.dumps(cfg))
    monkeypatch.setenv("ADVISOR_CATALOG_DIRS", str(tmp_path / "cat"))
    assert load_profile("meta-llama/Llama-3.1-8B").num_layers == 16


def test_mla_dims_come_from_the_config():
    from advisor.model.load import load_profile
    from advisor.settings import load_settings

    r1 = load_profile("deepseek-ai/DeepSeek-R1", load_settings())
    assert r1.attention == "mla"
    assert r1.mla.model_dump() == {"q_lora_rank": 1536, "kv_lora_rank": 512, "qk_nope_head_dim": 128,
                                   "qk_rope_head_dim": 64, "v_head_dim": 128}  # fmt: skip
    assert r1.kv_bytes_per_token == 2 * r1.num_layers * (512 + 64)  # latent + rope key, 16 bit
    assert load_profile("meta-llama/Llama-3.1-8B-Instruct", load_settings()).mla is None
