"""The fast path (raw JSON + transformers' defaults written in advisor/model/arch.py) must agree
with transformers' AutoConfig on every bundled config, for every field the profile reads."""

from __future__ import annotations

import json
import os

import pytest

from advisor.model.arch import KNOWN, _autoconfig_dict, text_config
from advisor.model.layout import build_arch, normalise
from conftest import CATALOG

CONFIGS = sorted(p for p in CATALOG.glob("*/*/config.json") if "family: drafter" not in (p.parent / "card.yaml").read_text())
"""Model configs; EAGLE heads (family drafter) are read by advisor.model.drafter, not the profile's fast path."""


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: f"{p.parent.parent.name}/{p.parent.name}")
def test_fast_path_matches_autoconfig(path):
    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
    raw = json.loads(path.read_text())
    cfg, _ = text_config(raw)
    model_type = cfg.get("model_type") or raw["model_type"]
    assert model_type in KNOWN, f"{model_type} should be on the fast path"
    from transformers import CONFIG_MAPPING

    full = _autoconfig_dict(model_type, cfg)
    if full is None:
        # Known type but the strict config class rejects the real hub file (Llama-4's
        # attn_temperature_tuning=4 under transformers 5): nothing to compare against.
        assert model_type not in CONFIG_MAPPING or model_type == "llama4_text", model_type
        pytest.skip(f"transformers' {model_type} config class rejects this real config")
    fast = normalise(raw)
    slow = build_arch(model_type, full, raw, [])
    for field in ("hidden", "layers", "vocab", "heads", "kv_heads", "head_dim", "intermediate", "experts",
                  "top_k", "shared_experts", "expert_inter", "shared_inter", "moe_layer_ids", "kv_lora_rank",
                  "qk_rope_head_dim", "layer_kinds", "window", "mtp_layers", "max_context", "tie_embeddings"):  # fmt: skip
        assert getattr(fast, field) == getattr(slow, field), field
