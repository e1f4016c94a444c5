"""The numbers behind the report's figures, taken from the product's own code paths (no plotting).

- K–R plane: every seed row and probe observation as (R, K̄) through the predictor's dataset
  (:func:`advisor.predict.kbar_prior.implied_kbar`: K̄ = gain × R(K̄), or the measured K̄ of a probe)
  and the step-cost model's R at that K̄ (the same call ``_solve_kbar`` makes).
- Predicted vs measured: the leave-one-model-out rows of :func:`advisor.calibrate.evaluate.evaluate`
  (kept with the seed's K–R points as JSON under the data dir's ``cache/``, keyed by content like the
  calibrated model, because 10 fits take seconds), probes predicted by the seed-only fit (out of
  sample), and the GPU step grid of :func:`advisor.calibrate.gpu_steps.evaluate` (R predicted vs measured).
- Memory: :func:`advisor.plan.memory.plan_memory` terms for the chosen decision and its alternatives.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from advisor.model.schema import ModelProfile
from advisor.predict.dataset import Observation, ProfileFn

SMALLEST_ALT_K = 4
"""The smallest K drawn beside the chosen one in the memory figure (:func:`alt_ks`)."""


def alt_ks() -> tuple[int, ...]:
    """K values drawn beside the chosen one in the memory figure: the decider's default K and the lower Ks its
    layout search falls back to (rules/policy/decider.yaml), and :data:`SMALLEST_ALT_K`."""
    from advisor.rules.policy import load_policy

    pol = load_policy()
    return tuple(sorted({SMALLEST_ALT_K, *pol.suffix_k_fallback, pol.num_speculative_tokens}))


class KRPoint(BaseModel):
    """One measured comparison on the K–R plane."""

    model_config = ConfigDict(extra="forbid")

    label: str
    corpus: str | None
    host_state: str
    k_bar: float
    r: float
    gain: float
    arch: str
    source: str


def kr_point(obs: Observation, profile: ModelProfile) -> KRPoint:
    """(R, K̄) of an observation as the predictor's dataset sees it."""
    from advisor.hardware.gpus import get_gpu
    from advisor.predict.kbar_prior import draft_tokens, implied_kbar, shape_for
    from advisor.predict.stepcost import r_ratio

    kb = implied_kbar(obs, profile)
    ctx = shape_for(obs.corpus).context(profile.family)
    r = r_ratio(profile, get_gpu(obs.gpu), obs.tp, concurrency=obs.concurrency, draft_tokens=draft_tokens(kb, obs.k),
                context=ctx, k=obs.k, build=obs.build).r  # fmt: skip
    return KRPoint(label=obs.label, corpus=obs.corpus, host_state=obs.host_state, k_bar=round(kb, 4), r=round(r, 4),
                   gain=round(obs.gain, 4), arch=profile.arch, source=obs.source)  # fmt: skip


def seed_kr(profile_of: ProfileFn) -> list[KRPoint]:
    """The seed sweep's rows (one per model × corpus × host state; the DSA-env replicate left out)."""
    from advisor.predict.dataset import seed_observations

    return [kr_point(o, profile_of(o.model)) for o in seed_observations(replicates=False)]


def host_probes(settings, fingerprint: str | None) -> tuple[list, str]:
    """(ok probe records measured on this host, a note on what was left out)."""
    from advisor.probe.store import open_store, store_path

    path = store_path(settings)
    if not path.is_file():
        return [], f"no probe store at {path} yet (`advisor probe` or `recommend --probe` fills it)"
    with open_store(settings) as store:
        records = [r for r in store.list_records() if r.outcome == "ok"]
    here = [r for r in records if fingerprint is None or r.host_fingerprint == fingerprint]
    other = len(records) - len(here)
    note = f"{len(here)} ok probe record(s) of this host in {path}"
    if other:
        note += f"; {other} of other hosts (another fingerprint) not shown"
    return here, note


def probe_points(records: list, profile_of: ProfileFn) -> list[tuple[Observation, KRPoint]]:
    """Paired suffix/vanilla probe observations with their K–R points."""
    from advisor.predict.dataset import probe_observations

    return [(o, kr_point(o, profile_of(o.model))) for o in probe_observations(records, profile_of)]


def probe_checks(pairs: list[tuple[Observation, KRPoint]], profile_of: ProfileFn, cache_dir: Path | None) -> list[dict]:
    """Each probe's measured gain against the seed-only fit's prediction (the probe is not in that fit)."""
    from advisor.predict.api import calibrated_model
    from advisor.predict.calibrated import inputs_for

    if not pairs:
        return []
    model = calibrated_model(None, cache_dir=cache_dir)
    out = []
    for o, _pt in pairs:
        pred = model.predict_row(inputs_for(o, profile_of(o.model)), model_id=o.model)
        out.append({"label": f"{o.label} {o.corpus} K={o.k}", "host_state": o.host_state, "gain": round(o.gain, 4),
                    "predicted_gain": round(math.exp(pred.mu), 4), "source": o.source})  # fmt: skip
    return out


