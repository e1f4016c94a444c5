"""Drafters as catalog models (issue 41 item 2): EAGLE-3 heads, EAGLE heads, draft models."""

from __future__ import annotations

import json

import pytest
import yaml

from advisor.errors import AdvisorError, ConfigError
from advisor.model.drafter import Drafter, build_drafter, check_pair, drafters_for, load_drafter
from advisor.model.load import load_profile
from conftest import CATALOG

DRAFTER_CARDS = sorted(p for p in CATALOG.glob("*/*/card.yaml") if yaml.safe_load(p.read_text()).get("drafter"))
DRAFTER_IDS = [yaml.safe_load(p.read_text())["id"] for p in DRAFTER_CARDS]

LLAMA8B = "meta-llama/Llama-3.1-8B-Instruct"
HEAD_NATIVE = "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"
HEAD_SPECULATORS = "nm-testing/EAGLE3-LLaMA3.1-Instruct-8B-converted"
DRAFT_1B = "meta-llama/Llama-3.2-1B-Instruct"


def test_catalog_has_the_drafters():
    assert {HEAD_NATIVE, HEAD_SPECULATORS, DRAFT_1B} <= set(DRAFTER_IDS)


@pytest.mark.parametrize("drafter_id", DRAFTER_IDS)
def test_each_catalog_drafter_loads_and_matches_its_config(drafter_id):
    card = yaml.safe_load((CATALOG / drafter_id / "card.yaml").read_text())
    raw = json.loads((CATALOG / drafter_id / "config.json").read_text())
    d = load_drafter(drafter_id)
    assert isinstance(d, Drafter) and d.id == drafter_id
    assert d.kind == card["drafter"]["kind"]
    assert d.targets == tuple(card["drafter"]["target"])
    for target in d.targets:  # every paired target is in the catalog and the pair runs
        assert check_pair(d, load_profile(target)) is None, target
    if d.kind == "draft_model":
        p = load_profile(drafter_id)
        assert d.profile.model_dump(exclude={"source"}) == p.model_dump(exclude={"source"})
        assert d.weight_bytes == p.weight_bytes and d.kv_bytes_per_token == p.kv_bytes_per_token
        assert (d.fc_params, d.aux_hidden_layers, d.target_vocab_size) == (0, 0, None)
        return
    layer = raw.get("transformer_layer_config") or raw
    assert d.profile.num_layers == layer["num_hidden_layers"]
    assert d.profile.hidden_size == layer["hidden_size"]
    assert d.profile.num_attention_heads == layer["num_attention_heads"]
    assert d.profile.num_kv_heads == layer["num_key_value_heads"]
    assert d.profile.intermediate_size == layer["intermediate_size"]
    assert d.draft_vocab_size == raw["draft_vocab_size"] == d.profile.vocab_size
    assert d.target_vocab_size == layer["vocab_size"]
    head_dim = layer.get("head_dim") or layer["hidden_size"] // layer["num_attention_heads"]
    assert d.kv_bytes_per_token == layer["num_hidden_layers"] * layer["num_key_value_heads"] * head_dim * 2 * 2
    assert d.profile.params_embedding_b == 0.0  # the head reads the target's embedding


