"""Published vLLM speculative-decoding results against the predictor (``calibrate --evaluate``'s
``published`` section).

``calibration/published/*.csv`` holds one row per published figure, each with its source (URL and
the sentence quoted) and what had to be assumed to predict it (column ``assumed``). A figure is a
gain of suffix decoding or n-gram over plain decoding, or of suffix over n-gram, either at one
concurrency (``stat`` = value) or as the end of a range a source reports over a span of
concurrencies (``stat`` = min / max: compared with the minimum / maximum of the prediction over
``CONCURRENCY_GRID`` inside the span).

The prediction is the one a user of that host gets: ``predict.api.predict`` for suffix, with the
host profile its GPU matches, and ``absolute.ngram_gain`` for n-gram (its own step cost and the n-gram
K̄ ``recommend`` gives it). Nothing in the predictor is fitted to these rows; the one thing taken from
publications is the K̄ table ``calibration/kbar_published.csv``, so leave-one-source-out predicts each
source's rows with that table less the same source's figures (one source: one paper, blog or PR);
``evaluate`` reports it per method with the share of figures inside the 90 % interval.
"""

from __future__ import annotations

import csv
import math
import statistics
from pathlib import Path

from pydantic import BaseModel, ConfigDict

FOLDER = "published"
EAGLE_DRAFT_FILE = "eagle_draft_results.csv"
"""EAGLE / EAGLE-3 / draft-model figures (issue 41 item 4): their own columns (engine, drafter, metric, ...), frozen
before any fit and checked by tests/test_published_eagle.py; not gain rows of this module's schema, so ``load`` skips them."""
CONCURRENCY_GRID = (1, 4, 16, 64)
"""Concurrencies a range is spanned by (vLLM PR #25784's benchmark grid)."""
GOAL_MEDIAN_ABS_LOG = 0.15
GOAL_COVERAGE = (0.80, 0.95)


class PublishedRow(BaseModel):
    model_config = ConfigDict(extra="forbid")

    source: str
    url: str
    quote: str
    method: str
    """suffix, ngram or suffix_over_ngram."""
    model: str
    gpu: str
    tp: int
    concurrency_lo: int
    concurrency_hi: int
    stat: str
    corpus: str
    k: int
    value: float
    assumed: str


def load(calibration_dir: Path) -> list[PublishedRow]:
    rows: list[PublishedRow] = []
    for path in sorted((calibration_dir / FOLDER).glob("*.csv")):
        if path.name == EAGLE_DRAFT_FILE:
            continue
        with path.open(newline="") as fh:
            rows += [PublishedRow(**r) for r in csv.DictReader(fh)]
    return rows


def _at(row: PublishedRow, c: int, profile, fitted=None) -> tuple[float, float, float, dict]:
    """(gain, low, high, K̄ sources) of the row's method at concurrency ``c``, through the product's own path:
    suffix by ``predict.api.predict`` (with ``fitted``: a CalibratedModel whose published K̄ table leaves out
    the held-out source), n-gram by ``absolute.ngram_gain`` with the n-gram K̄ ``recommend`` would give it."""
    from advisor.domain.workload import Workload
    from advisor.hardware.gpus import get_gpu
    from advisor.predict import kbar_prior as kp
    from advisor.predict.absolute import ReplicaLayout, ngram_gain
    from advisor.predict.api import predict

    gpu = get_gpu(row.gpu)
    work = Workload(corpus=row.corpus, concurrency=c)
    suffix = predict(profile, gpu, row.tp, work, host_state="OFF", fitted=fitted)  # at the decider's K
    kbars = {"suffix_k_bar": round(suffix.k_bar, 4), "suffix_k_bar_source": suffix.k_bar_source}
    if row.method == "suffix":
        return suffix.gain, suffix.gain_low, suffix.gain_high, kbars
    published = None if fitted is None else fitted.published_priors
    ngram = kp.ngram_kbar_for(work, profile.family, own_prior_ok=kp.is_own_source(suffix.k_bar_source),
                              suffix_source=suffix.k_bar_source, published=published, k=row.k)  # fmt: skip
    ctx = kp.shape_for(row.corpus).context(profile.family)
    band, _, notes = ngram_gain(profile, gpu, ReplicaLayout(tp=row.tp), c, ctx, row.k, suffix.k_bar, ngram=ngram,
                                suffix_kbar_sigma=suffix.k_bar_sigma)
    kbars["ngram_k_bar_source"] = notes[0]
    if row.method == "ngram":
        return band.value, band.low, band.high, kbars
    return suffix.gain / band.value, suffix.gain_low / band.high, suffix.gain_high / band.low, kbars