def _cache_key() -> str:
    """The calibrated model's content key (calibration CSVs, GPU table, predictor and profile code)
    plus the bundled model configs the seed rows resolve to and this module's code."""
    import hashlib

    from advisor.paths import data_path
    from advisor.predict.api import _fit_key

    h = hashlib.sha256(_fit_key(None).encode())
    grid = sorted(p for p in (data_path("calibration") / "gpu_steps").rglob("*") if p.is_file())
    for path in [*sorted(data_path("catalog").rglob("config.json")), *grid, Path(__file__)]:
        h.update(str(path.relative_to(path.parents[1])).encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:24]


def seed_evidence(profile_of: ProfileFn, cache_dir: Path | None, progress: Callable[[str], None] | None = None) -> dict:
    """``{"lomo": evaluate(), "seed_kr": [KRPoint], "grid": gpu_steps.evaluate()}``: the
    leave-one-model-out evaluation of :func:`advisor.calibrate.evaluate.evaluate` (10 fits: seconds),
    the seed's K–R points and the GPU step grid's evaluation (a grid search per held-out
    concurrency), kept as JSON under ``cache_dir`` by content (any change to the data or the code
    recomputes them)."""
    path = Path(cache_dir) / f"report-seed-{_cache_key()}.json" if cache_dir is not None else None
    if path is not None and path.is_file():
        try:
            data = json.loads(path.read_text())
            return {"lomo": data["lomo"], "seed_kr": [KRPoint.model_validate(p) for p in data["seed_kr"]], "grid": data["grid"]}
        except (OSError, ValueError, KeyError, TypeError):
            pass  # a corrupt cache is recomputed, never trusted
    from advisor.calibrate.evaluate import evaluate

    res = {"lomo": evaluate(profile_of, progress=progress), "seed_kr": seed_kr(profile_of), "grid": gpu_grid(profile_of)}
    if path is not None:
        from advisor.atomic import write_one
        from advisor.errors import OutputError

        try:
            write_one(path, json.dumps({**res, "seed_kr": [p.model_dump() for p in res["seed_kr"]]}))
        except OutputError:
            pass  # a read-only data dir only costs the next report the evaluation
    return res


def lomo_rows(res: dict) -> list[dict]:
    """The held-out rows (model label, corpus, host state, measured and predicted gain)."""
    return [{**row, "label": label} for label, entry in res["per_model"].items() for row in entry["rows"]]


def median_abs_log(pairs: list[tuple[float, float]]) -> float | None:
    """Median |log(predicted / measured)| (None when empty)."""
    xs = [abs(math.log(p / m)) for p, m in pairs if p and m]
    return round(statistics.median(xs), 4) if xs else None


def gpu_grid(profile_of: ProfileFn) -> dict:
    from advisor.paths import data_path
    from advisor.calibrate import gpu_steps

    return gpu_steps.evaluate(data_path("calibration"), profile_of)


class MemoryBar(BaseModel):
    """One configuration's per-GPU start-up memory."""

    model_config = ConfigDict(extra="forbid")

    label: str
    chosen: bool
    boots: bool
    terms_gib: dict[str, float]
    kv_cache_tokens: int
    reason: str


def _spec_label(decision) -> str:
    m = decision.speculative_method
    return f"{m} K={decision.num_speculative_tokens}" if m else "no speculation"


def memory_bars(rec, profile: ModelProfile) -> list[MemoryBar]:
    """The recommendation's own plan (``rec.memory``) first, then the same decision without
    speculation and with the other K values of :func:`alt_ks`, each planned without the alternative search;
    when the chosen one does not boot, also the planner's smallest TP that does (more GPUs than given)."""
    from advisor.hardware.gpus import get_gpu
    from advisor.plan.memory import plan_memory

    if rec.memory is None:
        return []
    d = rec.decision
    bars = [MemoryBar(label=f"chosen: {_spec_label(d)}", chosen=True, boots=rec.memory.boots, terms_gib=rec.memory.terms_gib,
                      kv_cache_tokens=rec.memory.kv_cache_tokens, reason=rec.memory.reason)]  # fmt: skip
    alts = []
    if d.speculative_method:
        alts.append(d.model_copy(update={"speculative_method": None, "num_speculative_tokens": None}))
    alts += [d.model_copy(update={"speculative_method": "suffix", "num_speculative_tokens": k})
             for k in alt_ks() if not (d.speculative_method == "suffix" and d.num_speculative_tokens == k)]  # fmt: skip
    gpu = get_gpu(rec.host.gpu)
    runs = [(alt, _spec_label(alt), rec.host.gpus) for alt in alts]
    need = rec.memory.min_gpus_for_weights
    if not rec.memory.boots and need and need > rec.host.gpus:  # what it takes: the planner's smallest TP
        plain = d.model_copy(update={"speculative_method": None, "num_speculative_tokens": None, "tensor_parallel_size": need})
        runs.append((plain, f"no speculation, TP {need} ({need} GPUs)", need))
    for alt, label, gpus in runs:
        plan = plan_memory(profile, gpu, alt, num_gpus=gpus, search=False)
        bars.append(MemoryBar(label=label, chosen=False, boots=plan.boots, terms_gib=plan.terms_gib,
                              kv_cache_tokens=plan.kv_cache_tokens, reason=plan.reason))  # fmt: skip
    return bars


