"""Assemble the report page: the Recommendation ``recommend`` built, its evidence, the figures, HTML."""

from __future__ import annotations

import shlex
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

from advisor import __version__
from advisor.domain.prediction import RecommendedPrediction
from advisor.model.schema import ModelProfile
from advisor.report import evidence as ev

TEMPLATE = "report.html.j2"


def _rec_point(prediction: RecommendedPrediction | None) -> dict | None:
    """The recommendation on the K–R plane, drawn at its R (the host profile's, or the geometric mean
    over the known profiles for an unknown host), at K̄ = gain × R (where the seed rows sit: their K̄
    is implied the same way) with the 90 % interval; ``r_low``/``r_high`` span R over the known host
    profiles (``r_release``: the measured H200 profile, ``r_seed``: the seed host's)."""
    if not prediction:
        return None
    rs = prediction.r_profiles or {"": prediction.r}
    r_rel = rs.get("h200-vllm0.26.0", prediction.r)
    r_seed = rs.get("seed-b200", prediction.r)
    r = prediction.r
    return {"r": r, "r_low": min(rs.values()), "r_high": max(rs.values()), "r_release": r_rel, "r_seed": r_seed,
            "r_caption": r_caption(r, prediction.r_profiles or {}, prediction.host_profile),
            "k_bar": prediction.k_bar, "k_eff": prediction.gain * r, "k_low": prediction.gain_low * r,
            "k_high": prediction.gain_high * r, "host_state": prediction.host_state}  # fmt: skip


def r_caption(r: float, profiles: dict[str, float], matched: str | None) -> str:
    """Where the star's R comes from, computed (issue 39: no caption that calls an R a mean it is not): the
    geometric mean of the host profiles' R only where it is one, else the matched profile's own R."""
    import math

    if len(profiles) >= 2:
        geo = math.exp(sum(math.log(v) for v in profiles.values()) / len(profiles))
        if round(geo, 2) == round(r, 2):
            each = ", ".join(f"{k} R = {v:.2f}" for k, v in sorted(profiles.items()))
            return (f"Its gain is the mean (in log) of the predictions on {len(profiles)} host profiles ({each}), so it "
                    f"sits at their geometric mean R = {r:.2f}; the thin line spans them.")  # fmt: skip
    where = f"host profile {matched}" if matched else "the step-cost model"
    span = (f"; the thin line spans the known host profiles' R ({min(profiles.values()):.2f} to {max(profiles.values()):.2f})"
            if len(profiles) >= 2 else "")  # fmt: skip
    return f"It sits at R = {r:.2f} from {where}{span}."


def _launched_gain(decision, launched: dict | None, prediction: RecommendedPrediction | None) -> dict | None:
    """The predicted gain over plain decoding of the method launched (None for plain decoding): the
    chosen candidate's, else the suffix prediction's when suffix is what is launched."""
    if not decision.speculative_method:
        return None
    if launched and launched.get("speculative_gain"):
        return launched["speculative_gain"]
    if prediction and decision.speculative_method == "suffix":
        return {"value": prediction.gain, "low": prediction.gain_low, "high": prediction.gain_high}
    return None


def _rule_sets(fired: dict) -> list[str]:
    """What a fired rule sets, one ``key=value`` a line (a dict such as ``env`` one entry a line)."""
    out = []
    for k, v in fired.get("set", {}).items():
        out += [f"{k}.{kk}={vv}" for kk, vv in v.items()] if isinstance(v, dict) and v else [f"{k}={v}"]
    return out


def _host_rows(fp) -> list[tuple[str, str]]:
    rows = [("fingerprint", fp.fingerprint), ("host", f"{fp.hostname} (kernel {fp.kernel or '-'}, collected {fp.collected_at})")]
    for name in sorted({g.name for g in fp.gpus}):
        same = [g for g in fp.gpus if g.name == name]
        rows.append(("GPUs", f"{len(same)} x {name}, driver {', '.join(sorted({str(g.driver_version) for g in same}))}, "
                             f"CUDA {fp.cuda_version or '-'}"))  # fmt: skip
    if not fp.gpus:
        rows.append(("GPUs", "none detected"))
    v = fp.versions
    rows += [("CPU", f"{fp.cpu.model or '-'}, {fp.cpu.sockets or '-'} socket(s), {fp.cpu.threads or '-'} threads"),
             ("vLLM / torch / arctic-inference", f"{v.vllm or '-'} / {v.torch or '-'} / {v.arctic_inference or '-'}"),
             ("Intel DSA enabled queues", ", ".join(fp.dsa.enabled_queues) or "none")]  # fmt: skip
    rows += [("env", f"{k}={val}") for k, val in fp.env.items()]
    rows += [("missing", m) for m in fp.missing]
    return rows


