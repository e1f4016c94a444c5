"""Published vLLM speculative-decoding results against the predictor (``calibrate --evaluate``'s
``published`` section, evaluation (c)).

``calibration/published/*.csv`` holds one row per published figure, each with its source (URL and
the sentence quoted) and what had to be assumed to predict it (column ``assumed``). A figure is a
gain of suffix decoding or n-gram over plain decoding, or of suffix over n-gram, either at one
concurrency (``stat`` = value) or as the end of a range a source reports over a span of
concurrencies (``stat`` = min / max: compared with the minimum / maximum of the prediction over
``CONCURRENCY_GRID`` inside the span).

The prediction is the one a user of that host gets: ``predict.api.predict`` for suffix, with the
host profile its GPU matches, and ``absolute.ngram_gain`` for n-gram (its own step cost and the n-gram
K̄ ``recommend`` gives it). Nothing in the predictor is fitted to these rows; the one thing taken from
publications is the K̄ table ``calibration/kbar_published.csv``.

Held out by team (issue 42 item 3): ``calibration/published/holdout_groups.yaml`` (frozen before this
evaluation read it, from each row's source id and URL only) gives every gain row and every K̄ row the team
that produced it. A gain row is priced with the K̄ table less every K̄ row of its own team; where its corpus
then has no published K̄, the product's own order applies (own-output prior, else the seed sweep's prior of
the corpus, else the instruct group's fallback with the known corpora's spread: ``CalibratedModel.kbar_choice``),
and that is part of the score. The same rows priced with the whole table are reported beside it as "in sample
(same-team K̄)". Per method: rows, median |ln(pred / pub)|, the share inside the 90 % interval, the median band
width (high / low), and two trivial baselines on the same rows: the median gain of the method's other rows, and
"always plain" (gain 1). Rows the product prices from a DERIVED K̄ (BlazEdit's suffix K̄: kbar_prior.suffix_from_ngram)
are scored apart from rows priced from a quoted figure and from rows with no published K̄. No interval width or
constant is set here or by these scores.
"""

from __future__ import annotations

import csv
import math
import statistics
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from advisor.errors import DataError

FOLDER = "published"
GROUPS_FILE = "holdout_groups.yaml"
"""The frozen team / artifact of every gain row and K̄ row (calibration/published/holdout_groups.yaml)."""
EAGLE_DRAFT_FILE = "eagle_draft_results.csv"
"""EAGLE / EAGLE-3 / draft-model figures (issue 41 item 4): their own columns (engine, drafter, metric, ...), frozen
before any fit and checked by tests/test_published_eagle.py; not gain rows of this module's schema, so ``load`` skips them."""
CONCURRENCY_GRID = (1, 4, 16, 64)
"""Concurrencies a range is spanned by (vLLM PR #25784's benchmark grid)."""
GOAL_MEDIAN_ABS_LOG = 0.15
GOAL_COVERAGE = (0.80, 0.95)
IN_SAMPLE_LABEL = "in sample (same-team K̄)"
KBAR_KINDS = ("quoted", "derived", "none")
"""How a row's K̄ was priced: from a quoted published figure, from one DERIVED by us (kbar_prior.suffix_from_ngram),
or from no published figure (own-output prior, seed prior or the fallback)."""


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
    file: str = ""
    """The CSV under calibration/published/ the row is in (set by ``load``)."""
    row: int = 0
    """Its 1-based data row there (set by ``load``): the key of holdout_groups.yaml's gain_rows."""


class HoldoutGroups(BaseModel):
    """calibration/published/holdout_groups.yaml, checked against the rows it describes: the team (the hold-out unit)
    and artifact of every gain row, keyed (file, row), and the teams of every K̄ row of calibration/kbar_published.csv,
    keyed (source, corpus, method, k, url); a derived K̄ carries the teams of all its inputs."""

    model_config = ConfigDict(extra="forbid")

    unit: str
    gain_team: dict[tuple[str, int], str]
    gain_artifact: dict[tuple[str, int], str]
    kbar_teams: dict[tuple[str, str, str, int, str], tuple[str, ...]]
    derived: list[dict]
    """The K̄ the product derives (origin: derived): corpus, method, source and the teams of its inputs."""


def load(calibration_dir: Path) -> list[PublishedRow]:
    rows: list[PublishedRow] = []
    for path in sorted((calibration_dir / FOLDER).glob("*.csv")):
        if path.name == EAGLE_DRAFT_FILE:
            continue
        with path.open(newline="") as fh:
            rows += [PublishedRow(**r, file=path.name, row=i) for i, r in enumerate(csv.DictReader(fh), 1)]
    return rows


