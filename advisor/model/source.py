"""Resolve MODEL (a path, a bundled id, the HF cache, or the hub) to its parsed config.json.

This is one of the few modules that touches disk and network.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from advisor.errors import ConfigError, ModelNotFoundError

HF_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?$")


@dataclass(frozen=True)
class ResolvedConfig:
    """A config.json found for MODEL."""

    id: str
    """The model as the user named it (normalised HF id for catalog hits)."""
    config: dict
    """Parsed config.json."""
    origin: str
    """Human-readable source: ``bundled catalog``, ``local path``, ``HF cache``, ``hub``."""
    path: Path | None = None
    """The config.json file, when there is one on disk."""
    card: dict = field(default_factory=dict)
    """Catalog metadata (card.yaml) for catalog hits: family, published figures, sources."""


MAX_CONFIG_BYTES = 16 * 1024 * 1024
"""A config.json larger than this is no model config (the largest real ones are a few hundred KiB)."""


def _read_text(path: Path) -> str:
    """The text of a regular file of at most MAX_CONFIG_BYTES: opened without blocking (a FIFO does not wait for a
    writer), checked with fstat before a byte is read (``/dev/zero`` or a FIFO is refused, never read to the end)."""
    import stat

    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ConfigError(f"{path} is not a regular file (a device, FIFO or socket): pass a model directory or its config.json")
        if st.st_size > MAX_CONFIG_BYTES:
            raise ConfigError(f"{path} is {st.st_size:,} bytes, more than a model config ({MAX_CONFIG_BYTES:,} at most)")
        with os.fdopen(fd, "rb") as fh:
            fd = -1
            data = fh.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}") from None
    finally:
        if fd >= 0:
            os.close(fd)
    if len(data) > MAX_CONFIG_BYTES:
        raise ConfigError(f"{path} grew past {MAX_CONFIG_BYTES:,} bytes while read: not a model config")
    return data.decode("utf-8")


def _read_json(path: Path) -> dict:
    try:
        text = _read_text(path)
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path} is not UTF-8 text (byte {exc.object[exc.start]:#04x} at offset {exc.start}); "
                          "save it as UTF-8 JSON") from None  # fmt: skip
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except RecursionError:
        raise ConfigError(f"{path} nests arrays or objects too deeply to be a model config") from None
    except ValueError as exc:  # e.g. an integer of more than 4,300 digits (Python's int-string limit)
        raise ConfigError(f"{path} is not a model config: {str(exc)[:200]}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path} must hold a JSON object, found {type(data).__name__}")
    check_shape(data, str(path))
    return data


MAPPING_FIELDS = ("text_config", "vision_config", "audio_config", "quantization_config", "rope_scaling", "compression_config",
                  "llm_config", "language_config")  # fmt: skip
"""config.json fields that transformers and vLLM read as objects (or null)."""


def check_shape(data: dict, where: str) -> None:
    """ConfigError for a config.json whose containers have another type than every reader assumes:
    ``architectures`` a list of names, the sub-configs objects (also one level down, in text_config)."""
    arch = data.get("architectures")
    if arch is not None and not (isinstance(arch, list) and all(isinstance(a, str) for a in arch)):
        raise ConfigError(f"{where}: architectures must be a list of class names, found {json.dumps(arch)[:80]}")
    for key in MAPPING_FIELDS:
        if data.get(key) is not None and not isinstance(data[key], dict):
            raise ConfigError(f"{where}: {key} must be an object (or null), found {type(data[key]).__name__}")
    if isinstance(data.get("text_config"), dict):
        check_shape(data["text_config"], f"{where} text_config")


CARD_FAMILIES = ("instruct", "reasoning", "reasoning-distill", "base", "drafter")
"""What a catalog card's ``family`` may say (advisor.model.card.CardFamily: advisor.model.schema.Family, plus
``drafter`` for an EAGLE head that is no model to serve on its own)."""


def _read_card(path: Path) -> dict:
    """A catalog ``card.yaml``: a mapping whose ``family``, when given, is one the profile knows."""
    import yaml

    from advisor.yamlfast import safe_load

    try:
        card = safe_load(path.read_text(encoding="utf-8")) or {}
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the catalog card: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: the catalog card is not UTF-8 text (offset {exc.start}); save it as UTF-8 YAML") from None
    except (yaml.YAMLError, RecursionError) as exc:
        message = " ".join(str(exc).split())[:300]
        raise ConfigError(f"{path}: the catalog card is not valid YAML: {message}") from None
    if not isinstance(card, dict):
        raise ConfigError(f"{path}: the catalog card must be a YAML mapping (family: …), found {type(card).__name__}")
    family = card.get("family")
    if family is not None and family not in CARD_FAMILIES:
        raise ConfigError(f"{path}: family {json.dumps(str(family))[:80]} is not one of {', '.join(CARD_FAMILIES)}")
    if card.get("drafter") is not None:
        from pydantic import ValidationError

        from advisor.model.card import DrafterCard

        try:
            DrafterCard.model_validate(card["drafter"])
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "drafter"
            raise ConfigError(f"{path}: drafter.{where}: {first['msg']} (expected drafter: {{kind: eagle3|eagle|draft_model, "
                              "target: [HF ids], source: ...}})") from None  # fmt: skip
    return card


MAX_MODEL_CHARS = 4096
"""A model id or path longer than this is neither (PATH_MAX on Linux; Hugging Face ids are under 100 characters)."""


def _exists(path: Path) -> bool:
    """Path.exists without its OSError (a name over NAME_MAX, ENAMETOOLONG) or ValueError (a NUL)."""
    try:
        return path.exists()
    except (OSError, ValueError):
        return False


def _looks_like_path(model: str) -> bool:
    return (
        model.startswith(("/", "./", "../", "~"))
        or model.endswith(".json")
        or os.sep in model and _exists(Path(model))
        or (not HF_ID.match(model))
    )


def local_path_problem(model: str) -> str | None:
    """Why ``model``, when it names a local path, cannot be read as a model (no such path, a device, FIFO or
    socket), by stat alone (nothing is opened); None for a Hugging Face id or a readable-looking path."""
    if not model.strip() or not _looks_like_path(model.strip()):
        return None
    try:
        path = Path(model.strip()).expanduser()
        if not _exists(path):
            return "no such file or directory"
        if not path.is_dir() and not path.is_file():
            return "not a directory or a regular file (a device, FIFO or socket)"
    except (RuntimeError, OSError, ValueError) as exc:  # ~user of no such user, a name too long, a NUL
        return f"not a usable path ({type(exc).__name__})"
    return None


def _from_path(model: str) -> ResolvedConfig:
    try:
        path = Path(model).expanduser()
    except RuntimeError:  # ~user of no such user
        raise ModelNotFoundError(f"{model!r}: no such user's home directory (pass a model directory, a config.json, or a Hugging Face id)") from None
    if not _exists(path):
        raise ModelNotFoundError(f"{model}: no such file or directory (pass a model directory, a config.json, or a Hugging Face id)")
    if not path.is_dir() and not path.is_file():
        raise ModelNotFoundError(f"{model}: not a directory or a regular file (a device, FIFO or socket); pass a model "
                                 "directory, a config.json, or a Hugging Face id")  # fmt: skip
    if path.is_dir():
        cfg = path / "config.json"
        if not cfg.is_file():
            raise ModelNotFoundError(f"{path} has no config.json (pass the model's directory or its config.json file)")
        path = cfg
    return ResolvedConfig(id=model, config=_read_json(path), origin="local path", path=path.resolve())


def catalog_roots(extra_dirs: list[Path]) -> list[Path]:
    """Catalog directories searched, user-given first, then the bundled one."""
    from advisor.paths import data_path

    return [*extra_dirs, data_path("catalog") / "models"]


def _from_catalog(model: str, roots: list[Path]) -> ResolvedConfig | None:
    if "/" not in model:
        return None
    org, name = model.split("/", 1)
    for root in roots:
        if not root.is_dir():
            continue
        candidates = [root / org / name]
        if not candidates[0].is_dir():  # case-insensitive fallback: HF ids are case-insensitive
            candidates = [
                d / n.name
                for d in root.iterdir() if d.is_dir() and d.name.lower() == org.lower()
                for n in d.iterdir() if n.is_dir() and n.name.lower() == name.lower()
            ]  # fmt: skip
        for cand in candidates:
            cfg = cand / "config.json"
            if cfg.is_file():
                card = {}
                card_path = cand / "card.yaml"
                if card_path.is_file():
                    card = _read_card(card_path)
                canonical = f"{cand.parent.name}/{cand.name}"
                return ResolvedConfig(id=canonical, config=_read_json(cfg), origin=f"bundled catalog ({root})", path=cfg, card=card)
    return None


def catalog_cards(roots: list[Path]):
    """(canonical ``ORG/NAME``, card mapping) of every catalog entry with a ``card.yaml`` under ``roots``, in root
    order (a user catalog before the bundled one); an id met twice is given once, from the first root."""
    seen: set[str] = set()
    for root in roots:
        if not root.is_dir():
            continue
        for org in sorted(p for p in root.iterdir() if p.is_dir()):
            for entry in sorted(p for p in org.iterdir() if p.is_dir()):
                card_path = entry / "card.yaml"
                key = f"{org.name}/{entry.name}"
                if key.lower() in seen or not card_path.is_file() or not (entry / "config.json").is_file():
                    continue
                seen.add(key.lower())
                yield key, _read_card(card_path)


def _from_hf_cache(model: str, cache_dir: Path | None) -> ResolvedConfig | None:
    from huggingface_hub import try_to_load_from_cache

    try:
        found = try_to_load_from_cache(model, "config.json", cache_dir=str(cache_dir) if cache_dir else None)
    except ValueError as exc:  # huggingface_hub's HFValidationError: "Cannot have -- or .. in repo_id"
        raise ModelNotFoundError(f"{model!r} is not a valid Hugging Face id ({exc}); pass org/name "
                                 "(letters, digits, '-', '_', '.', no '--' or '..') or a local path") from None
    if isinstance(found, str) and Path(found).is_file():
        return ResolvedConfig(id=model, config=_read_json(Path(found)), origin="HF cache", path=Path(found))
    return None


HUB_TIMEOUT_S = 5.0
"""Seconds the single metadata request to the hub may take before the hub counts as unreachable."""


def _hub_error(model: str, exc: Exception) -> ModelNotFoundError:
    from huggingface_hub.utils import HfHubHTTPError

    if isinstance(exc, HfHubHTTPError) and getattr(exc, "response", None) is not None:
        status = exc.response.status_code
        hint = " (gated or private: run `hf auth login`)" if status in (401, 403) else ""
        hint = hint or (" (no such model, or no config.json in it)" if status == 404 else "")
        return ModelNotFoundError(f"{model}: the hub answered {status}{hint}")
    return ModelNotFoundError(
        f"{model}: not bundled, not in the HF cache, and the hub is unreachable ({type(exc).__name__}); "
        "pass a local model directory or config.json, or go online"
    )


def _from_hub(model: str, cache_dir: Path | None) -> ResolvedConfig:
    """Download config.json. One HEAD request first, without retries: hf_hub_download alone retries
    a dead network with back-off for ~25 s (huggingface_hub/file_download.py, ``retry_on_errors=True``
    when nothing is cached), which a sub-second CLI must not do."""
    from huggingface_hub import get_hf_file_metadata, hf_hub_download, hf_hub_url

    try:
        get_hf_file_metadata(hf_hub_url(model, "config.json"), timeout=HUB_TIMEOUT_S)
        local = hf_hub_download(model, "config.json", cache_dir=str(cache_dir) if cache_dir else None)
    except Exception as exc:  # noqa: BLE001 - every hub failure becomes one clean message
        if isinstance(exc, (OSError, ValueError)) or type(exc).__module__.startswith(("huggingface_hub", "httpx", "requests")):
            raise _hub_error(model, exc) from None
        raise
    return ResolvedConfig(id=model, config=_read_json(Path(local)), origin="hub", path=Path(local))


def resolve_config(model: str, *, catalog_dirs: list[Path] = (), hf_cache_dir: Path | None = None, offline: bool = False) -> ResolvedConfig:
    """Find config.json for ``model``: local path, then catalogs, then HF cache, then (online) the hub."""
    model = model.strip()
    if not model:
        raise ModelNotFoundError("empty model name; pass a Hugging Face id or a path")
    if len(model) > MAX_MODEL_CHARS:
        raise ModelNotFoundError(f"a model id or path of {len(model):,} characters ({model[:60]!r}…): longer than any "
                                 f"path ({MAX_MODEL_CHARS}); pass a Hugging Face id or a path")  # fmt: skip
    if _looks_like_path(model):
        return _from_path(model)
    roots = catalog_roots(list(catalog_dirs))
    hit = _from_catalog(model, roots)
    if hit is None:
        hit = _from_hf_cache(model, hf_cache_dir)
    if hit is not None:
        return hit
    if offline:
        looked = ", ".join(str(r) for r in roots)
        raise ModelNotFoundError(
            f"{model}: not found offline (looked in catalogs {looked} and the HF cache); "
            "pass a local model directory or config.json, or go online (unset ADVISOR_HUB_OFFLINE/HF_HUB_OFFLINE)"
        )
    return _from_hub(model, hf_cache_dir)