def _errors(lomo: dict, seed_rows: list[dict], probes: list[dict], grid: dict) -> dict:
    """The error figures of ``calibrate --evaluate`` (and the medians of what is drawn)."""
    policies = [("predictor (held out)", lomo["lomo"])] + list(lomo["baselines"].items())
    out = {
        "policies": [{"name": n, **{f"{s}_{k}": sc[s][k] for s in ("OFF", "ON") for k in ("geo_frac", "min_frac", "accuracy")}}
                     for n, sc in policies],  # fmt: skip
        "seed_median": {s: ev.median_abs_log([(r["predicted_gain"], r["gain"]) for r in seed_rows if r["host_state"] == s])
                        for s in ("OFF", "ON")},  # fmt: skip
        "probe_median": ev.median_abs_log([(r["predicted_gain"], r["gain"]) for r in probes]),
        "grid": None,
    }
    if grid.get("available"):
        out["grid"] = {k: grid.get(k) for k in ("points", "plain_median_abs_log_step", "r_median_abs_log_before_refit",
                                                "r_median_abs_log_in_sample", "r_median_abs_log_leave_one_concurrency_out",
                                                "r_median_abs_log_leave_one_model_out", "r_bias_leave_one_model_out_by_class",
                                                "classes_biased_beyond_goal", "goal", "meets_goal", "leave_one_model_out_note",
                                                "models", "vllm_versions", "sources")}  # fmt: skip
    return out


def build_report(rec, profile: ModelProfile, settings, *, progress: Callable[[str], None] | None = None) -> str:
    """The HTML page of ``rec`` (the Recommendation ``recommend`` built for ``profile``)."""
    from advisor.hardware.host import collect_host
    from advisor.predict.dataset import default_profile_of
    from advisor.render.flags import serve_argv
    from advisor.report import figures

    say = progress or (lambda _msg: None)
    fp = collect_host(settings)
    profile_of = default_profile_of(settings)
    cache_dir = settings.data_dir / "cache"
    records, probe_note = ev.host_probes(settings, fp.fingerprint)
    pairs = ev.probe_points(records, profile_of)
    checks = ev.probe_checks(pairs, profile_of, cache_dir)
    seed_ev = ev.seed_evidence(profile_of, cache_dir, progress=lambda m: say(f"leave-one-model-out evaluation (cached after this run): {m}"))
    lomo, seed, grid = seed_ev["lomo"], seed_ev["seed_kr"], seed_ev["grid"]
    seed_rows = ev.lomo_rows(lomo)
    bars = ev.memory_bars(rec, profile)
    rec_json = rec.model_dump(mode="json")
    cands = ev.layout_candidates(rec_json)
    launched = ev.launched_figures(rec_json)
    say("drawing")
    d = rec.decision
    point = _rec_point(rec.prediction)
    if point and d.speculative_method != "suffix":  # the prediction is the launched method's (advisor.plan.choose)
        point["label"] = f"{d.speculative_method or 'plain decoding'} (launched), 90 %"
    cmd = shlex.join(serve_argv(rec.model["id"], d))
    if d.env:
        cmd = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(d.env.items())) + " " + cmd
    ctx = {
        "version": __version__,
        "generated": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "rec": rec_json,
        "spec": f"{d.speculative_method}, K={d.num_speculative_tokens}" if d.speculative_method else "off (plain decoding)",
        "launched": launched,
        "gain": _launched_gain(d, launched, rec.prediction),
        "layout": f"TP {d.tensor_parallel_size} · DP {d.data_parallel_size} · EP {'on' if d.enable_expert_parallel else 'off'}",
        "rule_sets": [_rule_sets(f) for f in rec_json["rules_fired"]],
        "command": cmd,
        "rec_point": point,
        "fig_kr": figures.kr_plane(seed, [pt for _o, pt in pairs], point),
        "fig_pvm": figures.predicted_vs_measured(seed_rows, checks, grid.get("table", []) if grid.get("available") else []),
        "fig_mem": figures.memory(bars, f"{rec.host.gpus}x{rec.host.gpu}") if bars else None,
        "bars": [b.model_dump() for b in bars],
        "cands": cands,
        "fig_cand": figures.candidates(cands) if cands else None,
        "pareto": rec_json.get("pareto") or [],
        "fig_pareto": figures.pareto(rec_json.get("pareto") or []),
        "seed_counts": {s: sum(p.host_state == s for p in seed) for s in ("OFF", "ON")},
        "probe_note": probe_note,
        "probes": checks,
        "errors": _errors(lomo, seed_rows, checks, grid),
        "lomo_method": lomo.get("method", ""),
        "host_rows": _host_rows(fp),
    }
    return render(ctx)


def render(ctx: dict) -> str:
    from jinja2 import Environment, FileSystemLoader, StrictUndefined
    from markupsafe import Markup

    from advisor.paths import data_path

    env = Environment(loader=FileSystemLoader(str(data_path("templates") / "report")), undefined=StrictUndefined,
                      autoescape=True, trim_blocks=True, lstrip_blocks=True, finalize=_inert)  # fmt: skip
    ctx = {**ctx, **{k: Markup(v) for k, v in ctx.items() if k.startswith("fig_") and v}}  # our own SVG, not user text
    return _inert(env.get_template(TEMPLATE).render(**ctx))


def _inert(value):
    """Every value on the page (and the page itself, SVG included) without bidi or control
    characters: HTML escaping leaves them, and a bidi override reorders what the reader sees."""
    from markupsafe import Markup

    from advisor.errors import printable

    if not isinstance(value, str):
        return value
    out = printable(value)
    return Markup(out) if isinstance(value, Markup) else out


def write_report(html: str, out: Path) -> Path:
    """Atomically (advisor.atomic): a reader never sees half a page."""
    from advisor.atomic import write_one

    return write_one(Path(out), html)