def test_llama8b_eagle3_head_numbers():
    """A 1-layer Llama-3.1-8B EAGLE-3 head, counted tensor by tensor as vLLM's llama_eagle3.py builds it and as a
    real EAGLE-3 checkpoint stores it (fc [h, 3h]; layer-0 q_proj [heads*hd, 2h], k/v_proj [kv*hd, 2h]; o_proj;
    gate/up/down; input_layernorm, hidden_norm, post_attention_layernorm; norm; lm_head [draft_vocab, h]; d2t int64)."""
    h, inter, q, kv, vocab, dv = 4096, 14336, 32 * 128, 8 * 128, 128256, 32000
    fc = 3 * h * h
    layer = 2 * h * q + 2 * (2 * h * kv) + q * h + 3 * h * inter + 3 * h
    expected = fc + layer + h + dv * h
    for ref in (HEAD_NATIVE, HEAD_SPECULATORS):
        d = load_drafter(ref)
        assert d.kind == "eagle3" and d.aux_hidden_layers == 3 and d.target_hidden_size == h
        assert d.fc_params == fc == 50_331_648
        assert round(d.profile.params_total_b * 1e9) == pytest.approx(expected, abs=5e4)  # 424.67 M
        assert d.weight_bytes == expected * 2 + 8 * dv  # bf16/fp16 weights (float32 checkpoint loads at 2 bytes) + d2t
        assert d.kv_bytes_per_token == 1 * 8 * 128 * 2 * 2 == 4096
        assert (d.draft_vocab_size, d.target_vocab_size) == (dv, vocab)
    # Cross-check with the hub: a speculators conversion of this head that keeps its own copy of the 128256 x 4096
    # embedding, nm-testing/Llama-3.1-8B-Instruct-speculator.eagle3-converted, is listed at "1.0B" params
    # (https://huggingface.co/models?other=eagle3: safetensors count, rounded to one decimal; it includes the
    # embedding and the d2t/t2d maps, which this drafter does not count as weights).
    with_embedding = expected + vocab * h + dv + vocab
    assert round(with_embedding / 1e9, 1) == 1.0


def test_one_b_draft_model_numbers():
    d = load_drafter(DRAFT_1B)
    assert d.kind == "draft_model" and d.draft_vocab_size == 128256
    assert d.profile.num_layers == 16 and d.profile.tie_word_embeddings
    assert d.kv_bytes_per_token == 16 * 8 * 64 * 2 * 2
    assert d.profile.params_total_b == pytest.approx(1.236, abs=0.002)


def _write(tmp_path, name, cfg):
    folder = tmp_path / name
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(cfg))
    return str(folder)


LAYER = {"model_type": "llama", "hidden_size": 256, "intermediate_size": 512, "num_attention_heads": 4,
         "num_key_value_heads": 2, "num_hidden_layers": 1, "vocab_size": 1000}  # fmt: skip


def test_format_detection_on_tmp_dirs(tmp_path):
    spec = _write(tmp_path, "spec", {"architectures": ["Eagle3Speculator"], "speculators_model_type": "eagle3",
                                     "draft_vocab_size": 100, "transformer_layer_config": LAYER,
                                     "speculators_config": {"verifier": {"name_or_path": "org/target"}}})  # fmt: skip
    native = _write(tmp_path, "native", {**LAYER, "architectures": ["LlamaForCausalLMEagle3"], "draft_vocab_size": 100})
    flat = _write(tmp_path, "flat", {**LAYER, "architectures": ["LlamaForCausalLM"], "draft_vocab_size": 100})
    eagle1 = _write(tmp_path, "eagle1", {**LAYER, "architectures": ["EagleLlamaForCausalLM"]})
    wrapped = _write(tmp_path, "wrapped", {"model_type": "eagle", "model": {**LAYER, "architectures": ["LlamaForCausalLM"]}})
    plain = _write(tmp_path, "plain", {**LAYER, "architectures": ["LlamaForCausalLM"], "num_hidden_layers": 4})
    got = {name: load_drafter(path) for name, path in
           [("spec", spec), ("native", native), ("flat", flat), ("eagle1", eagle1), ("wrapped", wrapped), ("plain", plain)]}  # fmt: skip
    assert {n: d.kind for n, d in got.items()} == {"spec": "eagle3", "native": "eagle3", "flat": "eagle3",
                                                   "eagle1": "eagle", "wrapped": "eagle", "plain": "draft_model"}  # fmt: skip
    assert got["spec"].targets == ("org/target",) and got["native"].targets == ()
    assert got["spec"].fc_params == 3 * 256 * 256 and got["eagle1"].fc_params == 2 * 256 * 256
    assert got["spec"].draft_vocab_size == 100 and got["spec"].target_vocab_size == 1000
    assert got["plain"].profile.num_layers == 4 and got["plain"].fc_params == 0
    # target_hidden_size in the config widens the fc (a head narrower than its target)
    wide = load_drafter(_write(tmp_path, "wide", {**LAYER, "architectures": ["LlamaForCausalLMEagle3"],
                                                  "draft_vocab_size": 100, "target_hidden_size": 512}))  # fmt: skip
    assert wide.target_hidden_size == 512 and wide.fc_params == 3 * 512 * 256
    # kind forces the reading of an ambiguous one-layer config
    assert load_drafter(plain, kind="eagle").kind == "eagle"


