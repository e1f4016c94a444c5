"""Public API of the predictor: ``predict`` (gain, interval, P(win), K̄, R, why) and ``decide``.

The rules engine may forbid suffix outright; where the rules leave room, ``decide`` turns a
Prediction into suffix on / off.
"""

from __future__ import annotations

import hashlib
import json
import math

from advisor.domain.corpora import KNOWN_CORPORA
from advisor.domain.prediction import INTERVAL_Z, HostState, Prediction
from advisor.domain.workload import Workload
from advisor.predict.dataset import KBAR_FLOOR
from advisor.hardware.gpus import GpuSpec
from advisor.model.schema import ModelProfile
from advisor.rules.policy import load_policy

WIN_THRESHOLD = 0.5
"""Suffix is chosen when P(win) exceeds this (the evaluation's rule: it maximises expected log throughput)."""
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
    k: int | None = None,
    records=None,
    cache_dir=None,
    fitted=None,
    build: str | None = None,
    cpu_model: str | None = None,
    vllm_version: str | None = None,
) -> Prediction:
    """Predict the suffix gain for ``profile`` on ``tensor_parallel_size`` × ``gpu`` under ``workload``
    (with ``fitted``, a given CalibratedModel, e.g. a leave-one-model-out fit, instead of the shipped one) at suffix
    K = ``k`` (None: the decider's, rules/policy/decider.yaml ``num_speculative_tokens``).

    The host's speculative-step cost comes from its host profile (advisor.predict.host_profile):
    ``build`` names one outright; otherwise the profile matching ``gpu`` / ``cpu_model`` /
    ``vllm_version``. A host matched only in part (or not at all) is predicted with that profile (or
    the mean over all known ones) and its interval carries half the range over the known profiles."""
    from advisor.predict import host_profile as hp
    from advisor.predict.calibrated import RowInputs
    from advisor.predict.explain import explain

    k = load_policy().num_speculative_tokens if k is None else k
    model = fitted or calibrated_model(records, cache_dir=cache_dir)
    corpus = None if workload.corpus_is_file else workload.corpus
    if build is not None:
        given = hp.get(build)
        match = hp.HostMatch(kind="given", profiles=[given.id], note=f"host profile {given.id} (given)")
    else:
        match = hp.match(gpu.name, cpu_model, vllm_version)
    # A host no profile matches is none of theirs: each profile prices its R, no host class's fitted terms apply.
    unmatched = f"unmatched {gpu.name}" if match.kind == "none" else None
    base = RowInputs(profile=profile, gpu=gpu, tp=tensor_parallel_size, corpus=corpus, host_state=host_state or "OFF",
                     concurrency=workload.concurrency, k=k, k_bar=workload.k_bar,
                     k_bar_k=workload.k_bar_k, host_class=unmatched)  # fmt: skip
    states = [host_state] if host_state else ["OFF", "ON"]
    known = [p.id for p in hp.known()]
    ids = list(dict.fromkeys(match.profiles + known))
    by_profile = {pid: [model.predict_row(base.model_copy(update={"host_state": s, "build": pid})) for s in states]
                  for pid in match.profiles}  # fmt: skip
    # The other known profiles are priced at the same K̄, so the host spread is the hosts' (R), not K̄'s source.
    same_k = base.model_copy(update={"k_bar": by_profile[match.profiles[0]][0].k_bar, "k_bar_k": k})
    by_profile.update({pid: [model.predict_row(same_k.model_copy(update={"host_state": s, "build": pid})) for s in states]
                       for pid in ids if pid not in by_profile})  # fmt: skip
    mu_of = {pid: sum(r.mu for r in rows) / len(rows) for pid, rows in by_profile.items()}
    used = match.profiles
    mu = sum(mu_of[pid] for pid in used) / len(used)
    # A host not matched exactly carries the spread of the known profiles: which one it resembles is
    # what a probe on it would measure.
    per_state = [[rows[i].mu for rows in by_profile.values()] for i in range(len(states))]
    host_spread = 0.0 if match.kind in ("exact", "given") else max((max(m) - min(m)) / 2 for m in per_state)
    rows = by_profile[used[0]]
    spread = (max(r.mu for r in rows) - min(r.mu for r in rows)) / 2
    # a host class whose repeated probes measured R's run-to-run spread carries it (HostProfile.suffix_run_sigma)
    run_sigma = hp.run_sigma_of(used, "suffix")
    sigma = math.hypot(rows[0].sigma, spread, host_spread, run_sigma)
    row = rows[0]
    # The three printed parts, each over the same rows as mu (the matched profiles x the host states): K̄ and R their
    # geometric means, the fitted factor exp(mean of the fitted terms δ); mu = ln K̄ - ln R + δ row by row (offset +
    # delta, calibrated.predict_row), so the parts multiply to the gain by construction of the terms, not by a residual.
    mine = [r for pid in used for r in by_profile[pid]]
    k_bar = math.exp(sum(math.log(max(r.k_bar, KBAR_FLOOR)) for r in mine) / len(mine))
    r_eff = math.exp(sum(math.log(r.r.r) for r in mine) / len(mine))
    fitted_factor = math.exp(sum(r.delta for r in mine) / len(mine))
    applied = any(r.fitted_applied for pid in used for r in by_profile[pid])
    source = row.k_bar_source
    if workload.k_bar:
        source = f"measured ({workload.k_bar_source or 'given'})" + row.k_bar_source.removeprefix("measured")
    elif workload.corpus and workload.corpus_is_file:
        source += "; trace file given without a measured K̄: run `advisor kbar` on it"
    elif workload.corpus and workload.corpus not in KNOWN_CORPORA:
        source += f"; corpus {workload.corpus!r} is not a known corpus"
    profiles_used = [hp.get(pid) for pid in used]
    r_source = "; ".join(f"step-cost model + host profile {p.id} (suffix step {p.suffix_step_s * 1e3:.2f} ms + "
                         f"{p.suffix_per_seq_s * 1e6:.0f} us/seq: {p.provenance.split(';')[0]})" for p in profiles_used)  # fmt: skip
    if len(used) > 1:
        r_source = "geometric mean over " + r_source
    if run_sigma:
        r_source += f"; run to run sigma(ln R) {run_sigma:.2f} MEASURED on this host class, in the interval"
    ff_source = ("fitted terms of the calibrated model (" + ", ".join(sorted(row.terms)) + f"), fitted on {', '.join(model.fitted_hosts)}"
                 if applied else
                 f"none: the fitted terms apply only on the host class they were fitted on ({', '.join(model.fitted_hosts)})")  # fmt: skip
    if len(states) > 1:
        ff_source += "; host state unknown: OFF and ON averaged"
    from advisor.domain.prediction import Decomposition

    return Prediction(
        gain=round(math.exp(mu), 4),
        gain_low=round(math.exp(mu - INTERVAL_Z * sigma), 4),
        gain_high=round(math.exp(mu + INTERVAL_Z * sigma), 4),
        p_win=round(_phi(mu / sigma), 4),
        k_bar=round(row.k_bar, 4),
        k_bar_source=source,
        k_bar_kind=row.k_bar_kind,
        k_bar_published_source_id=row.k_bar_published_source_id,
        k_bar_sigma=round(row.k_bar_sigma, 4),
        k_bar_host=round(row.k_bar_host, 4) if row.k_bar_host is not None else None,
        r=round(r_eff, 4),
        host_state=host_state,
        draft_tokens=round(row.r.draft_tokens, 3),
        context_tokens=round(row.context, 1),
        spec_graph_mode=row.r.spec.graph_mode,
        mla_prefill_ms=round(row.r.spec.t_mla_prefill * 1e3, 3),
        calibration_shift=round(fitted_factor, 4),
        model_seen=row.model_seen,
        decomposition=Decomposition(k_bar=round(k_bar, 4), r=round(r_eff, 4), fitted_factor=round(fitted_factor, 4),
                                    sources={"k_bar": source, "r": r_source, "fitted_factor": ff_source}),
        host_profile=",".join(used),
        host_match=match.kind,
        r_profiles={pid: round(by_profile[pid][0].r.r, 4) for pid in ids},
        host_spread=round(host_spread, 4),
        explanation=explain(profile, gpu, tensor_parallel_size, rows, host_state) + [
            f"host: {match.note}; R under each known profile: "
            + ", ".join(f"{pid} {by_profile[pid][0].r.r:.2f}" for pid in ids)
            + (f"; interval widened by {host_spread:.2f} in log gain" if host_spread else "")]
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