def _kbar_key(p) -> tuple[str, str, str, int, str]:
    return (p.source, p.corpus, p.method, int(p.k), p.url)


def load_groups(calibration_dir: Path, rows: list[PublishedRow]) -> HoldoutGroups:
    """The frozen groups file, with every gain row it names checked against ``rows`` (a DataError where the data moved
    under it or a row has no group: the groups are never filled in by the evaluation)."""
    import yaml

    path = calibration_dir / FOLDER / GROUPS_FILE
    try:
        doc = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise DataError(f"{path}: cannot read: {exc.strerror or exc}") from None
    unit = doc.get("holdout_unit")
    if unit != "team":
        raise DataError(f"{path}: holdout_unit {unit!r}: only 'team' is implemented")
    teams = set(doc["teams"])

    def team_set(v) -> tuple[str, ...]:
        ts = tuple(sorted([v] if isinstance(v, str) else v))
        if not ts or set(ts) - teams:
            raise DataError(f"{path}: team {v!r} is not one of teams: {sorted(teams)}")
        return ts

    gain_team, gain_artifact = {}, {}
    for g in doc["gain_rows"]:
        key = (g["file"], int(g["row"]))
        gain_team[key], gain_artifact[key] = team_set(g["team"])[0], g["artifact"]
    by_key = {(r.file, r.row): r for r in rows}
    for key, r in by_key.items():
        g = next((g for g in doc["gain_rows"] if (g["file"], int(g["row"])) == key), None)
        if g is None:
            raise DataError(f"{path}: gain row {key[0]}:{key[1]} ({r.source} {r.method} {r.corpus}) has no group")
        got = (g["source"], g["method"], g["corpus"], g["stat"], int(g["concurrency_lo"]), int(g["concurrency_hi"]), g["url"])
        want = (r.source, r.method, r.corpus, r.stat, r.concurrency_lo, r.concurrency_hi, r.url)
        if got != want:
            raise DataError(f"{path}: gain row {key[0]}:{key[1]} is {want}, the groups file says {got}")
    kbar_teams, derived = {}, []
    for k in doc["kbar_rows"]:
        if k.get("origin") == "derived":
            derived.append({"source": k["source"], "corpus": k["corpus"], "method": k["method"], "teams": list(team_set(k["team"]))})
        else:
            kbar_teams[(k["source"], k["corpus"], k["method"], int(k["k"]), k["url"])] = team_set(k["team"])
    return HoldoutGroups(unit=unit, gain_team={k: v for k, v in gain_team.items() if k in by_key},
                         gain_artifact={k: v for k, v in gain_artifact.items() if k in by_key},
                         kbar_teams=kbar_teams, derived=derived)  # fmt: skip


def _at(row: PublishedRow, c: int, profile, fitted=None) -> tuple[float, float, float, dict, str]:
    """(gain, low, high, K̄ sources, KBAR_KINDS kind) of the row's method at concurrency ``c``, through the product's own path:
    suffix by ``predict.api.predict`` (with ``fitted``: a CalibratedModel whose published K̄ table leaves out
    the held-out team), n-gram by ``absolute.ngram_gain`` with the n-gram K̄ ``recommend`` would give it."""
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
        return suffix.gain, suffix.gain_low, suffix.gain_high, kbars, kbar_kind([suffix.k_bar_kind])
    published = None if fitted is None else fitted.published_priors
    ngram = kp.ngram_kbar_for(work, profile.family, own_prior_ok=suffix.k_bar_kind == "own_output",
                              published_source_id=suffix.k_bar_published_source_id, published=published, k=row.k)  # fmt: skip
    kind = kbar_kind([suffix.k_bar_kind, ngram.kind if ngram is not None else None])
    ctx = kp.shape_for(row.corpus).context(profile.family)
    band, _, notes = ngram_gain(profile, gpu, ReplicaLayout(tp=row.tp), c, ctx, row.k, suffix.k_bar, ngram=ngram,
                                suffix_kbar_sigma=suffix.k_bar_sigma)
    kbars["ngram_k_bar_source"] = notes[0]
    if row.method == "ngram":
        return band.value, band.low, band.high, kbars, kind
    return suffix.gain / band.value, suffix.gain_low / band.high, suffix.gain_high / band.low, kbars, kind


