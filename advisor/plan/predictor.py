"""The real :class:`~advisor.plan.seams.Predictor`: the K > R prediction a Recommendation carries, with what probes on this host measured for this deployment (pure: the probe
records and the host's fingerprint are handed in by the caller, advisor.cli.wiring)."""

from __future__ import annotations

from pathlib import Path

from advisor.domain.host import HostContext
from advisor.domain.prediction import RecommendedPrediction
from advisor.domain.workload import Workload
from advisor.model.schema import ModelProfile
from advisor.hardware.gpus import get_gpu
from advisor.predict.api import predict


def predictor(profile: ModelProfile, host: HostContext, workload: Workload, k: int, tp: int, *,
              cache_dir: Path | None = None, records=None, fingerprint=None,
              cpu_model: str | None = None) -> RecommendedPrediction | None:  # fmt: skip
    """The K > R prediction at tensor_parallel_size ``tp`` and K (None when the predictor declines,
    e.g. no data), with what probes measured for exactly this deployment
    (``measured``) and for nearly this one (``measured_near``: not used to decide)."""
    state = None if host.dsa_enabled is None else ("ON" if host.dsa_enabled else "OFF")
    pred = predict(profile, get_gpu(host.gpu), tp, workload, host_state=state, k=k, cache_dir=cache_dir, records=records,
                   vllm_version=host.vllm_version, cpu_model=cpu_model)  # fmt: skip
    if pred is None:
        return None
    scope = Scope(model=profile.id, corpus=workload.corpus, k=k, gpu=host.gpu, tp=tp, concurrency=workload.concurrency)
    measured, near = measured_gain(records or [], scope, fingerprint)
    data = class_checked(profile, pred.model_dump())
    return RecommendedPrediction.model_validate({**data, "measured": measured, "measured_near": near})


def class_checked(profile: ModelProfile, pred: dict) -> dict:
    """The prediction with what the out-of-sample check of its architecture class says (issue 39): a class whose R
    is biased beyond the policy's goal (held out by model, calibration/class_accuracy.csv) has the gain interval
    widened by that bias on the side it points to (R predicted low: the gain is over-predicted, the low end drops);
    such a class, or one whose R was never checked out of sample, has P(win) capped (rules/policy/decider.yaml
    p_win_cap_unchecked). The point prediction is not moved: the bias is one model's, the mechanism is not fixed."""
    import math

    from advisor.predict.class_accuracy import arch_class, r_check
    from advisor.rules.policy import load_policy

    pol = load_policy()
    cls = arch_class(profile)
    row = r_check(cls)
    out = dict(pred)
    notes = list(out.get("explanation") or [])
    if row is None:
        why = f"the {cls} class's R was never checked out of sample (calibration/class_accuracy.csv)"
    else:
        b = row.r_bias_lomo
        if abs(math.expm1(b)) <= pol.class_bias_goal:
            return out
        if b < 0:
            out["gain_low"] = round(out["gain_low"] * math.exp(b), 4)
        else:
            out["gain_high"] = round(out["gain_high"] * math.exp(b), 4)
        why = (f"the {cls} class's R is predicted {abs(math.expm1(b)) * 100:.0f}% {'low' if b < 0 else 'high'} out of sample "
               f"({row.r_points} points of {row.models.replace(';', ', ')} on {row.gpu}, each model held out): the gain's "
               f"{'low' if b < 0 else 'high'} end x{math.exp(b):.2f}")  # fmt: skip
    cap = pol.p_win_cap_unchecked
    if out.get("p_win") is not None and out["p_win"] > cap:
        out["p_win"] = cap
        why += f"; P(win) capped at {cap:.2f}"
    notes.append(f"class check: {why} (NOT FITTED: the point prediction is not moved)")
    out["explanation"] = notes
    return out


def _same_corpus(a: str | None, b: str | None) -> bool:
    if a is None or b is None:
        return False
    if a == b:
        return True
    pa, pb = Path(a).expanduser(), Path(b).expanduser()
    return pa.is_file() and pb.is_file() and pa.resolve() == pb.resolve()


class Scope:
    """The deployment a measurement must match to decide: model, traffic, K, GPU, TP, concurrency,
    this host's fingerprint and no per-configuration overrides."""

    def __init__(self, *, model: str, corpus: str | None, k: int, gpu: str, tp: int, concurrency: int) -> None:
        self.model, self.corpus, self.k, self.gpu, self.tp, self.concurrency = model, corpus, k, gpu, tp, concurrency


def _split(label: str) -> tuple[str, str]:
    base, _, overrides = label.partition("@")
    return base, overrides


def measured_gain(records, scope: Scope, fingerprint) -> tuple[dict | None, list[dict]]:
    """(exact, near): what probes measured for this model, traffic and K (vanilla and suffix:K of one
    campaign, both ok). ``exact`` pools the campaigns that match every part of ``scope`` (None when
    none does); a measurement on the user's host outranks the prediction
    (advisor.plan.recommend._speculate). ``near`` lists the others with what differs; they are not
    used to decide. ``fingerprint`` is called (once, only when there is a candidate) for this host's."""
    import math

    by_campaign: dict[str, list] = {}
    for r in records:
        if r.outcome == "ok" and r.throughput_tok_s and r.model == scope.model and _same_corpus(r.corpus, scope.corpus):
            by_campaign.setdefault(r.campaign_id, []).append(r)
    exact, near, here = [], [], None
    for cid, recs in sorted(by_campaign.items()):
        for rec in recs:
            base, overrides = _split(rec.config)
            if base != f"suffix:{scope.k}":
                continue
            vans = [v for v in recs if _split(v.config) == ("vanilla", overrides)]
            if not vans:
                continue
            van = max(vans, key=lambda v: v.started_at)
            if here is None:
                here = fingerprint() if callable(fingerprint) else fingerprint
            differs = []
            if (rec.gpu or "none (CPU)").upper() != scope.gpu.upper():
                differs.append(f"GPU {rec.gpu or 'none (CPU)'} vs {scope.gpu}")
            if rec.tensor_parallel_size != scope.tp:
                differs.append(f"TP {rec.tensor_parallel_size} vs {scope.tp}")
            if rec.concurrency != scope.concurrency:
                differs.append(f"concurrency {rec.concurrency} vs {scope.concurrency}")
            if overrides:
                differs.append(f"overrides {overrides}")
            if not here or rec.host_fingerprint != here:
                differs.append("another host (fingerprint differs)" if here else "this host's fingerprint is unknown")
            hit = {"campaign": cid, "gain": rec.throughput_tok_s / van.throughput_tok_s,
                   "k_bar": rec.tokens_per_step or rec.mean_acceptance_length,
                   "fitted": bool(rec.gpu) and getattr(rec, "weights", "real") != "dummy"}  # fmt: skip
            (near if differs else exact).append(hit | ({"differs": differs} if differs else {}))
    near = [n | {"gain": round(n["gain"], 4)} for n in near]
    exact = [{k: v for k, v in h.items() if k != "fitted"} for h in exact]
    if not exact:
        return None, near
    gain = math.exp(sum(math.log(h["gain"]) for h in exact) / len(exact))
    kbars = [h["k_bar"] for h in exact if h["k_bar"]]
    return {
        "gain": round(gain, 4),
        "k_bar": round(sum(kbars) / len(kbars), 4) if kbars else None,
        "runs": len(exact),
        "campaigns": sorted({h["campaign"] for h in exact}),
    }, near
