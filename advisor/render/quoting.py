"""Quoting for the places values land (bash, systemd unit lines, EnvironmentFile values, YAML via
json) and the checks that refuse values no destination can hold.

Every function either returns an inert representation or raises UsageError; nothing a model
id, path or env value contains can become a command, a variable expansion, a specifier, an
option of another program or a new unit directive.
"""

from __future__ import annotations

import ipaddress
import json
import re
import shlex

from advisor.errors import UsageError

_CTRL = re.compile(r"[\x00-\x1f\x7f]")
_CTRL_NO_TAB_NL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_HOSTNAME = re.compile(r"^(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$")
_UNIT_NAME = re.compile(r"^[A-Za-z0-9:_.\\-]{1,200}\.service$")


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


def sdexe(value: object) -> str:
    """The executable (first word) of an ``Exec*=`` line: double-quoted, ``%`` doubled; ``$`` is
    kept (systemd expands variables only in the arguments). systemd refuses an executable name
    with quotes, backslashes or control characters (``string_is_safe``), so those are refused here."""
    text = str(value)
    if _CTRL.search(text) or any(c in text for c in "\"'\\"):
        raise UsageError(f"executable {comment(text)} contains a quote, backslash or control character: systemd refuses such a program path")
    if text.startswith(SYSTEMD_EXEC_PREFIXES):
        raise UsageError(
            f"executable {comment(text)} starts with {comment(text[0])}, which systemd reads as an Exec prefix "
            "('-' ignore failure, '@' argv[0], ':' no $ expansion, '+' / '!' / '!!' run with full privileges, "
            "outside the hardening): give a program path that starts with a letter, '.', '_' or '/'"
        )
    return '"' + text.replace("%", "%%") + '"'


SYSTEMD_EXEC_PREFIXES = ("-", "@", ":", "+", "!", "|")
"""Characters systemd.service(5) 'Command lines' reads as special prefixes of an executable path
('|' runs it via the shell in systemd >= 258); they act even inside the double quotes sdexe adds."""


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
        elif _CTRL_NO_TAB_NL.match(ch):
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def check_abs_path(value: object, what: str) -> str:
    """An absolute path that a unit-file value can hold verbatim: no control characters, no
    backslash (unit values keep it literally, and a trailing one continues the line), no
    leading/trailing whitespace (the unit parser strips it)."""
    text = str(value)
    if not text.startswith("/"):
        raise UsageError(f"{what} {comment(text)} must be an absolute path")
    if _CTRL.search(text) or "\\" in text or text != text.strip():
        raise UsageError(f"{what} {comment(text)} contains a control character, a backslash or edge whitespace")
    if any(part in ("", ".", "..") for part in text[1:].split("/")):
        raise UsageError(f"{what} {comment(text)} is not a normalised file path (empty, '.' or '..' component, or trailing '/')")
    _check_length(text, what)
    return text


def _check_length(text: str, what: str) -> None:
    """Linux limits: NAME_MAX 255 bytes per component, PATH_MAX 4096 bytes (systemd checks both)."""
    if len(text.encode()) >= 4096 or any(len(part.encode()) > 255 for part in text.split("/")):
        raise UsageError(f"{what} {comment(text[:60])}… is too long for a file path (255 bytes a name, 4095 a path)")


def sdpath(value: object) -> str:
    """An absolute path as a unit-file value (``%`` specifiers escaped)."""
    return check_abs_path(value, "path").replace("%", "%%")


def sdtext(value: object) -> str:
    """Free text for ``Description=``: one line, specifiers escaped, no trailing backslash (it
    would continue the line) or whitespace. Backslashes elsewhere are kept (not unescaped there)."""
    text = _CTRL.sub(" ", str(value))
    return re.sub(r"[\s\\]+$", "", text.replace("%", "%%")).strip()


def check_program(value: object, what: str = "--vllm-bin") -> str:
    """A value that can be a program name or path: not empty, no leading ``-`` (it would become
    an option of whatever runs it), no control characters (a newline ends a unit line or a
    script command), and no edge whitespace."""
    text = str(value)
    if not text:
        raise UsageError(f"{what} is empty: give the vLLM executable (a name on PATH or an absolute path)")
    if text.startswith("-"):
        raise UsageError(f"{what} {comment(text)} starts with '-': it would be read as an option, not a program")
    if text.startswith(SYSTEMD_EXEC_PREFIXES):
        raise UsageError(f"{what} {comment(text)} starts with {comment(text[0])}: systemd reads it as an Exec prefix "
                         "('+' / '!' / '!!' run as root outside the hardening, '@' drops an argument, ':' turns off $ expansion); "
                         "give a program name or path that starts with a letter, '.', '_' or '/'")  # fmt: skip
    if _CTRL.search(text) or text != text.strip():
        raise UsageError(f"{what} {comment(text)} contains a control character or edge whitespace: not a program path")
    if text.endswith("/"):
        raise UsageError(f"{what} {comment(text)} ends with '/': a directory, not a program")
    _check_length(text, what)
    return text


