"""Refit with probe records and report how the predictions for the probed configurations moved."""

from __future__ import annotations

import math

from advisor.predict.dataset import ProfileFn, probe_observations, seed_observations


def refit_report(records: list, profile_of: ProfileFn, *, store: str = "") -> dict:
    """Fit on the seed alone and on seed + probes; predict each probe observation with both.

    The probe's measured K̄ is not given to either model here (it would be the answer); what moves
    is the calibration (priors, coefficients, the probed model's own effect).
    """
    from advisor.predict.calibrated import fit, inputs_for

    seed = seed_observations(replicates=True)
    skipped: list[str] = []
    probes = probe_observations(records, profile_of, skipped)
    before = fit(seed, profile_of)
    after = fit(seed + probes, profile_of) if probes else before
    rows = []
    for o in probes:
        inputs = inputs_for(o, profile_of(o.model))
        b = before.predict_row(inputs, model_id=o.model)
        a = after.predict_row(inputs, model_id=o.model)
        rows.append({
            "model": o.model, "corpus": o.corpus, "host_state": o.host_state, "gpu": o.gpu, "tp": o.tp,
            "concurrency": o.concurrency, "k": o.k, "campaign": o.source.split(":", 1)[1],
            "measured_gain": round(o.gain, 4), "measured_k_bar": o.k_bar,
            "gain_before": round(math.exp(b.mu), 4), "gain_after": round(math.exp(a.mu), 4),
            "r": round(a.r.r, 4),
        })  # fmt: skip
    return {
        "store": store,
        "seed_rows": len(seed),
        "probe_rows": len(probes),
        "skipped": skipped,
        "coef_before": dict(zip(("intercept",), (before.intercept,))) | {"sigma_residual": before.sigma_residual},
        "coef_after": dict(zip(("intercept",), (after.intercept,))) | {"sigma_residual": after.sigma_residual},
        "rows": rows,
    }
