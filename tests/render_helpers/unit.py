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


SYSTEMD = "/lib/systemd/systemd"
_DUMP_ESC = {"\\": "\\", '"': '"', "$": "$", "`": "`", "n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "f": "\f", "v": "\v"}


def _dump_words(line: str) -> list[str]:
    """Split a ``Command Line:`` of systemd's dump (quote_command_line: words double-quoted when
    needed, with C escapes and ``\\NNN`` octal for other control characters)."""
    words, i = [], 0
    while i < len(line):
        if line[i] == " ":
            i += 1
            continue
        word = []
        quoted = line[i] == '"'
        i += quoted
        while i < len(line) and (line[i] != '"' if quoted else line[i] != " "):
            ch = line[i]
            if ch == "\\" and quoted:
                nxt = line[i + 1]
                if nxt.isdigit():
                    word.append(chr(int(line[i + 1 : i + 4], 8)))
                    i += 4
                    continue
                word.append(_DUMP_ESC[nxt])
                i += 2
                continue
            word.append(ch)
            i += 1
        i += quoted
        words.append("".join(word))
    return words


def systemd_exec_lines(folder, units: list[str], key: str = "ExecStart") -> dict[str, list[list[str]]]:
    """What systemd itself parses from each unit's ``key=`` lines: ``systemd --test`` (the real
    manager in test mode, as nobody: it refuses root) loads ``folder`` and dumps every unit of a
    target that wants them all. Returns {unit: [argv, …]} with ``$$`` already reduced to ``$``
    (systemd does that at exec time, for arguments only)."""
    from pathlib import Path

    import shutil
    import tempfile

    readable = Path(tempfile.mkdtemp(prefix="advisor-units-"))  # pytest's tmp is 0700: nobody cannot read it
    try:
        readable.chmod(0o755)
        for name in units:
            shutil.copy(Path(folder) / name, readable / name)
            (readable / name).chmod(0o644)
        (readable / "all-hostile.target").write_text("[Unit]\nDescription=all\nWants=" + " ".join(units) + "\n")
        (readable / "all-hostile.target").chmod(0o644)
        return _dump(readable, units, key)
    finally:
        shutil.rmtree(readable, ignore_errors=True)


def _dump(folder, units: list[str], key: str) -> dict[str, list[list[str]]]:
    import subprocess

    env = {"SYSTEMD_UNIT_PATH": f"{folder}:", "PATH": "/usr/bin:/bin", "SYSTEMD_LOG_LEVEL": "err"}
    proc = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", SYSTEMD, "--test", "--system",
                           "--unit=all-hostile.target", "--no-pager"], capture_output=True, text=True, timeout=300, env=env,
                          cwd="/")  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    out: dict[str, list[list[str]]] = {}
    unit, want = None, False
    for line in proc.stdout.split("\n"):
        if line.startswith("\t-> Unit "):
            unit = line[len("\t-> Unit ") : -1]
        elif unit in units and line.startswith(f"\t\t{key}: "):  # a plain setting, e.g. EnvironmentFile
            out.setdefault(unit, []).append([line[len(f"\t\t{key}: ") :]])
        elif line.strip() == f"-> {key}:":
            want = True
        elif want and unit in units and line.strip().startswith("Command Line: "):
            argv = _dump_words(line.strip()[len("Command Line: ") :])
            out.setdefault(unit, []).append([argv[0], *(_undollar(w) for w in argv[1:])])
            want = False
        elif want and not line.startswith("\t\t\t"):
            want = False
    assert not set(units) - set(out), f"systemd dumped no {key} for {sorted(set(units) - set(out))[:5]}"
    return out


def have_systemd_test_mode() -> bool:
    import os
    import shutil

    return os.path.exists(SYSTEMD) and shutil.which("setpriv") is not None
