"""Quoting for the three places values land: bash, systemd unit lines, EnvironmentFile values.

Every function either returns an inert representation or raises UsageError; nothing a model
id, path or env value contains can become a command, a variable expansion or a specifier.
"""

from __future__ import annotations

import json
import re
import shlex

from advisor.errors import UsageError

_CTRL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def shq(value: object) -> str:
    """POSIX shell single-quoting (shlex.quote)."""
    return shlex.quote(str(value))


def comment(value: object) -> str:
    """Text safe inside a ``#`` comment line in any of the files: JSON-escaped, one line."""
    return json.dumps(str(value), ensure_ascii=True)


def envq(value: object) -> str:
    """An EnvironmentFile value: double-quoted; ``\\ " $ ` `` escaped.

    systemd's env-file parser (src/basic/env-file.c, double-quote state) and POSIX sh both keep
    the character after a backslash literally for exactly these characters, so the same file is
    read identically by ``EnvironmentFile=`` and by ``. vllm.env`` in launch.sh.
    """
    text = str(value)
    if "\n" in text or "\r" in text or "\x00" in text:
        raise UsageError(f"environment value {comment(text)} contains a newline or NUL; env values must be one line")
    return '"' + re.sub(r'([\\"$`])', r"\\\1", text) + '"'


def sdq(value: object) -> str:
    """One ``ExecStart=`` argument: double-quoted with C escapes; ``%`` and ``$`` doubled
    (systemd.service(5) 'Command lines': specifiers and ``$VAR`` are expanded otherwise)."""
    text = str(value)
    if "\x00" in text:
        raise UsageError("argument contains a NUL byte")
    out = []
    for ch in text:
        if ch == "\\":
            out.append("\\\\")
        elif ch == '"':
            out.append('\\"')
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "%":
            out.append("%%")
        elif ch == "$":
            out.append("$$")
        elif _CTRL.match(ch):
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def sdpath(value: object) -> str:
    """An absolute path as a unit-file value (specifiers escaped)."""
    text = str(value)
    if not text.startswith("/"):
        raise UsageError(f"{comment(text)} must be an absolute path for the systemd unit")
    if _CTRL.search(text) or "\n" in text:
        raise UsageError(f"path {comment(text)} contains control characters")
    return text.replace("%", "%%").replace("\\", "\\\\")


def sdtext(value: object) -> str:
    """Free text for ``Description=``: one line, specifiers escaped, no trailing backslash."""
    text = _CTRL.sub(" ", str(value).replace("\n", " ").replace("\t", " "))
    return text.replace("\\", "\\\\").replace("%", "%%")