@pytest.mark.parametrize(("cfg", "match"), [
    ({"speculators_model_type": "mlp", "transformer_layer_config": LAYER}, "speculators_model_type='mlp'"),
    ({"speculators_model_type": "eagle3"}, "transformer_layer_config"),
    ({**LAYER, "architectures": ["BertModel"]}, "neither an EAGLE"),
    ({"architectures": ["LlamaForCausalLM"], "hidden_size": 8}, "model_type"),
])  # fmt: skip
def test_bogus_dirs_raise_domain_errors(tmp_path, cfg, match):
    with pytest.raises(ConfigError, match=match):
        load_drafter(_write(tmp_path, "bogus", cfg))


def test_missing_dir_is_a_domain_error(tmp_path):
    with pytest.raises(AdvisorError, match="no such file"):
        load_drafter(str(tmp_path / "nothing"))


def test_drafters_for_pairs_by_exact_id():
    assert drafters_for(LLAMA8B) == [HEAD_SPECULATORS, HEAD_NATIVE, DRAFT_1B]  # EAGLE-3 heads first
    assert drafters_for(LLAMA8B.upper()) == drafters_for(LLAMA8B)  # case-insensitive
    assert drafters_for("meta-llama/Llama-3.1-8B") == []  # the base model is not the -Instruct target
    assert drafters_for("meta-llama/Llama-3.3-70B-Instruct") == [DRAFT_1B]
    assert drafters_for("Qwen/Qwen3-8B") == []


def test_check_pair():
    head, draft = load_drafter(HEAD_NATIVE), load_drafter(DRAFT_1B)
    llama8, llama70, qwen = (load_profile(m) for m in (LLAMA8B, "meta-llama/Llama-3.3-70B-Instruct", "Qwen/Qwen3-8B"))
    assert check_pair(head, llama8) is None and check_pair(draft, llama70) is None
    refused = check_pair(head, llama70)
    assert refused.kind == "refusal" and "4096" in refused.text and "8192" in refused.text  # hidden size mismatch
    assert check_pair(draft, qwen).kind == "refusal" and "verify_equal_vocab_size_if_draft_model" in check_pair(draft, qwen).text
    # trained for another target of the same shape: a warning, not a refusal
    base8 = load_profile("meta-llama/Llama-3.1-8B")
    warned = check_pair(head, base8)
    assert warned.kind == "warning" and LLAMA8B in warned.text


def test_heads_are_refused_as_models_with_a_clear_message():
    with pytest.raises(ConfigError, match=r"eagle3 draft head trained for meta-llama/Llama-3\.1-8B-Instruct.*inspect meta-llama"):
        load_profile(HEAD_SPECULATORS)
    with pytest.raises(ConfigError, match="eagle3 draft head"):
        load_profile(HEAD_NATIVE)


def test_build_drafter_is_pure_and_forced_draft_model_refuses_heads_card():
    raw = {**LAYER, "architectures": ["LlamaForCausalLM"]}
    d = build_drafter("x/y", raw, source="test")
    assert d.kind == "draft_model" and d.targets == ()
    with pytest.raises(ConfigError, match="card says kind eagle3"):
        build_drafter("x/y", raw, source="test", card={"drafter": {"kind": "eagle3", "target": ["a/b"], "source": "s"}})


def test_card_drafter_block_is_validated(tmp_path, monkeypatch):
    cat = tmp_path / "cat" / "org" / "bad"
    cat.mkdir(parents=True)
    (cat / "config.json").write_text(json.dumps({**LAYER, "architectures": ["LlamaForCausalLM"]}))
    (cat / "card.yaml").write_text("family: instruct\ndrafter: {kind: medusa, target: [a/b], source: s}\n")
    monkeypatch.setenv("ADVISOR_CATALOG_DIRS", str(tmp_path / "cat"))
    with pytest.raises(ConfigError, match="drafter.kind"):
        load_drafter("org/bad")
