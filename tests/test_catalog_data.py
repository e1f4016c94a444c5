"""Structural checks for the bundled model catalog (catalog/models/ORG/NAME/)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

MODELS_DIR = Path(__file__).resolve().parent.parent / "catalog" / "models"
FAMILIES = {"instruct", "reasoning", "reasoning-distill", "base", "drafter"}


def _model_dirs() -> list[Path]:
    return sorted(p for p in MODELS_DIR.glob("*/*") if p.is_dir())


MODEL_DIRS = _model_dirs()


def test_at_least_twenty_models() -> None:
    assert len(MODEL_DIRS) >= 20, [str(p) for p in MODEL_DIRS]


@pytest.mark.parametrize("model_dir", MODEL_DIRS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_config_json_parses_and_has_model_type(model_dir: Path) -> None:
    cfg_path = model_dir / "config.json"
    assert cfg_path.is_file(), f"missing {cfg_path}"
    cfg = json.loads(cfg_path.read_text(encoding="utf-8"))
    assert isinstance(cfg, dict)
    model_type = cfg.get("model_type")
    if not model_type and isinstance(cfg.get("transformer_layer_config"), dict):  # a speculators-format drafter head
        model_type = cfg["transformer_layer_config"].get("model_type")
    if not model_type:
        text_config = cfg.get("text_config") or {}
        model_type = text_config.get("model_type") if isinstance(text_config, dict) else None
    assert isinstance(model_type, str) and model_type, f"{cfg_path}: no model_type"


@pytest.mark.parametrize("model_dir", MODEL_DIRS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_card_yaml(model_dir: Path) -> None:
    card_path = model_dir / "card.yaml"
    assert card_path.is_file(), f"missing {card_path}"
    card = yaml.safe_load(card_path.read_text(encoding="utf-8"))
    assert isinstance(card, dict)

    expected_id = f"{model_dir.parent.name}/{model_dir.name}"
    assert card.get("id") == expected_id

    source_url = card.get("config_source")
    assert isinstance(source_url, str) and source_url.startswith("https://")

    assert card.get("family") in FAMILIES

    from advisor.model.card import CatalogCard

    CatalogCard.model_validate(card)  # the schema, extra keys refused
    if card["family"] == "drafter":  # EAGLE heads: published figures optional, the drafter block required
        assert card["drafter"]["kind"] in ("eagle3", "eagle") and card["drafter"]["target"]
        if card.get("published") is None:
            return

    published = card.get("published")
    assert isinstance(published, dict)
    total = published.get("params_total_b")
    assert isinstance(total, (int, float)) and not isinstance(total, bool) and total > 0
    active = published.get("params_active_b")
    if active is not None:
        assert isinstance(active, (int, float)) and not isinstance(active, bool)
        assert 0 < active <= total
    source = published.get("source")
    assert isinstance(source, str) and source.strip()
