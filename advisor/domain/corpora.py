"""Corpus names every layer agrees on: the seed sweep's traffic and the probe corpora that ship."""

from __future__ import annotations

SEED_CORPORA = ("sharegpt", "wildchat", "lmsys", "humaneval", "mbpp", "swebench", "mix")
"""Corpora of the seed sweep (calibration/sweep_b200.csv)."""

PUBLISHED_CORPORA = ("specbench", "blazedit", "agenticsql")
"""Corpora that are no seed corpus but have a published acceptance figure (calibration/kbar_published.csv:
its K̄ prior): ``recommend --corpus`` takes their names (tests/test_published_kbar.py checks the list
against the table)."""

KNOWN_CORPORA = SEED_CORPORA + PUBLISHED_CORPORA
"""Corpus names ``recommend --corpus`` takes without a file."""

PROBE_CORPORA = ("humaneval", "sharegpt")
"""Built-in prompt sets ``advisor probe`` ships (advisor/probe/corpus.py loads them)."""

DEFAULT_PROBE_CORPUS = "humaneval"
"""Probed on when the user's traffic is neither a file nor a shipped probe corpus."""