def kbar_kind(kinds: list[str | None]) -> str:
    """``derived``, ``quoted`` or ``none`` (KBAR_KINDS) for a predicted row, from the typed kinds of the K̄ sources
    it was priced with (advisor.domain.prediction.KbarKind; suffix's always, n-gram's own where it has one: its K̄
    may be a share of suffix's): derived if any is ``published_derived``, else quoted if any is ``published``, else
    none."""
    if "published_derived" in kinds:
        return "derived"
    return "quoted" if "published" in kinds else "none"


def predict_row(row: PublishedRow, profile, fitted=None) -> dict:
    cs = [c for c in CONCURRENCY_GRID if row.concurrency_lo <= c <= row.concurrency_hi] or [row.concurrency_lo]
    at = {c: _at(row, c, profile, fitted) for c in cs}
    if row.stat == "min":
        c = min(at, key=lambda x: at[x][0])
    elif row.stat == "max":
        c = max(at, key=lambda x: at[x][0])
    else:
        c = cs[0]
    g, lo, hi, kbars, kind = at[c]
    out = {"source": row.source, "method": row.method, "corpus": row.corpus, "stat": row.stat,
           "concurrency": c, "published": row.value, "predicted": round(g, 4), "low": round(lo, 4),
           "high": round(hi, 4), "band_ratio": round(hi / lo, 4), "abs_log_error": round(abs(math.log(g / row.value)), 4),
           "inside_90": lo <= row.value <= hi, **kbars}  # fmt: skip
    out["kbar_kind"] = kind
    return out


class Baseline(BaseModel):
    """A trivial predictor's score on the same rows (no interval: a point only)."""

    model_config = ConfigDict(extra="forbid")

    median_abs_log: float
    beaten: bool
    """The method's median |ln| is below this one's."""


class MethodScore(BaseModel):
    """One method's score over a set of rows: the point error, the 90 % interval's coverage and its median width, and
    the trivial baselines beside them."""

    model_config = ConfigDict(extra="forbid")

    rows: int
    median_abs_log: float
    coverage_90: float
    median_band_ratio: float
    """Median over rows of the 90 % interval's high / low (x8 spans a factor of 8)."""
    median_log_pred_over_pub: float
    meets_goal: bool
    baselines: dict[str, Baseline]
    """``median_of_other_rows``: each row predicted by the median published gain of the method's other rows;
    ``always_plain``: gain 1 (for suffix over n-gram: the two methods equal)."""


def baseline_errors(rows: list[PublishedRow]) -> dict[tuple[str, int], dict[str, float]]:
    """|ln(baseline / published)| per gain row, keyed (file, row): the median published gain of the other rows of the
    same method, and always plain (1)."""
    out = {}
    for r in rows:
        others = [o.value for o in rows if o.method == r.method and (o.file, o.row) != (r.file, r.row)]
        med = statistics.median(others) if others else 1.0
        out[(r.file, r.row)] = {"median_of_other_rows": abs(math.log(med / r.value)), "always_plain": abs(math.log(r.value))}
    return out


def score(table: list[dict], base: dict[tuple[str, int], dict[str, float]], prefix: str = "") -> dict[str, dict]:
    """MethodScore per method over ``table`` (rows of predict_row, each with ``file``/``row``), read from the keys
    ``{prefix}abs_log_error`` etc. (prefix ``in_sample_`` for the in-sample figures)."""
    out = {}
    for m in sorted({t["method"] for t in table}):
        ts = [t for t in table if t["method"] == m]
        med = statistics.median(t[prefix + "abs_log_error"] for t in ts)
        cov = sum(t[prefix + "inside_90"] for t in ts) / len(ts)
        bl = {}
        for name in ("median_of_other_rows", "always_plain"):
            b = statistics.median(base[(t["file"], t["row"])][name] for t in ts)
            bl[name] = Baseline(median_abs_log=round(b, 4), beaten=med < b)
        out[m] = MethodScore(
            rows=len(ts), median_abs_log=round(med, 4), coverage_90=round(cov, 4),
            median_band_ratio=round(statistics.median(t[prefix + "band_ratio"] for t in ts), 2),
            median_log_pred_over_pub=round(statistics.median(math.log(t[prefix + "predicted"] / t["published"]) for t in ts), 4),
            meets_goal=med <= GOAL_MEDIAN_ABS_LOG and GOAL_COVERAGE[0] <= cov <= GOAL_COVERAGE[1], baselines=bl,
        ).model_dump()  # fmt: skip
    return out


