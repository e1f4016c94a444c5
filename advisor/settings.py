"""User settings: CLI flags > ``ADVISOR_*`` environment variables > ``advisor.toml`` > defaults.

The TOML file is the first of: ``$ADVISOR_CONFIG``; ``./advisor.toml``; ``<config dir>/advisor.toml``
where the config dir is ``$XDG_CONFIG_HOME/advisor`` (default ``~/.config/advisor``).
CLI flags are passed to :func:`load_settings` as keyword overrides (init arguments rank first).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, field_validator
from pydantic_settings import (
    BaseSettings,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)


def _xdg(var: str, fallback: str) -> Path:
    value = os.environ.get(var)
    return Path(value) if value else Path.home() / fallback


MAX_GPUS = 4096
"""The most GPUs one server is planned for (--gpus, ADVISOR_DEFAULT_GPUS, advisor.toml): 512 nodes
of 8; a larger count is a typo, and the layout search's work grows with it."""


def default_data_dir() -> Path:
    """``$XDG_DATA_HOME/advisor`` or ``~/.local/share/advisor``: the probe store lives here."""
    return _xdg("XDG_DATA_HOME", ".local/share") / "advisor"


def config_file_candidates() -> list[Path]:
    """TOML files looked at, in order; the first that exists is used."""
    explicit = os.environ.get("ADVISOR_CONFIG")
    if explicit:
        return [Path(explicit)]
    return [Path.cwd() / "advisor.toml", _xdg("XDG_CONFIG_HOME", ".config") / "advisor" / "advisor.toml"]


def _config_file() -> Path | None:
    """The settings file in use. ``$ADVISOR_CONFIG`` that names no regular file is an error, not
    silently skipped (the user asked for that file)."""
    from advisor.errors import UsageError

    explicit = os.environ.get("ADVISOR_CONFIG")
    if explicit is not None:
        path = Path(explicit)
        if not explicit:
            raise UsageError("ADVISOR_CONFIG is set but empty: name the settings file, or unset it")
        if not path.exists():
            raise UsageError(f"ADVISOR_CONFIG={json.dumps(explicit)}: no such file")
        if not path.is_file():
            raise UsageError(f"ADVISOR_CONFIG={json.dumps(explicit)}: not a regular file (a directory or device); name the TOML file")
        return path
    for path in config_file_candidates():
        if path.is_file():
            return path
    return None


class Settings(BaseSettings):
    """Every knob the advisor reads from its environment."""

    model_config = SettingsConfigDict(env_prefix="ADVISOR_", extra="forbid", validate_default=True)

    data_dir: Path = Field(default_factory=default_data_dir)
    """User data directory: the probe store (SQLite) and caches."""

    catalog_dirs: Annotated[list[Path], NoDecode] = Field(default_factory=list)
    """Extra model catalogs searched before the bundled one (``<dir>/<org>/<name>/config.json``)."""

    rules_dirs: Annotated[list[Path], NoDecode] = Field(default_factory=list)
    """Extra rule directories; a rule with the same ``id`` as a bundled one overrides it."""

    hub_offline: bool = False
    """Never contact the Hugging Face hub (also implied by ``HF_HUB_OFFLINE=1``)."""

    hf_cache_dir: Path | None = None
    """Hugging Face hub cache to search; default: huggingface_hub's (``$HF_HUB_CACHE``/``$HF_HOME``)."""

    sysfs_root: Path = Path("/sys")
    """Root of sysfs, for the host fingerprint (tests point it at a fake tree)."""

    etc_root: Path = Path("/etc")
    """Root of /etc, for accel-config persistence checks."""

    default_gpu: str = "B200"
    """GPU assumed when ``--gpu`` is not given and none is detected (the calibration host's)."""

    default_gpus: int = Field(default=8, ge=1, le=MAX_GPUS)
    """GPU count assumed when ``--gpus`` is not given and none are detected."""

    vllm_version: str | None = None
    """vLLM version the rendered flags and templates target (major.minor, e.g. ``0.33``); unset: the
    installed vLLM's, else advisor.vllm_facts.DEFAULT_VERSION. ``--vllm-version`` ranks above it."""

    @field_validator("vllm_version")
    @classmethod
    def _supported_vllm(cls, value: str | None) -> str | None:
        from advisor.vllm_facts import is_supported, versions

        if value and not is_supported(value):
            raise ValueError(f"vLLM {value} is not supported; supported: {', '.join(versions())}")
        return value or None

    @field_validator("data_dir", "hf_cache_dir", "sysfs_root", "etc_root", mode="before")
    @classmethod
    def _not_empty(cls, value: Any) -> Any:
        # Path("") is the current directory: an empty setting would silently mean "here".
        if isinstance(value, str) and not value.strip():
            raise ValueError("an empty path (it would silently mean the current directory); give a directory")
        return value

    @field_validator("catalog_dirs", "rules_dirs", mode="before")
    @classmethod
    def _split_paths(cls, value: Any) -> Any:
        # ADVISOR_RULES_DIRS=/a:/b as well as JSON lists.
        if isinstance(value, str):
            value = value.strip()
            if value.startswith("["):
                import json

                return json.loads(value)
            return [p for p in value.split(os.pathsep) if p]
        if isinstance(value, (list, tuple)) and any(isinstance(p, str) and not p.strip() for p in value):
            raise ValueError("an empty directory in the list (it would silently mean the current directory)")
        return value

    @property
    def offline(self) -> bool:
        """True when the hub must not be contacted."""
        return self.hub_offline or os.environ.get("HF_HUB_OFFLINE", "") not in ("", "0")

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        path = _config_file()
        if path is not None:
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=path))
        return tuple(sources)


def load_settings(**overrides: Any) -> Settings:
    """Build settings; ``overrides`` are CLI flags (None values are ignored)."""
    from pydantic import ValidationError

    from advisor.errors import UsageError

    clean = {k: v for k, v in overrides.items() if v is not None}
    try:
        return Settings(**clean)
    except RecursionError:
        raise UsageError(f"settings file {_config_file()}: nests arrays or tables too deeply to be advisor settings") from None
    except UnicodeDecodeError as exc:
        raise UsageError(f"settings file {_config_file()}: not UTF-8 text (offset {exc.start}); save it as UTF-8 TOML") from None
    except ValueError as exc:
        import tomllib

        if isinstance(exc, tomllib.TOMLDecodeError):
            raise UsageError(f"settings file {_config_file()}: TOML syntax error: {exc}; fix it or point ADVISOR_CONFIG "
                             "at another file") from None  # fmt: skip
        if not isinstance(exc, ValidationError):
            raise
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        raise UsageError(
            f"invalid setting {loc}: {first['msg']} (check ADVISOR_{loc.upper()} or advisor.toml)"
        ) from None
