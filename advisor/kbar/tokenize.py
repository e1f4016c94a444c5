"""Tokenizer loading for ``advisor kbar``: the target model's own, or a clearly labelled fallback.

Resolution of ``spec``:
- ``builtin`` / ``builtin:deepseek``: the DeepSeek-V3 ``tokenizer.json`` shipped inside the
  ``litellm`` wheel (found through package metadata; litellm itself is never imported). It is NOT
  the target model's tokenizer: results carry ``fallback=True`` and the label says so.
- a ``tokenizer.json`` file: loaded with ``tokenizers``;
- a directory: ``AutoTokenizer.from_pretrained(dir, local_files_only=True)``;
- anything else is a Hugging Face id: ``AutoTokenizer.from_pretrained(id)`` from the HF cache
  (``settings.hf_cache_dir`` or huggingface_hub's default) first, then the hub unless ``offline``.
A tokenizer that cannot be loaded raises ``DependencyError`` naming the fix, unless the caller
allows the fallback (then the fallback is used and ``note`` says why).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from advisor.errors import DependencyError
from advisor.kbar.formats import AutoPrompt, Prompt

BUILTIN_NAMES = ("builtin", "builtin:deepseek")
_FALLBACK_FILE = "deepseek_tokenizer.json"
# A bare tokenizer.json has no config naming its EOS: the usual end-of-turn/end-of-text tokens.
_EOS_GUESSES = ("<|im_end|>", "<|eot_id|>", "<|end_of_text|>", "<|endoftext|>", "<｜end▁of▁sentence｜>", "</s>", "<eos>")


def is_rust_panic(exc: BaseException) -> bool:
    """A Rust panic inside ``tokenizers`` (pyo3's PanicException derives from BaseException, so
    ``except Exception`` lets it through)."""
    return type(exc).__name__ == "PanicException"


def fallback_tokenizer_file() -> Path | None:
    """Path of litellm's bundled DeepSeek-V3 tokenizer.json, or None when litellm is not installed."""
    import importlib.metadata as md

    try:
        files = md.files("litellm") or []
    except md.PackageNotFoundError:
        return None
    for f in files:
        if f.name == _FALLBACK_FILE:
            path = Path(str(f.locate()))
            return path if path.is_file() else None
    return None


@dataclass
class KbarTokenizer:
    """Encodes prompts (text or chat messages) and responses to token ids, in batches."""

    name: str
    """What was loaded: an HF id, a path, or ``builtin:deepseek``."""
    label: str
    """One line for the output: what it is and where it came from."""
    fallback: bool
    """True when this is not the target model's tokenizer."""
    _hf: Any = None
    _raw: Any = None
    note: str | None = None
    eos_id: int | None = None
    """The token a response ends with when the model stops by itself (vLLM adds it to the tree too)."""
    _has_template: bool = field(default=False, repr=False)
    _last: tuple[str, bool] | None = field(default=None, repr=False)  # last prompt seen, across batches
    _last_ids: list[int] = field(default_factory=list, repr=False)

    def __post_init__(self) -> None:
        self._has_template = bool(self._hf is not None and getattr(self._hf, "chat_template", None))
        if self.eos_id is None and self._hf is not None and isinstance(getattr(self._hf, "eos_token_id", None), int):
            self.eos_id = self._hf.eos_token_id

    def _encode(self, texts: list[str], special: bool) -> list[list[int]]:
        if not texts:
            return []
        try:
            if self._raw is not None:
                return [e.ids for e in self._raw.encode_batch(texts, add_special_tokens=special)]
            return list(self._hf(texts, add_special_tokens=special)["input_ids"])
        except BaseException as exc:
            if not is_rust_panic(exc):
                raise
            raise DependencyError(f"the tokenizer {self.name} crashed (Rust panic in tokenizers) while encoding: {exc}; "
                                  "pass another --tokenizer") from None  # fmt: skip

    def render(self, prompt: Prompt) -> tuple[str, bool]:
        """(text, add_special_tokens) for a prompt: chat messages go through the chat template; an
        ``AutoPrompt`` is one user message when there is a template (``--api auto`` chose chat), else text."""
        if isinstance(prompt, AutoPrompt):
            if not self._has_template:
                return prompt.text, True
            prompt = [{"role": "user", "content": prompt.text}]
        if isinstance(prompt, str):
            return prompt, True
        if self._has_template:
            try:
                text = self._hf.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True)
                return str(text), False
            except (ValueError, TypeError, KeyError) as exc:  # templates that reject a role order
                self.note = self.note or f"chat template failed on some prompts ({exc}); plain rendering used"
        # No template (raw tokenizer.json): a plain, stable rendering of the turns.
        return "".join(f"<|{m['role']}|>\n{m['content']}\n" for m in prompt) + "<|assistant|>\n", True

    def encode_pairs(self, pairs: Sequence[tuple[Prompt, str]]) -> list[tuple[list[int], list[int]]]:
        """Token ids of each (prompt, response): prompts as vLLM receives them, responses bare.

        Successive turns of one conversation repeat the history: when a prompt's text starts with
        the previous prompt's text, only the new tail is tokenized and appended to the previous
        ids (exact up to a BPE merge across that boundary, which ends with a newline or a special
        token in every rendering here), so a conversation costs linear, not quadratic, time.
        """
        rendered = [self.render(p) for p, _ in pairs]
        jobs: list[tuple[str, bool]] = []  # (text, add_special_tokens) to encode
        plan: list[tuple[int, int | None]] = []  # per prompt: (job, base: prompt index, -1 = last batch's, None)
        prev_text, prev_special = self._last if self._last else ("", None)
        for i, (text, special) in enumerate(rendered):
            if prev_special is special and prev_text and len(text) > len(prev_text) and text.startswith(prev_text):
                jobs.append((text[len(prev_text):], False))
                plan.append((len(jobs) - 1, i - 1))
            else:
                jobs.append((text, special))
                plan.append((len(jobs) - 1, None))
            prev_text, prev_special = text, special
        encoded: list[list[int]] = [[] for _ in jobs]
        for special in (True, False):
            idxs = [j for j, (_, s) in enumerate(jobs) if s is special]
            for j, ids in zip(idxs, self._encode([jobs[j][0] for j in idxs], special)):
                encoded[j] = ids
        prompt_ids: list[list[int]] = []
        for job, base in plan:
            if base is None:
                prompt_ids.append(encoded[job])
            else:
                prompt_ids.append((prompt_ids[base] if base >= 0 else self._last_ids) + encoded[job])
        if rendered:
            self._last = rendered[-1]
            self._last_ids = prompt_ids[-1]
        responses = self._encode([r for _, r in pairs], False)
        return list(zip(prompt_ids, responses))


