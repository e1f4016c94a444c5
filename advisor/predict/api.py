"""Public API of the predictor: ``predict`` (gain, interval, P(win), K̄, R, why) and ``decide``.

The rules engine may forbid suffix outright; where the rules leave room, ``decide`` turns a
Prediction into suffix on / off.
"""

from __future__ import annotations

import hashlib
import json
import math

from advisor.domain.corpora import SEED_CORPORA
from advisor.domain.prediction import HostState, Prediction
from advisor.domain.workload import Workload
from advisor.hardware.gpus import GpuSpec
from advisor.model.schema import ModelProfile

WIN_THRESHOLD = 0.5
"""Suffix is chosen when P(win) exceeds this (the evaluation's rule: it maximises expected log throughput)."""
INTERVAL_Z = 1.6449
"""90 % central interval of log gain."""
_CACHE: dict[str, object] = {}


def decide_p(p_win: float, threshold: float = WIN_THRESHOLD) -> bool:
    """Suffix on when P(win) > threshold."""
    return p_win > threshold


def decide(prediction: Prediction, threshold: float = WIN_THRESHOLD) -> bool:
    """True = enable suffix decoding (where the rules leave the choice open)."""
    return decide_p(prediction.p_win, threshold)


def _records_key(records) -> str:
    if not records:
        return "seed"
    h = hashlib.sha256()
    for r in records:
        h.update(f"{r.campaign_id}|{r.config}|{r.outcome}|{r.throughput_tok_s}|{r.started_at}".encode())
    return h.hexdigest()


def _fit_key(records) -> str:
    """Content hash of everything a fit depends on: calibration data, GPU table, the predictor's
    and the profile's code, and the probe records."""
    from pathlib import Path

    from advisor.paths import data_path

    h = hashlib.sha256(_records_key(records).encode())
    pkg = Path(__file__).resolve().parent.parent
    files = sorted(data_path("calibration").glob("*.csv")) + [data_path("catalog") / "gpus.yaml"]
    files += sorted((pkg / "predict").glob("*.py")) + sorted((pkg / "model").glob("*.py"))
    for path in files:
        h.update(path.name.encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:24]


def calibrated_model(records=None, profile_of=None, *, cache_dir=None):
    """The model fitted on the seed sweep (+ probe records), cached in-process by the records' content.

    With ``cache_dir`` the fitted coefficients are also kept as JSON (never pickle) under a content
    hash, so a cold process skips the scikit-learn import and the fit; any change to the data or
    the predictor's code changes the hash and forces a refit.
    """
    from advisor.predict.calibrated import CalibratedModel

    key = _records_key(records)
    if key in _CACHE:
        return _CACHE[key]
    path = None
    if cache_dir is not None and profile_of is None:
        from pathlib import Path

        path = Path(cache_dir) / f"calibrated-{_fit_key(records)}.json"
        if path.is_file():
            cached = _read_cache(path)
            if cached is not None:
                _CACHE[key] = cached
                return cached
            path.unlink(missing_ok=True)  # a corrupt or edited cache is refitted, never trusted
    from advisor.predict.calibrated import fit
    from advisor.predict.dataset import default_profile_of, probe_observations, seed_observations

    profile_of = profile_of or default_profile_of()
    obs = seed_observations(replicates=True) + probe_observations(records or [], profile_of)
    model = _CACHE[key] = fit(obs, profile_of)
    if path is not None:
        import os
        import tempfile

        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".calibrated-")
            body = model.model_dump_json()
            with os.fdopen(fd, "w") as fh:
                json.dump({"content_sha256": hashlib.sha256(body.encode()).hexdigest(), "model": body}, fh)
            os.replace(tmp, path)
        except OSError:
            pass  # a read-only data dir only costs the next process a refit
    return model


def _read_cache(path):
    """The CalibratedModel in a cache file written by :func:`calibrated_model`, or None when the file
    is unreadable, malformed, or its content does not match the SHA-256 stored beside it."""
    from advisor.predict.calibrated import CalibratedModel

    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        body = doc["model"]
        if not isinstance(body, str) or hashlib.sha256(body.encode()).hexdigest() != doc["content_sha256"]:
            return None
        return CalibratedModel.model_validate_json(body)
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _phi(x: float) -> float:
    return 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))