def check_arg(value: object, what: str) -> str:
    """A value passed as a separate argv word to vLLM's parser (model id, served name): not empty,
    not option-like (argparse would read a leading ``-`` as a flag), no NUL."""
    text = str(value)
    if not text or not text.strip():
        raise UsageError(f"{what} is empty")
    if text.startswith("-"):
        raise UsageError(f"{what} {comment(text)} starts with '-': vLLM's parser would read it as an option")
    if "\x00" in text:
        raise UsageError(f"{what} contains a NUL byte")
    return text


def check_host(value: object) -> str:
    """``--host``: an IP address or an RFC 1123 host name."""
    text = str(value)
    try:
        ipaddress.ip_address(text)
        if "%" not in text:  # no IPv6 scope ids: '%' is a systemd specifier and rarely meant
            return text
    except ValueError:
        pass
    if not _HOSTNAME.match(text):
        raise UsageError(f"--host {comment(text)} is neither an IP address nor a host name")
    return text


def check_port(value: object) -> int:
    """``--port``: an integer 1-65535."""
    try:
        port = int(str(value), 10)
    except ValueError:
        raise UsageError(f"--port {comment(value)} is not a number") from None
    if not 1 <= port <= 65535 or str(value) != str(port):
        raise UsageError(f"--port {comment(value)} must be an integer from 1 to 65535")
    return port


def check_unit_name(value: object) -> str:
    """A systemd service unit name (systemd.unit(5) 'valid unit names')."""
    text = str(value)
    if not _UNIT_NAME.match(text) or text.startswith("-"):
        raise UsageError(f"unit name {comment(text)} is not a valid systemd service name (NAME.service)")
    return text


def yamlq(value: object) -> str:
    """A YAML double-quoted scalar in pure ASCII: ``\\`` and ``"`` escaped, every other character
    outside printable ASCII as ``\\xNN``/``\\uNNNN``/``\\UNNNNNNNN`` (YAML 1.1 and 1.2 both read
    these), so no value can end the scalar, start a comment, or be folded by a line break
    (YAML also breaks lines at U+0085, U+2028, U+2029)."""
    out = []
    for ch in str(value):
        code = ord(ch)
        if ch in '\\"':
            out.append("\\" + ch)
        elif 0x20 <= code < 0x7F:
            out.append(ch)
        elif code <= 0xFF:
            out.append(f"\\x{code:02x}")
        elif code <= 0xFFFF:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    return '"' + "".join(out) + '"'


def dollars(value: object) -> str:
    """``$`` doubled: Kubernetes (``$(VAR)`` in command/args) and Compose (``$VAR``/``${VAR}``
    everywhere) read ``$$`` as a literal ``$``."""
    return str(value).replace("$", "$$")


# The image reference grammar Docker, containerd and Kubernetes parse (github.com/distribution/reference,
# regexp.go): [domain[:port]/]path[:tag][@digest], path components lowercase, a name of at most 255 characters.
_ALNUM = r"[a-z0-9]+"
_SEPARATOR = r"(?:[._]|__|[-]+)"
_PATH_COMPONENT = rf"{_ALNUM}(?:{_SEPARATOR}{_ALNUM})*"
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_HOST = rf"(?:{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*|\[[a-fA-F0-9:]+\])"
_NAME = rf"(?:{_HOST}(?::[0-9]+)?/)?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*"
_TAG = r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
_IMAGE = re.compile(rf"(?P<name>{_NAME})(?::(?P<tag>{_TAG}))?(?:@(?P<digest>{_DIGEST}))?")
NAME_MAX = 255
"""distribution/reference's NameTotalLengthMax."""
_DIGEST_HEX = {"sha256": 64, "sha384": 96, "sha512": 128}
"""go-digest's registered algorithms and their hex lengths (others are refused by Docker at pull)."""


def check_image(value: object) -> str:
    """``--image``: a container image reference by the grammar Docker and Kubernetes parse
    (``[registry[:port]/]path[:tag][@algorithm:hex]``, path lowercase, name <= 255 characters), so that a
    reference they would refuse is refused here, with the rule it breaks, before any manifest names it."""
    text = str(value)
    if not text:
        raise UsageError("--image is empty: give an image reference, e.g. vllm/vllm-openai:v0.32.0")
    match = _IMAGE.fullmatch(text) if len(text) <= 4096 else None
    why = None
    if match is None:
        why = ("the grammar is [registry[:port]/]path[:tag][@sha256:hex]: path components of lowercase letters and "
               "digits joined by . _ __ or -, a tag of up to 128 letters, digits, _ . -")  # fmt: skip
    elif len(match["name"]) > NAME_MAX:
        why = f"the name before the tag is {len(match['name'])} characters, at most {NAME_MAX}"
    elif match["digest"]:
        algo, hexpart = match["digest"].split(":", 1)
        if algo not in _DIGEST_HEX or len(hexpart) != _DIGEST_HEX[algo]:
            why = f"a digest is sha256 (64 hex digits), sha384 (96) or sha512 (128), not {algo} with {len(hexpart)}"
    if why:
        raise UsageError(f"--image {comment(text[:300])} is not an image reference: {why}; e.g. vllm/vllm-openai:v0.32.0")
    return text
