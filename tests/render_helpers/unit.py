"""Read a rendered unit file by systemd's rules (systemd.syntax(7), systemd.service(5)
'Command lines'): comments, sections, ``Key=value`` lines; specifiers (%%), then word splitting
with C unescaping inside double quotes, then ``$$``. Any construct the renderer never emits
(a live specifier, a ``$VAR`` expansion, an unknown escape) is an error here, so a value that
would be expanded by systemd fails the test instead of passing silently."""

from __future__ import annotations

_ESC = {"\\": "\\", '"': '"', "'": "'", "n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "f": "\f", "v": "\v", "s": " "}


def directives(text: str) -> list[tuple[str, str, str]]:
    """(section, key, value) for every directive line, in order."""
    out, section = [], ""
    for raw in text.split("\n"):
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        assert not raw.rstrip().endswith("\\"), f"line continuation: {raw!r}"
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1]
            continue
        key, sep, value = line.partition("=")
        assert sep, f"not a directive: {raw!r}"
        out.append((section, key.strip(), value.strip()))
    return out


def unspecify(value: str) -> str:
    out, i = [], 0
    while i < len(value):
        if value[i] == "%":
            assert value[i + 1 : i + 2] == "%", f"live specifier in {value!r}"
            out.append("%")
            i += 2
        else:
            out.append(value[i])
            i += 1
    return "".join(out)


def _undollar(word: str, allow: frozenset[str] = frozenset()) -> str:
    out, i = [], 0
    while i < len(word):
        ref = next((f"${{{n}}}" for n in allow if word.startswith(f"${{{n}}}", i)), None)
        if ref:  # an expansion the template means (kept as written)
            out.append(ref)
            i += len(ref)
        elif word[i] == "$":
            assert word[i + 1 : i + 2] == "$", f"live $ expansion in {word!r}"
            out.append("$")
            i += 2
        else:
            out.append(word[i])
            i += 1
    return "".join(out)


def exec_argv(value: str, allow: frozenset[str] = frozenset()) -> list[str]:
    """The argv systemd builds from an ``ExecStart=`` value; ``${NAME}`` for a NAME in ``allow``
    is left for systemd to expand, any other ``$`` must be the escaped ``$$``."""
    text = unspecify(value)
    assert text[:1] not in "-@:+!", f"exec prefix in {value!r}"
    words, i = [], 0
    while i < len(text):
        if text[i] in " \t":
            i += 1
            continue
        assert text[i] == '"', f"unquoted word in {value!r}"
        i += 1
        word = []
        while text[i] != '"':
            ch = text[i]
            if ch == "\\":
                nxt = text[i + 1]
                if nxt == "x":
                    word.append(chr(int(text[i + 2 : i + 4], 16)))
                    i += 4
                    continue
                assert nxt in _ESC, f"unknown escape \\{nxt} in {value!r}"
                word.append(_ESC[nxt])
                i += 2
                continue
            word.append(ch)
            i += 1
        i += 1
        assert i >= len(text) or text[i] in " \t", f"text after closing quote in {value!r}"
        words.append("".join(word) if not words else _undollar("".join(word), allow))  # no $ expansion in the executable
    return words


def one(text: str, key: str) -> str:
    values = [v for _, k, v in directives(text) if k == key]
    assert len(values) == 1, f"{key}= appears {len(values)} times"
    return values[0]
