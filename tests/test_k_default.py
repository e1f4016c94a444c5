"""The suffix K default is written once: rules/policy/decider.yaml ``num_speculative_tokens`` (issue 42).

Everything that defaults K reads it through advisor.rules.policy.load_policy. A grep of advisor/ and rules/ fails when
a K default is typed again as a literal, in the forms the issue removed (a ``k: int = 32`` parameter, a
``Field(default=32)``, a ``{"suffix": 32}`` table, an ``or 32`` / ``else 32`` fallback, a ``suffix:32`` option
default, a rule restating ``num_speculative_tokens``). What stays is data, not the default: the seed sweep's K
(advisor.predict.dataset.SEED_K, the one allowed line below), and prose about what was measured at K=32."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DECIDER = ROOT / "rules" / "policy" / "decider.yaml"

_LOWER_K = r"\b(?:[a-z0-9]+_)*k(?:_[a-z0-9]+)*"
"""A lower-case name with a ``k`` part: ``k``, ``ngram_k_ref``, ``k_rules`` (not ``ticks``)."""
_UPPER_K = r"\b(?:[A-Z0-9]+_)+K(?:_[A-Z0-9]+)*"
"""A constant with a ``K`` part: ``SEED_K``, ``ALT_K`` (prose's bare ``K=32`` is a measurement, not a name)."""
_VALUE = r"(?:(?:pydantic\.)?Field\(\s*default\s*=\s*|field\(\s*default\s*=\s*)?32\b"

PATTERNS = {
    "K parameter or field defaulting to 32": re.compile(rf"{_LOWER_K}\s*(?::\s*[\w\[\]| .]+?)?\s*=\s*{_VALUE}"),
    "K constant set to 32": re.compile(rf"{_UPPER_K}\s*(?::\s*[\w\[\]| .]+?)?\s*=\s*{_VALUE}"),
    "K tuple or list holding 32": re.compile(rf"(?:{_LOWER_K}|{_UPPER_K})\s*=\s*[(\[][^)\]\n]*\b32\b"),
    "num_speculative_tokens set to 32": re.compile(r"\bnum_speculative_tokens\s*(?::\s*[\w\[\]| .]+?)?\s*[:=]\s*" + _VALUE),
    "a per-method K table with suffix 32": re.compile(r"""["']suffix["']\s*:\s*32\b"""),
    "a fallback K of 32": re.compile(r"\b(?:or|else)\s+32\b"),
    "a suffix:32 option default or constant": re.compile(r"""(?:Option\(|=\s*\(?)\s*f?["'][^"'\n]*\bsuffix:32\b"""),
}

ALLOWED = {
    # The seed sweep's K, a fact of calibration/sweep_b200.csv (seed README, 'The setup'): the K its rows and the priors
    # derived from them were measured at, not the default (kbar_prior.PRIOR_K and the seed observations read it).
    ("advisor/predict/dataset.py", "SEED_K = 32"),
}


def _files() -> list[Path]:
    files = sorted((ROOT / "advisor").rglob("*.py")) + sorted((ROOT / "rules").rglob("*.yaml"))
    return [f for f in files if f != DECIDER]


def test_the_default_is_written_in_decider_yaml():
    from advisor.rules.policy import load_policy

    assert re.search(r"^num_speculative_tokens: \d+$", DECIDER.read_text(), re.M)
    assert load_policy().num_speculative_tokens >= 1


def test_no_k_default_is_typed_again():
    hits = []
    for path in _files():
        rel = path.relative_to(ROOT).as_posix()
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for what, pattern in PATTERNS.items():
                if pattern.search(line) and (rel, line.strip()) not in ALLOWED:
                    hits.append(f"{rel}:{n}: {what}: {line.strip()}")
    assert not hits, "K's default lives in rules/policy/decider.yaml (read it with advisor.rules.policy.load_policy):\n" + "\n".join(hits)


def test_the_allowed_lines_still_exist():
    """An allowlist entry whose line is gone is stale: drop it."""
    for rel, line in ALLOWED:
        assert line in {x.strip() for x in (ROOT / rel).read_text(encoding="utf-8").splitlines()}, (rel, line)


@pytest.mark.parametrize("line", ["    k: int = 32,", "def f(x, k=32):", "    num_speculative_tokens: int = Field(default=32, ge=1)",
                                  "PRIOR_K = 32", "ALT_K = (4, 8, 16, 32)", 'DEFAULT_K = {"suffix": 32, "ngram": 4}',
                                  "    k = int(x or 32)", '    typer.Option("vanilla,suffix:32", "--configs")',
                                  "      num_speculative_tokens: 32", "    ngram_k_ref: int = 32"])
def test_the_patterns_catch_what_was_removed(line):
    assert any(p.search(line) for p in PATTERNS.values()), line


@pytest.mark.parametrize("line", ["TP_LADDER = (1, 2, 4, 8, 16, 32, 64)", "SEED_CONCURRENCY = 32",
                                  '    "H200 at K=32 (advisor probe: 11.1 tokens per draft"',
                                  "    ticks = [t for t in (0.5, 1, 2, 4, 8, 16, 32)]", "DEFAULT_CONCURRENCY = 32"])
def test_the_patterns_leave_other_32s(line):
    assert not any(p.search(line) for p in PATTERNS.values()), line


def test_the_defaults_read_the_policy(tmp_path, monkeypatch):
    """With decider.yaml's K changed, every default that the grep guards follows it."""
    import advisor.paths
    from advisor.kbar.replay import ReplayConfig
    from advisor.probe.configs import parse_configs
    from advisor.report.evidence import alt_ks
    from advisor.rules.policy import load_policy

    (tmp_path / "rules" / "policy").mkdir(parents=True)
    text = re.sub(r"^num_speculative_tokens: \d+$", "num_speculative_tokens: 12", DECIDER.read_text(), flags=re.M)
    (tmp_path / "rules" / "policy" / "decider.yaml").write_text(text)
    real = advisor.paths.data_path
    monkeypatch.setattr(advisor.paths, "data_path", lambda name: tmp_path / "rules" if name == "rules" else real(name))
    load_policy.cache_clear()
    try:
        assert load_policy().num_speculative_tokens == 12
        assert ReplayConfig().num_speculative_tokens == 12
        assert [c.label for c in parse_configs("vanilla,suffix,ngram")] == ["vanilla", "suffix:12", "ngram:4"]
        assert 12 in alt_ks() and 32 not in alt_ks()
    finally:
        load_policy.cache_clear()
