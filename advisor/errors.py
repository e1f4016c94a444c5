"""Domain errors. The core raises these; the CLI turns them into one-line messages.

Exit codes follow sysexits(3) loosely so scripts can tell failures apart.
"""

from __future__ import annotations


class AdvisorError(Exception):
    """Base class: a failure the user can act on. ``str(err)`` is the whole message."""

    exit_code = 1


class UsageError(AdvisorError):
    """Bad command-line input (values out of range, incompatible options)."""

    exit_code = 2


class ModelNotFoundError(AdvisorError):
    """MODEL could not be resolved to a config.json."""

    exit_code = 3


class ConfigError(AdvisorError):
    """A model config.json that cannot be read or understood."""

    exit_code = 4


class DataError(AdvisorError):
    """A shipped or user data file (rules, GPU table, calibration) is invalid."""

    exit_code = 5


class DependencyError(AdvisorError):
    """An optional dependency (vLLM, Arctic Inference, a tokenizer) is missing."""

    exit_code = 6


class ProbeError(AdvisorError):
    """A probe run could not be carried out."""

    exit_code = 7


class NotBootableError(AdvisorError):
    """The configuration to render is predicted not to boot (``render --force`` renders it anyway)."""

    exit_code = 8


class SlaMissedError(AdvisorError):
    """``advisor verify``: the measured run misses an SLA limit the answer claimed to meet."""

    exit_code = 9


class OutputError(AdvisorError):
    """An output file could not be written (nothing was changed); sysexits EX_CANTCREAT."""

    exit_code = 73


_UNSAFE = None


def printable(text: object, *, keep_newlines: bool = True) -> str:
    """``text`` with what a terminal or a page would act on made visible: C0/C1 control characters
    (ESC starts terminal escape sequences) and Unicode bidi controls (U+202A-202E, U+2066-2069,
    U+200E/200F, U+061C: they reorder what is shown, "Trojan Source") become ``\\xNN``/``\\uNNNN``.
    Newlines and tabs are kept unless ``keep_newlines`` is False."""
    import re

    global _UNSAFE
    if _UNSAFE is None:
        _UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
    s = str(text)
    if not keep_newlines:
        s = s.replace("\n", "\\n").replace("\t", "\\t").replace("\r", "\\r")
    return _UNSAFE.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) <= 0xFF else f"\\u{ord(m.group()):04x}", s)
