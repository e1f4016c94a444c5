"""MODEL -> ModelProfile (the I/O edge of the model package)."""

from __future__ import annotations

from advisor.model.schema import ModelProfile


def load_profile(model: str, settings=None) -> ModelProfile:
    """Resolve ``model`` (path, bundled id, HF cache, hub) and compute its profile."""
    from advisor.model.profile import build_profile
    from advisor.model.source import resolve_config

    if settings is None:
        from advisor.settings import load_settings

        settings = load_settings()
    found = resolve_config(
        model,
        catalog_dirs=settings.catalog_dirs,
        hf_cache_dir=settings.hf_cache_dir,
        offline=settings.offline,
    )
    refuse_head(found.id, found.config, found.card)
    return build_profile(found.id, found.config, source=found.origin, card=found.card)


def refuse_head(model_id: str, raw: dict, card: dict | None) -> None:
    """ConfigError when ``raw`` is an EAGLE / EAGLE-3 head: vLLM serves it only as the drafter of its target, and its
    config (a speculators wrapper, or one decoder layer with a reduced draft vocabulary) is no model to profile."""
    from advisor.errors import ConfigError
    from advisor.model.drafter import head_kind

    kind = head_kind(raw, card)
    if kind is None:
        if (card or {}).get("family") == "drafter":
            raise ConfigError(f"{model_id}: its catalog card says family drafter without an EAGLE drafter block "
                              "(drafter: {kind: eagle3|eagle, target: [...], source: ...}); a draft model keeps its model "
                              "family (instruct, base, ...) and adds a drafter block")  # fmt: skip
        return
    targets = [str(t) for t in ((card or {}).get("drafter") or {}).get("target") or ()]
    verifier = (raw.get("speculators_config") or {}).get("verifier") if isinstance(raw.get("speculators_config"), dict) else None
    if not targets and isinstance(verifier, dict) and isinstance(verifier.get("name_or_path"), str):
        targets = [verifier["name_or_path"]]
    trained = f" trained for {', '.join(targets)}" if targets else ""
    inspect = f"inspect {targets[0]}" if len(targets) == 1 and not targets[0].startswith("/") else "inspect its target model"
    raise ConfigError(f"{model_id} is an {kind} draft head{trained}, not a model vLLM serves on its own: {inspect} "
                      f"instead and name {model_id} as that target's drafter (advisor.model.drafter.load_drafter)")
