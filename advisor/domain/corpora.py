"""Corpus names every layer agrees on: the seed sweep's traffic and the probe corpora that ship."""

from __future__ import annotations

SEED_CORPORA = ("sharegpt", "wildchat", "lmsys", "humaneval", "mbpp", "swebench", "mix")
"""Corpora of the seed sweep (calibration/sweep_b200.csv)."""

PROBE_CORPORA = ("humaneval", "sharegpt")
"""Built-in prompt sets ``advisor probe`` ships (advisor/probe/corpus.py loads them)."""

DEFAULT_PROBE_CORPUS = "humaneval"
"""Probed on when the user's traffic is neither a file nor a shipped probe corpus."""