def predict_row(row: PublishedRow, profile, fitted=None) -> dict:
    cs = [c for c in CONCURRENCY_GRID if row.concurrency_lo <= c <= row.concurrency_hi] or [row.concurrency_lo]
    at = {c: _at(row, c, profile, fitted) for c in cs}
    if row.stat == "min":
        c = min(at, key=lambda x: at[x][0])
    elif row.stat == "max":
        c = max(at, key=lambda x: at[x][0])
    else:
        c = cs[0]
    g, lo, hi, kbars = at[c]
    return {"source": row.source, "method": row.method, "corpus": row.corpus, "stat": row.stat,
            "concurrency": c, "published": row.value, "predicted": round(g, 4), "low": round(lo, 4),
            "high": round(hi, 4), "abs_log_error": round(abs(math.log(g / row.value)), 4),
            "inside_90": lo <= row.value <= hi, **kbars}  # fmt: skip


def evaluate(calibration_dir: Path, profile_of) -> dict:
    rows = load(calibration_dir)
    if not rows:
        return {"available": False, "reason": f"no rows under calibration/{FOLDER}/"}
    from advisor.predict import kbar_prior as kp
    from advisor.predict.api import calibrated_model

    sources = sorted({r.source for r in rows})
    shipped, kbars = calibrated_model(), kp.published_kbars()
    table, excluded = [], {}
    for held in sources:  # leave one source out: no published K̄ of the held source prices its own rows
        keep = [p for p in kbars if p.source != held]
        excluded[held] = sorted({f"{p.corpus}/{p.method}" for p in kbars if p.source == held})
        fitted = shipped.model_copy(update={"published_priors": keep})
        table += [predict_row(r, profile_of(r.model), fitted) for r in rows if r.source == held]
    by_method = {}
    for m in sorted({t["method"] for t in table}):
        ts = [t for t in table if t["method"] == m]
        med = statistics.median(t["abs_log_error"] for t in ts)
        cov = sum(t["inside_90"] for t in ts) / len(ts)
        by_method[m] = {"rows": len(ts), "median_abs_log": round(med, 4), "coverage_90": round(cov, 4),
                        "median_log_pred_over_pub": round(statistics.median(math.log(t["predicted"] / t["published"]) for t in ts), 4),
                        "meets_goal": med <= GOAL_MEDIAN_ABS_LOG and GOAL_COVERAGE[0] <= cov <= GOAL_COVERAGE[1]}  # fmt: skip
    return {"available": True, "sources": sources, "files": sorted(str(p.name) for p in (calibration_dir / FOLDER).glob("*.csv")),
            "method": "leave-one-source-out: no predictor term is fitted to published gain rows, so every row is predicted "
                      "by the shipped predictor as a user of that host would get it, except that the published K̄ priors "
                      f"(calibration/{kp.PUBLISHED_FILE}) of the row's own source are left out: a gain row and an "
                      "acceptance figure with the same source id (one paper, blog or PR, whatever URL carries it) are one "
                      "source, so no row is priced from its own publication's acceptance; n-gram's K̄ as recommend gives "
                      "it (own-output or published prior where suffix's K̄ came from the same kind and source, else a share "
                      "of suffix's); range endpoints against the predicted extreme over concurrency "
                      f"{list(CONCURRENCY_GRID)}",
            "published_kbar_excluded": excluded,
            "goal": {"median_abs_log": GOAL_MEDIAN_ABS_LOG, "coverage_90": list(GOAL_COVERAGE)},
            "by_method": by_method, "table": table}  # fmt: skip