def _number(value) -> float | None:
    """A figure that may be a number or ``{value|mid|median, low, high}``."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, dict):
        for key in ("value", "mid", "median", "point"):
            if isinstance(value.get(key), (int, float)):
                return float(value[key])
    return None


def _find(cand: dict, names: tuple[str, ...]) -> float | None:
    for name in names:
        for where in (cand, cand.get("prediction") if isinstance(cand.get("prediction"), dict) else {}):
            if name in where and _number(where[name]) is not None:
                return _number(where[name])
    return None


def layout_candidates(rec_json: dict) -> list[dict] | None:
    """The layout search's ``candidates`` (issue 15) normalised for plotting, or None when the
    recommendation has none. Figures are read by name (``throughput_tok_s``, ``tpot_ms``, with or
    without a ``prediction`` sub-object, plain or ``{value, low, high}``); a candidate without them
    is still listed in the table."""
    raw = rec_json.get("candidates")
    if not raw or not isinstance(raw, list):
        return None
    cands = [c for c in raw if isinstance(c, dict)]
    flagged = any("chosen" in c or "selected" in c for c in cands)  # else: best first, as the search ranks them
    out = []
    for i, cand in enumerate(cands):
        label = cand.get("label") or cand.get("layout") or cand.get("name")
        if not isinstance(label, str):
            parts = [f"{k}={cand[k]}" for k in ("tensor_parallel_size", "tp", "data_parallel_size", "dp", "speculative_method",
                                                "num_speculative_tokens") if cand.get(k) is not None]  # fmt: skip
            label = " ".join(parts) or f"candidate {i + 1}"
        chosen = bool(cand.get("chosen") or cand.get("selected")) if flagged else i == 0
        out.append({
            "label": label, "chosen": chosen,
            "throughput_tok_s": _find(cand, ("throughput_tok_s", "throughput")),
            "tpot_ms": _find(cand, ("tpot_ms", "tpot")),
            "boots": cand.get("boots", (cand.get("memory") or {}).get("boots") if isinstance(cand.get("memory"), dict) else None),
            "method": _method(cand),
            "why": _why(cand, chosen),
        })  # fmt: skip
    return out


def _method(cand: dict) -> str:
    """The candidate's speculative method, "plain" for none."""
    pred = cand.get("prediction") if isinstance(cand.get("prediction"), dict) else {}
    m = cand.get("speculative_method") or pred.get("method")
    return m if isinstance(m, str) and m not in ("none", "plain", "") else "plain"


def _interval(value) -> dict | None:
    """``{value, low, high}`` of a figure given plain or as an interval (None when absent)."""
    v = _number(value)
    if v is None:
        return None
    lo, hi = (value.get("low"), value.get("high")) if isinstance(value, dict) else (None, None)
    return {"value": v, "low": _number(lo), "high": _number(hi)}


def launched_figures(rec_json: dict) -> dict | None:
    """What the page's first cards show: the predicted figures of the configuration launched (the
    layout search's chosen candidate, else the recommendation's own prediction), by name as
    :func:`layout_candidates` reads them; None when neither carries any."""
    cands = layout_candidates(rec_json) or []
    raw = [c for c in rec_json.get("candidates") or [] if isinstance(c, dict)]
    src = next((r for r, c in zip(raw, cands) if c["chosen"]), None) or {}
    where = [src, src.get("prediction") if isinstance(src.get("prediction"), dict) else {}]
    if not src:
        where = [rec_json.get("prediction") or {}]
    out = {}
    for key in ("throughput_tok_s", "tpot_ms", "ttft_ms", "speculative_gain"):
        out[key] = next((_interval(w[key]) for w in where if key in w and _interval(w[key])), None)
    if not any(out.values()):
        return None
    return {**out, "label": src.get("label")}


def _why(cand: dict, chosen: bool) -> str:
    """The layout search's own words (``why_not``: ineligible, ``why_lost``: against the winner), or
    what made the chosen one win (its objective, and the limits it meets when there are any)."""
    for key in ("why", "why_not", "why_lost", "reason", "lost_because"):
        if isinstance(cand.get(key), str) and cand[key]:
            return cand[key]
    if chosen:
        objective = (cand.get("prediction") or {}).get("objective") if isinstance(cand.get("prediction"), dict) else None
        best = {"throughput": "the highest host throughput", "latency": "the lowest request latency"}.get(objective or "")
        return f"chosen: {best} of the eligible candidates" if best else "chosen"
    return ""
