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
    return build_profile(found.id, found.config, source=found.origin, card=found.card)