def _fallback(note: str | None = None) -> KbarTokenizer:
    path = fallback_tokenizer_file()
    if path is None:
        raise DependencyError(
            "no tokenizer: the built-in fallback (DeepSeek-V3 tokenizer.json inside the litellm package) "
            "is not installed; pass --tokenizer MODEL_ID|MODEL_DIR|tokenizer.json for the target model, "
            "or `pip install --no-deps litellm` for the approximate fallback"
        )
    from tokenizers import Tokenizer

    raw = Tokenizer.from_file(str(path))
    return KbarTokenizer(
        name="builtin:deepseek",
        label="builtin:deepseek (DeepSeek-V3 tokenizer.json from the litellm package) - FALLBACK, "
        "not the target model's tokenizer: K̄ is approximate",
        fallback=True,
        _raw=raw,
        note=note,
        eos_id=raw.token_to_id("<｜end▁of▁sentence｜>"),
    )


def _fix_hint(spec: str) -> str:
    return (
        f"fix: pass --tokenizer /path/to/the/model/dir (with tokenizer.json / tokenizer_config.json), "
        f"or fetch it into the Hugging Face cache where there is network (`hf download {spec} "
        f"tokenizer.json tokenizer_config.json`) and copy the cache here (HF_HOME), "
        f"or use --tokenizer builtin for an approximate, labelled estimate"
    )


def load_tokenizer(
    spec: str | None,
    *,
    offline: bool = True,
    cache_dir: Path | None = None,
    allow_fallback: bool = False,
) -> KbarTokenizer:
    """Load the tokenizer named by ``spec`` (see the module doc); ``None`` means the fallback."""
    if spec is None or spec.strip().lower() in BUILTIN_NAMES:
        return _fallback()
    from advisor.paths import user_path

    path = user_path(spec, "--tokenizer")
    if path.is_file():
        from tokenizers import Tokenizer

        try:
            raw = Tokenizer.from_file(str(path))
        except BaseException as exc:  # noqa: BLE001 - bare Exception for bad files, PanicException (BaseException) for worse
            if not (isinstance(exc, Exception) or is_rust_panic(exc)):
                raise
            raise DependencyError(f"cannot load tokenizer file {path}: {exc}") from None
        eos = next((raw.token_to_id(t) for t in _EOS_GUESSES if raw.token_to_id(t) is not None), None)
        return KbarTokenizer(name=str(path), label=f"{path} (tokenizer.json)", fallback=False, _raw=raw, eos_id=eos)
    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")  # "PyTorch was not found" noise
    from transformers import AutoTokenizer

    local = path.is_dir()
    name, cache = (str(path), None) if local else (spec, None if cache_dir is None else str(cache_dir))
    try:
        try:  # the HF cache (or the directory) first: no network when the files are here
            hf = AutoTokenizer.from_pretrained(name, local_files_only=True, cache_dir=cache)
        except OSError:
            if local or offline:
                raise
            hf = AutoTokenizer.from_pretrained(name, cache_dir=cache)
    except BaseException as exc:  # noqa: BLE001 - OSError, ValueError, hub errors, Rust panics: "not loadable here"
        if not (isinstance(exc, Exception) or is_rust_panic(exc)):
            raise
        where = f"directory {path}" if local else f"{spec!r} ({'offline: HF cache only' if offline else 'HF cache or hub'})"
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if allow_fallback and not local:
            return _fallback(note=f"tokenizer {where} unavailable ({reason}); used the fallback")
        raise DependencyError(f"tokenizer for {where} is not available: {reason}; {_fix_hint(spec)}") from None
    source = "local directory" if local else "Hugging Face cache" if offline else "Hugging Face"
    return KbarTokenizer(name=spec, label=f"{spec} (transformers AutoTokenizer, {source})", fallback=False, _hf=hf)
