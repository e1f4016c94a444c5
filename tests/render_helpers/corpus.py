"""Hostile values for every rendered field: shell metacharacters, quotes, systemd specifiers and
escapes, option-like words, control characters, unit-directive injections, Jinja syntax,
non-ASCII. Each test decides per field whether a value must be refused or round-trip exactly."""

from __future__ import annotations

SHELL = [
    "a'b\"c", "$(touch PWNED)", "`touch PWNED`", "name with spaces", "${HOME}", "$HOME", "$$", "$1", "${IFS}",
    'x}"; touch PWNED; : "', "vllm$(touch PWNED)", "'", '"', "\\", "trailing\\", "back\\slash\\", "a;b",
    "a&&touch PWNED", "a|touch PWNED", "a>PWNED", "<PWNED", "*", "?", "[a-z]", "~", "~root", "!", "!!", "#comment",
    "a #b", "$(id>PWNED)", "$'\\x41'", '"$(touch PWNED)"', "'$(touch PWNED)'", "\\$(touch PWNED)", "\\`touch PWNED\\`",
    ";", "&", "|", "&&", "||", "$(", ")", "`", "a\\", "a\\\\", '\\"', "\\'", "''", '""', "${VLLM_BIN:-x}",
    "${VLLM_BIN:-x}\"; touch PWNED; \"", "/bin/sh -c 'touch PWNED'", "=", "a=b", "KEY=VAL", "{{ 7*7 }}", "{% raw %}", "{#",
]  # fmt: skip
SYSTEMD = [
    "%h%n%%", "%", "%%", "%%%", "%i", "%U", "%C", "a%", "%a", "$VAR", "$$VAR", "@", ":", "+", "!!x", "\\n", "\\x41",
    "\\\\", '"quoted"', "'single'", "\"; ExecStartPre=/bin/sh -c 'touch PWNED' #",
    "\" \"--api-key\" \"leak", "x\" ExecStartPre=\"/bin/touch", ";comment",
]  # fmt: skip
CONTROL = [
    "line1\nline2; touch PWNED", "\n[Service]\nExecStartPre=/bin/touch /tmp/PWNED", "x\nExecStartPre=/bin/touch PWNED",
    "\t", "tab\there", "\r", "cr\rhere", "nul\x00byte", "\x1b[31mred", "\x7f", "trailing newline\n", "\u2028", "\u0085",
]  # fmt: skip
OPTIONS = ["-dash-first", "--help", "-", "--", "-S sh -c 'touch PWNED'", "--api-key=x"]
EDGES = ["", " ", " leading", "trailing ", "ünïcødé", "日本語", "emoji🦙", "v" * 300, "/etc/passwd", "../../etc/passwd",
         "/", "//", ".", "..", "a/b", "nvidia-smi", "vllm"]  # fmt: skip
NETWORK = [
    "0", "-1", "65536", "99999999999999999999", "8000 ", " 8000", "0x1f40", "1e3", "8000; touch PWNED",
    "127.0.0.1; touch PWNED", "::1", "0.0.0.0", "::", "localhost", "host name", "a..b", "-host", "host-",
    "256.256.256.256", "fe80::1%eth0", "[::1]", "example.com", "8000",
]  # fmt: skip

HOSTILE: list[str] = list(dict.fromkeys(SHELL + SYSTEMD + CONTROL + OPTIONS + EDGES + NETWORK))
assert len(HOSTILE) >= 100, len(HOSTILE)
