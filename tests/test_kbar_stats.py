"""Figures and the bootstrap over requests."""

from __future__ import annotations

import pytest

from advisor.kbar.replay import RequestStats
from advisor.kbar.stats import (
    Counts,
    bootstrap,
    figures,
    per_position,
    relative_half_width,
)


def _counts(rows):
    c = Counts()
    for i, (tok, steps, drafts, dtok, acc) in enumerate(rows):
        c.add(RequestStats(i, 10, tok, steps, drafts, dtok, acc, [drafts] * min(acc, 1), [drafts] * min(dtok, 2)))
    return c


def test_figures_are_vllm_ratios():
    f = figures(tokens=300, steps=200, drafts=150, draft_tokens=600, accepted=120)
    assert f == {"tokens_per_step": 1.5, "mean_acceptance_length": 1.8, "acceptance_rate": 0.2}
    assert figures(5, 5, 0, 0, 0)["mean_acceptance_length"] is None


def test_per_position_is_per_draft_and_padded_to_k():
    c = _counts([(10, 5, 4, 8, 3), (10, 8, 2, 2, 0)])
    assert per_position(c, 4) == [4 / 6, 0.0, 0.0, 0.0]


def test_bootstrap_brackets_the_point_and_is_reproducible():
    rows = [(100 + i % 17 * 9, 60 + i % 5 * 7, 40, 90, 30 + i % 11) for i in range(400)]
    c = _counts(rows)
    point = c.total("output_tokens") / c.total("steps")
    a = bootstrap(c, resamples=300, seed=1)
    assert a == bootstrap(c, resamples=300, seed=1)
    lo, hi = a["tokens_per_step"]
    assert lo < point < hi and relative_half_width((lo, hi), point) < 0.05
    # More requests of the same kind: a tighter interval.
    wide = bootstrap(_counts(rows[:40]), resamples=300, seed=1)["tokens_per_step"]
    assert (wide[1] - wide[0]) > (hi - lo)


def test_bootstrap_edge_cases():
    assert bootstrap(Counts())["tokens_per_step"] is None
    no_drafts = bootstrap(_counts([(10, 10, 0, 0, 0)] * 5), resamples=50)
    assert no_drafts["tokens_per_step"] == (1.0, 1.0) and no_drafts["mean_acceptance_length"] is None
    assert relative_half_width(None, 1.0) == float("inf")
    assert relative_half_width((0.9, 1.1), 1.0) == pytest.approx(0.1)


def test_counts_grow_past_their_initial_capacity():
    c = _counts([(3, 2, 1, 1, 1)] * 3000)
    assert c.n == 3000 and c.total("output_tokens") == 9000


def test_until_ci_rule_waits_for_the_drift_to_settle():
    from advisor.kbar.estimate import _settled

    steady = _counts([(150 + i % 13, 100, 50, 100, 25) for i in range(600)])
    assert _settled(steady, 0.05, 0.95, 0)
    # Same spread, but K̄ climbs as the cache warms up: the interval is tight, the halves disagree.
    warming = _counts([(130 + i // 10, 100, 50, 100, 25) for i in range(600)])
    tok, steps = warming.column("output_tokens"), warming.column("steps")
    ci = bootstrap(warming, resamples=200)["tokens_per_step"]
    assert relative_half_width(ci, tok.sum() / steps.sum()) < 0.05
    assert not _settled(warming, 0.05, 0.95, 0)
