"""Recognise why a vLLM server failed from its log. Pure: text in, (code, line) out.

The patterns are vLLM's own messages (vLLM 0.32: vllm/v1/core/kv_cache_utils.py for the KV-cache
ones, vllm/config/model.py for max_model_len, argparse for flags) plus torch's OOM text.
The first pattern that matches any line wins, so specific causes come before generic ones.
"""

from __future__ import annotations

import re
from typing import NamedTuple


class Failure(NamedTuple):
    code: str
    """Short, stable id (``no_kv_blocks``, ``bad_arguments``, ...)."""
    line: str
    """The log line that shows it (trimmed)."""

    def __str__(self) -> str:
        return f"{self.code}: {self.line}"


PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    # KV cache: gmu too high for weights + activations, or the cache cannot hold one max-len request.
    ("no_kv_blocks", re.compile(r"No available memory for the cache blocks")),
    ("max_seq_len_too_long", re.compile(r"To serve at least one request with the model's max seq len")),
    ("cuda_oom", re.compile(r"CUDA out of memory|torch\.(?:cuda\.)?OutOfMemoryError|CUDA error: out of memory")),
    ("max_model_len_exceeds_model", re.compile(r"max_model_len \(\d+\) is greater than the derived max_model_len")),
    ("bad_arguments", re.compile(r"error: unrecognized arguments:|error: argument [^:]+: ")),
    ("model_not_found", re.compile(r"(?:Repo id must|is not a local folder and is not a valid model identifier|"
                                   r"Invalid repository ID or local directory|No such file or directory: .*config\.json)")),
    ("port_in_use", re.compile(r"\[Errno 98\]|Address already in use")),
    ("fatal_error", re.compile(r"Fatal Python error|Segmentation fault|core dumped")),
)
# Exception lines that only say "something failed above": used when nothing better is found.
_GENERIC = re.compile(r"Engine core initialization failed|KeyboardInterrupt|SystemExit|See root cause above")

_EXCEPTION_LINE = re.compile(r"^(?:[\w.]+\.)?\w*(?:Error|Exception|Interrupt)\b(?::|$)")
_LOG_PREFIX = re.compile(r"^\((?:APIServer|EngineCore\w*)[^)]*\)\s*")


def _clean(line: str, limit: int = 300) -> str:
    line = _LOG_PREFIX.sub("", line.strip())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def classify(log_text: str) -> Failure | None:
    """The recognised cause in ``log_text``; else the first specific exception line (the root cause
    comes first when the engine process dies and the API server reports it) as ``crash``; else None."""
    lines = log_text.splitlines()
    for code, pattern in PATTERNS:
        for line in lines:
            if pattern.search(line):
                return Failure(code, _clean(line))
    exceptions = [_clean(line) for line in lines if _EXCEPTION_LINE.match(_clean(line))]
    specific = [line for line in exceptions if not _GENERIC.search(line)]
    if specific or exceptions:
        return Failure("crash", (specific or exceptions)[0])
    return None


def read_tail(path, max_bytes: int = 512 * 1024) -> str:
    """The last ``max_bytes`` of a log file as text ('' if it does not exist)."""
    from pathlib import Path

    p = Path(path)
    if not p.exists():
        return ""
    with p.open("rb") as fh:
        size = fh.seek(0, 2)
        fh.seek(max(0, size - max_bytes))
        text = fh.read()
    older = Path(str(p) + ".1")  # rotated (advisor.probe.guard.RotatingLog): the tail may begin there
    if size < max_bytes and older.is_file():
        with older.open("rb") as fh:
            fh.seek(max(0, fh.seek(0, 2) - (max_bytes - size)))
            text = fh.read() + text
    return text.decode("utf-8", errors="replace")
