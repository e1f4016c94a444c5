"""Each vLLM default lives in advisor/vllm_facts.py only (issue 16): the literals that used to be
scattered (version strings, the suffix defaults, the capture-size cap, the batch-default tiers, the
parser's module) must not reappear elsewhere under advisor/, in code or in docstrings."""

from __future__ import annotations

import re
from pathlib import Path

ADVISOR = Path(__file__).resolve().parents[1] / "advisor"
HOME = ADVISOR / "vllm_facts.py"

PATTERNS = {
    "a vLLM version string": r"[\"']0\.(26|32|33)(\.\d+)?[\"']",
    "the suffix tree depth": r"max_tree_depth\s*[:=][^,)\n]*\b24\b|default=24\b|\(24,\s*\"--max-tree|tree depth 24|24 // 2",
    "the suffix cache size": r"cached_requests\W.{0,20}\b10000\b|Option\(10000",
    "the suffix spec factor / min prob": r"spec_factor\W.{0,20}=\s*1\.0\b|min_token_prob\W.{0,20}=\s*0\.1\b|Option\((1\.0|0\.1), \"--m",
    "the draft cap": r"min\([^()]*,\s*12\)",
    "the CUDA-graph capture cap": r"min\([^()]*,\s*(512|1024)\)|(512|1024) if |capture size \((512|1024)\)",
    "the batch-default tiers": r"\((16384|8192),\s*1024\)|\(2048,\s*256\)|\b(160|70) \* 1024\b",
    "where make_arg_parser lives": r"entrypoints\.(openai|launchers|common)\.cli_args",
}


def _hits(text: str) -> list[str]:
    return [f"{what}: {m.group(0)!r}" for what, pat in PATTERNS.items() for m in re.finditer(pat, text)]


def test_no_vllm_fact_outside_the_facts_table():
    found = []
    for path in sorted(ADVISOR.rglob("*.py")):
        if path == HOME:
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            found += [f"{path.relative_to(ADVISOR.parent)}:{n}: {h}" for h in _hits(line)]
    assert not found, "vLLM facts outside advisor/vllm_facts.py (read them with advisor.vllm_facts.facts()):\n" + "\n".join(found)


def test_each_pattern_catches_the_literal_it_guards():
    """The patterns are not dead: each matches a line of the kind that used to be scattered."""
    sample = ('x = min(n * q * 2, 512)\nmax_tree_depth: int = 24\nOption(10000, "--x")\nmin(k, 12)\n"0.32"\n'
              '(8192, 1024)\nfrom vllm.entrypoints.common.cli_args import make_arg_parser\nmax_spec_factor: float = 1.0\n')
    assert {h.split(":")[0] for h in _hits(sample)} == set(PATTERNS)
    assert not _hits("seq_len = min(n, 2048)\nk = 24\nfor i in range(12): pass\nwidth = 512\n")  # unrelated numbers
