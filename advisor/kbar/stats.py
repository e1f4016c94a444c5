"""Aggregate per-request replay counts into vLLM's figures, with a bootstrap over requests.

Every figure is a ratio of sums over requests, so the bootstrap resamples whole requests (the
unit that is independent in traffic; steps within a request are not) and recomputes the ratios:
- tokens per step (K̄)       = Σ output tokens / Σ steps              (all steps, prefill included)
- mean acceptance length    = 1 + Σ accepted / Σ drafts               (vLLM metrics.py:114)
- acceptance rate           = Σ accepted / Σ draft tokens             (vLLM metrics.py:107-111)
- per-position acceptance   = Σ accepted at position i / Σ drafts     (vLLM metrics.py:116-117)
"""

from __future__ import annotations

import numpy as np

from advisor.kbar.replay import RequestStats

COLUMNS = ("output_tokens", "steps", "drafts", "draft_tokens", "accepted", "prompt_tokens")


class Counts:
    """Per-request counts in growable int64 columns, plus per-position totals (O(requests) memory)."""

    def __init__(self) -> None:
        self.n = 0
        self._cols = np.zeros((len(COLUMNS), 1024), dtype=np.int64)
        self.accepted_per_pos: list[int] = []
        self.draft_tokens_per_pos: list[int] = []

    def add(self, s: RequestStats) -> None:
        if self.n == self._cols.shape[1]:
            self._cols = np.concatenate([self._cols, np.zeros_like(self._cols)], axis=1)
        self._cols[:, self.n] = (s.output_tokens, s.steps, s.drafts, s.draft_tokens, s.accepted, s.prompt_tokens)
        self.n += 1
        for dst, src in ((self.accepted_per_pos, s.accepted_per_pos), (self.draft_tokens_per_pos, s.draft_tokens_per_pos)):
            if len(dst) < len(src):
                dst.extend([0] * (len(src) - len(dst)))
            for i, v in enumerate(src):
                dst[i] += v

    def column(self, name: str) -> np.ndarray:
        return self._cols[COLUMNS.index(name), : self.n]

    def total(self, name: str) -> int:
        return int(self.column(name).sum())


def figures(tokens: float, steps: float, drafts: float, draft_tokens: float, accepted: float) -> dict[str, float | None]:
    """The three headline figures from totals; None where the denominator is zero (no drafts at all)."""
    return {
        "tokens_per_step": tokens / steps if steps else None,
        "mean_acceptance_length": 1.0 + accepted / drafts if drafts else None,
        "acceptance_rate": accepted / draft_tokens if draft_tokens else None,
    }


def per_position(counts: Counts, k: int) -> list[float]:
    """Acceptance rate at each draft position 1..K (accepted there / all drafts), as vLLM logs it."""
    drafts = counts.total("drafts")
    acc = counts.accepted_per_pos + [0] * max(0, k - len(counts.accepted_per_pos))
    return [a / drafts if drafts else 0.0 for a in acc[:k]]


def bootstrap(counts: Counts, *, resamples: int = 1000, level: float = 0.95, seed: int = 0) -> dict[str, tuple[float, float] | None]:
    """Percentile bootstrap intervals of the three figures, resampling requests with replacement."""
    n = counts.n
    if n == 0:
        return {"tokens_per_step": None, "mean_acceptance_length": None, "acceptance_rate": None}
    rng = np.random.default_rng(seed)
    cols = np.stack([counts.column(c) for c in ("output_tokens", "steps", "drafts", "draft_tokens", "accepted")], axis=1)
    sums = np.empty((resamples, cols.shape[1]), dtype=np.int64)
    chunk = max(1, min(resamples, 4_000_000 // n))  # bound the index matrix to ~32 MB
    for lo in range(0, resamples, chunk):
        hi = min(resamples, lo + chunk)
        idx = rng.integers(0, n, size=(hi - lo, n))
        sums[lo:hi] = cols[idx].sum(axis=1)
    tok, steps, drafts, dtok, acc = (sums[:, i].astype(np.float64) for i in range(5))
    with np.errstate(divide="ignore", invalid="ignore"):
        samples = {
            "tokens_per_step": tok / steps,
            "mean_acceptance_length": 1.0 + acc / drafts,
            "acceptance_rate": acc / dtok,
        }
    alpha = (1.0 - level) / 2.0
    out: dict[str, tuple[float, float] | None] = {}
    for name, vals in samples.items():
        vals = vals[np.isfinite(vals)]
        out[name] = (float(np.quantile(vals, alpha)), float(np.quantile(vals, 1 - alpha))) if vals.size else None
    return out


def relative_half_width(ci: tuple[float, float] | None, point: float | None) -> float:
    """Half the interval's width over the point estimate (inf when undefined)."""
    if ci is None or not point:
        return float("inf")
    return (ci[1] - ci[0]) / 2.0 / abs(point)