def predict(
    profile: ModelProfile,
    gpu: GpuSpec,
    tensor_parallel_size: int,
    workload: Workload,
    *,
    host_state: HostState | None = None,
    k: int = 32,
    records=None,
    cache_dir=None,
    fitted=None,
    build: str | None = None,
) -> Prediction:
    """Predict the suffix gain for ``profile`` on ``tensor_parallel_size`` × ``gpu`` under ``workload``
    (with ``fitted``, a given CalibratedModel, e.g. a leave-one-model-out fit, instead of the shipped one;
    with ``build``, that build's suffix-step costs only, else the mean of both builds)."""
    from advisor.predict.calibrated import RowInputs
    from advisor.predict.explain import explain

    model = fitted or calibrated_model(records, cache_dir=cache_dir)
    corpus = None if workload.corpus_is_file else workload.corpus
    base = RowInputs(profile=profile, gpu=gpu, tp=tensor_parallel_size, corpus=corpus, host_state=host_state or "OFF",
                     concurrency=workload.concurrency, k=k, k_bar=workload.k_bar,
                     k_bar_k=workload.k_bar_k)  # fmt: skip
    states = [host_state] if host_state else ["OFF", "ON"]
    rows = [model.predict_row(base.model_copy(update={"host_state": s})) for s in states]
    seed_rows = [model.predict_row(base.model_copy(update={"host_state": s, "build": "seed"})) for s in states]
    mu_release = sum(r.mu for r in rows) / len(rows)
    mu_seed = sum(r.mu for r in seed_rows) / len(seed_rows)
    # The two builds' suffix-step costs are both evidence (stepcost.SPEC_STEP_COSTS): predict their
    # mean and widen the interval by half their gap, so a disagreement lands in the probe band.
    mu = (mu_release + mu_seed) / 2
    build_spread = abs(mu_release - mu_seed) / 2
    if build is not None:  # a known build: its own costs, no spread between builds
        mu, build_spread = (mu_seed if build == "seed" else mu_release), 0.0
        rows = seed_rows if build == "seed" else rows
    spread = (max(r.mu for r in rows) - min(r.mu for r in rows)) / 2
    sigma = math.hypot(rows[0].sigma, spread, build_spread)
    row = rows[0]
    source = row.k_bar_source
    if workload.k_bar:
        source = f"measured ({workload.k_bar_source or 'given'})" + row.k_bar_source.removeprefix("measured")
    elif workload.corpus and workload.corpus_is_file:
        source += "; trace file given without a measured K̄: run `advisor kbar` on it"
    elif workload.corpus and workload.corpus not in SEED_CORPORA:
        source += f"; corpus {workload.corpus!r} is not a seed corpus"
    return Prediction(
        gain=round(math.exp(mu), 4),
        gain_low=round(math.exp(mu - INTERVAL_Z * sigma), 4),
        gain_high=round(math.exp(mu + INTERVAL_Z * sigma), 4),
        p_win=round(_phi(mu / sigma), 4),
        k_bar=round(row.k_bar, 4),
        k_bar_source=source,
        r=round(row.r.r, 4),
        host_state=host_state,
        draft_tokens=round(row.r.draft_tokens, 3),
        context_tokens=round(row.context, 1),
        spec_graph_mode=row.r.spec.graph_mode,
        mla_prefill_ms=round(row.r.spec.t_mla_prefill * 1e3, 3),
        calibration_shift=round(math.exp(sum(r.delta for r in rows) / len(rows)), 4),
        model_seen=row.model_seen,
        r_seed_build=round(seed_rows[0].r.r, 4),
        build_spread=round(build_spread, 4),
        explanation=explain(profile, gpu, tensor_parallel_size, rows, host_state) + [
            f"suffix-step costs: R {row.r.r:.2f} with the costs MEASURED on vLLM 0.26.0 (H200; async scheduling is off with "
            f"suffix, so drafting and scheduling are serialised: {row.r.spec.t_spec_fixed * 1e3:.1f} ms per step + "
            f"{row.r.spec.t_draft * 1e3:.1f} ms for {workload.concurrency} sequences), R {seed_rows[0].r.r:.2f} with the seed "
            f"build's ASSUMED costs; the prediction is their mean, the interval widened by {build_spread:.2f} in log gain"]
        + _extrapolation(workload, tensor_parallel_size, gpu),
    )


def _extrapolation(workload: Workload, tp: int, gpu: GpuSpec) -> list[str]:
    """Plain words for where this prediction leaves the calibration data (seed: B200, TP 8, concurrency 32)."""
    from advisor.predict.dataset import SEED_CONCURRENCY, SEED_GPU, SEED_TP

    out = []
    if workload.concurrency != SEED_CONCURRENCY:
        out.append(f"concurrency {workload.concurrency}: the seed measured gains only at {SEED_CONCURRENCY}, so the trend "
                   "over concurrency comes from the step-cost model (step times, not gains: the gain at this "
                   "concurrency is NOT FITTED to measurements; published studies see suffix gains shrink as "
                   "concurrency rises): probe at your concurrency before relying on it")  # fmt: skip
    if tp != SEED_TP:
        out.append(f"TP {tp}: the seed measured only TP {SEED_TP} (on {SEED_GPU}); the difference is carried by the "
                   "step-cost model, NOT FITTED to measurements")  # fmt: skip
    return out