def by_kind(table: list[dict], base: dict, key: str, prefix: str = "") -> dict[str, dict]:
    """``score`` per K̄ kind (KBAR_KINDS present in ``table``), the kind read from ``key``."""
    return {k: score([t for t in table if t[key] == k], base, prefix) for k in KBAR_KINDS if any(t[key] == k for t in table)}


def evaluate(calibration_dir: Path, profile_of) -> dict:
    rows = load(calibration_dir)
    if not rows:
        return {"available": False, "reason": f"no rows under calibration/{FOLDER}/"}
    from advisor.predict import kbar_prior as kp
    from advisor.predict.api import calibrated_model

    groups = load_groups(calibration_dir, rows)
    shipped, kbars = calibrated_model(), kp.published_kbars()
    missing = [f"{p.source} {p.corpus}/{p.method}" for p in kbars if _kbar_key(p) not in groups.kbar_teams]
    if missing:
        raise DataError(f"calibration/{FOLDER}/{GROUPS_FILE}: K̄ rows of calibration/{kp.PUBLISHED_FILE} with no group: {missing}")
    teams = sorted(set(groups.gain_team.values()))
    in_sample = shipped.model_copy(update={"published_priors": list(kbars)})
    table, excluded = [], {}
    for team in teams:  # held out by team: no K̄ row of the team prices the team's own gain rows
        keep = [p for p in kbars if team not in groups.kbar_teams[_kbar_key(p)]]
        excluded[team] = sorted(f"{p.corpus}/{p.method} [{p.source}]" for p in kbars if team in groups.kbar_teams[_kbar_key(p)])
        fitted = shipped.model_copy(update={"published_priors": keep})
        kept_teams = sorted({t for p in keep for t in groups.kbar_teams[_kbar_key(p)]})
        for r in rows:
            if groups.gain_team[(r.file, r.row)] != team:
                continue
            profile = profile_of(r.model)
            t = {"file": r.file, "row": r.row, "team": team, "artifact": groups.gain_artifact[(r.file, r.row)],
                 **predict_row(r, profile, fitted), "kbar_table_teams": kept_teams}  # fmt: skip
            ins = predict_row(r, profile, in_sample)
            t.update({f"in_sample_{k}": ins[k] for k in ("predicted", "low", "high", "band_ratio", "abs_log_error", "inside_90", "kbar_kind")})
            table.append(t)
    base = baseline_errors(rows)
    held = {team: {"gain_rows": sum(t["team"] == team for t in table), "kbar_rows_held_out": excluded[team]} for team in teams}
    return {"available": True, "sources": sorted({r.source for r in rows}), "teams": teams,
            "files": sorted(str(p.name) for p in (calibration_dir / FOLDER).glob("*.csv")),
            "groups_file": f"calibration/{FOLDER}/{GROUPS_FILE}", "holdout_unit": groups.unit,
            "method": "held out by team: no predictor term is fitted to published gain rows, so every row is predicted "
                      "by the shipped predictor as a user of that host would get it, except that every published K̄ row "
                      f"(calibration/{kp.PUBLISHED_FILE}) of the row's own team (calibration/{FOLDER}/{GROUPS_FILE}, frozen "
                      "from source ids and URLs before this evaluation read it) is left out, and so is any K̄ derived from "
                      "one; a corpus left without a published K̄ takes what the product takes without one (own-output prior, "
                      "seed prior of the corpus, else the fallback with the known corpora's spread); n-gram's K̄ as "
                      "recommend gives it; range endpoints against the predicted extreme over concurrency "
                      f"{list(CONCURRENCY_GRID)}; baselines: the median gain of the method's other rows, and always plain",
            "published_kbar_excluded": excluded, "groups": held,
            "goal": {"median_abs_log": GOAL_MEDIAN_ABS_LOG, "coverage_90": list(GOAL_COVERAGE)},
            "by_method": score(table, base),
            "by_kbar_kind": {"note": "rows grouped by the K̄ the product (in sample) prices them with: quoted published "
                                     "figure, DERIVED (BlazEdit's suffix K̄), or none published; scored held out",
                             **by_kind(table, base, "in_sample_kbar_kind")},
            "in_sample": {"label": IN_SAMPLE_LABEL,
                          "method": f"every row priced with the whole calibration/{kp.PUBLISHED_FILE} (its own team's K̄ "
                                    "included): what the product gives, not out of sample",
                          "by_method": score(table, base, "in_sample_"),
                          "by_kbar_kind": by_kind(table, base, "in_sample_kbar_kind", "in_sample_")},
            "table": table}  # fmt: skip
