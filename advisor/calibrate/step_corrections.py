"""Measured step corrections from verify records (issue 40, item 4): the lab's side of
advisor.predict.step_correction.

A point is one plain-decoding ``advisor verify`` run stored on the host that ran it (advisor.probe.verify_record
``used_for_correction``): ln(median inter-token latency / the decode step the physics predicts now for the answer's
running sequences and context, no correction applied (:func:`predicted_now`); for a record without them, the
answer's printed step with any correction it carried divided out). Points are grouped by host profile (advisor.predict.host_profile.match on the run's
GPU, CPU and vLLM; a run that matches no profile by GPU and vLLM line makes no point), model class, weights dtype
and TP (MoE classes: one replica only; dense replicas are independent). A group's factor is
exp(mean over its models of each model's mean ln), so a model measured at more loads does not outweigh another.

The one rule beyond the average: a run with dummy weights (``--load-format dummy``) of an MoE class says the step is
*at least* what it measured, not what it is: the router of random weights concentrates tokens on few experts, so a
dummy step reads fewer experts than a real one (campaign 14's compare.md, point 3: DeepSeek-V2-Lite's median ITL
below the time to read its routed experts once). A factor below 1 from such runs is kept and shown, not applied.

``fit`` makes the rows; ``evaluate`` scores them out of sample (leave one model out within each group: every model's
runs predicted with the factor of the group's other models; the trivial baseline is no correction) and reports each
figure's first-pass error by class. The shipped table (calibration/step_corrections.csv) is ``rebuild_text`` over the
committed campaigns' records (``calibration/manifests.yaml`` set ``verify_records``);
`advisor calibrate rebuild step_corrections [--check]` writes or checks it.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from advisor.predict import host_profile as hp
from advisor.predict.step_correction import FACTOR_BOUNDS, MATCHED, StepCorrection, render_rows
from advisor.probe.verify_record import FIGURES, VerifyRecord, used_for_correction

RECORDS_FILE = "verify_records.jsonl"
MANIFEST_SET = "verify_records"
USER_CAMPAIGN = "user store"
PROVENANCE = ("MEASURED: median inter-token latency of `vllm bench serve` runs (advisor verify) over the answer's "
              "predicted plain decode step; exp(mean over models of each model's mean ln ratio)")  # fmt: skip
DUMMY_MOE = ("dummy weights, MoE: a random router concentrates tokens on few experts, so a dummy step is a lower bound "
             "on the real one; a factor below 1 from it is not applied (calibration/serving_bench/h100-vllm0.26.0-c14/"
             "compare.md, point 3)")  # fmt: skip


class Point(BaseModel):
    """One run's ln(measured step / predicted step) and where it belongs."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    host_profile: str
    arch_class: str
    dtype: str
    tp: int
    model: str
    campaign: str
    label: str
    weights: str
    log_ratio: float

    def key(self) -> tuple[str, str, str, int]:
        return self.host_profile, self.arch_class, self.dtype, self.tp


def committed_records(calibration_dir: Path) -> tuple[list[VerifyRecord], list[str], list[str]]:
    """(the committed campaigns' verify records, their files relative to calibration/, lines left out with why)."""
    from advisor.calibrate import manifests

    root = calibration_dir / manifests.root(MANIFEST_SET)
    out, files, skipped = [], [], []
    for folder in manifests.folders(MANIFEST_SET):
        path = root / folder / RECORDS_FILE
        files.append(str(path.relative_to(calibration_dir.parent)))
        recs, bad = read_jsonl(path)
        out += recs
        skipped += bad
    return out, files, skipped


def read_jsonl(path: Path) -> tuple[list[VerifyRecord], list[str]]:
    """Verify records of a JSONL file; a line the schema refuses is left out and named."""
    from pydantic import ValidationError

    out, skipped = [], []
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            out.append(VerifyRecord.model_validate_json(line))
        except ValidationError as exc:
            first = exc.errors()[0]
            skipped.append(f"{path.name} line {i} left out: {'.'.join(map(str, first['loc']))}: {first['msg']}")
    return out, skipped


def _profile_gpu(r: VerifyRecord):
    """(the run's model profile, its GPU spec), or None where either cannot be resolved here."""
    from advisor.errors import AdvisorError
    from advisor.hardware.gpus import get_gpu
    from advisor.model.load import load_profile

    try:
        return load_profile(r.model), get_gpu(r.gpu)
    except AdvisorError:
        return None


def predicted_now(r: VerifyRecord) -> float | None:
    """The run's plain decode step in ms as the physics predicts it now, with no correction (the answer's running
    sequences and context on its GPU and TP), or None where the record does not say them (an older answer: its
    printed step, correction divided out, stands). A correction is the ratio to the physics it will multiply, so a
    physics change re-predicts the committed runs instead of stacking a factor fitted against the old one."""
    if r.running_per_replica is None or r.context_tokens is None or not r.gpu:
        return None
    from advisor.predict.absolute import ReplicaLayout, decode_step

    if (pg := _profile_gpu(r)) is None:
        return None
    p, gpu = pg
    step, _ = decode_step(p, gpu, ReplicaLayout(tp=r.tensor_parallel_size or 1), r.running_per_replica, r.context_tokens)
    return step * 1e3


def campaign_of(r: VerifyRecord) -> str:
    return r.campaign or USER_CAMPAIGN


def points(records: list[VerifyRecord]) -> tuple[list[Point], list[str]]:
    """(the runs that measure a step on a known host profile, one line per run left out with why)."""
    out, skipped = [], []
    for r in records:
        name = f"{campaign_of(r)}/{r.label or r.model}"
        why = used_for_correction(r)
        if why is None:
            m = hp.match(r.gpu or "", r.cpu_model, r.vllm_version)
            if m.kind not in MATCHED:
                why = f"no host profile of {r.gpu} with vLLM {r.vllm_version} (match: {m.kind}); measure one with advisor probe"
            elif r.arch_class != "dense" and (r.data_parallel_size or 1) > 1:
                why = "an MoE run over DP replicas: the replicas exchange tokens, which the class's TP-1 factor does not carry"
        if why is not None:
            skipped.append(f"{name}: {why}")
            continue
        pred, meas = r.step_point()
        now = predicted_now(r)
        pred = now if now is not None else pred
        out.append(Point(host_profile=m.profiles[0], arch_class=r.arch_class, dtype=r.weights_dtype,
                         tp=r.tensor_parallel_size or 1, model=r.model, campaign=campaign_of(r), label=r.label or r.model,
                         weights=r.weights, log_ratio=math.log(meas / pred)))  # fmt: skip
    return out, skipped


def _model_means(pts: list[Point]) -> dict[str, float]:
    by: dict[str, list[float]] = defaultdict(list)
    for p in pts:
        by[p.model].append(p.log_ratio)
    return {m: statistics.fmean(v) for m, v in sorted(by.items())}


def _row(pts: list[Point], source: str) -> StepCorrection | None:
    """The group's row (None: its factor is out of bounds, no correction but a broken run or model)."""
    host, cls, dtype, tp = pts[0].key()
    log = statistics.fmean(_model_means(pts).values())
    factor = math.exp(log)
    if not FACTOR_BOUNDS[0] < factor < FACTOR_BOUNDS[1]:
        return None
    weights = sorted({p.weights for p in pts})
    dummy_moe = cls != "dense" and "dummy" in weights and factor < 1
    logs = [p.log_ratio for p in pts]
    return StepCorrection(host_profile=host, arch_class=cls, dtype=dtype, tp=str(tp), factor=round(factor, 4),
                          applied=not dummy_moe, why_not=DUMMY_MOE if dummy_moe else "", points=len(pts),
                          models=";".join(_model_means(pts)), campaigns=";".join(sorted({p.campaign for p in pts})),
                          weights=";".join(weights), log_min=round(min(logs), 4), log_max=round(max(logs), 4),
                          provenance=PROVENANCE, source=source)  # fmt: skip


def _groups(pts: list[Point]) -> dict[tuple, list[Point]]:
    g: dict[tuple, list[Point]] = defaultdict(list)
    for p in pts:
        g[p.key()].append(p)
    return dict(sorted(g.items()))


def fit(pts: list[Point], source: str) -> tuple[list[StepCorrection], list[str]]:
    """(one row per host profile x class x dtype x TP, groups left out with why)."""
    rows, skipped = [], []
    for key, group in _groups(pts).items():
        row = _row(group, source)
        if row is None:
            skipped.append(f"{'/'.join(map(str, key))}: factor outside {FACTOR_BOUNDS} (a broken run or model, not a correction)")
        else:
            rows.append(row)
    return rows, skipped


def rebuild_text(calibration_dir: Path) -> str:
    """calibration/step_corrections.csv as the committed campaigns' records make it."""
    records, files, _ = committed_records(calibration_dir)
    pts, _ = points(records)
    rows, _ = fit(pts, "; ".join(files))
    return render_rows(rows)


def _median(xs: list[float]) -> float | None:
    return round(statistics.median(xs), 4) if xs else None


def leave_one_model_out(pts: list[Point], source: str = "") -> dict:
    """Each model's runs predicted with the correction of its group's other models (as the runtime would apply it:
    a row that is not applied is no correction), beside the trivial baseline (no correction). Groups of one model have
    no held-out figure: listed as empty, never filled in."""
    groups, out_groups, pooled_base, pooled_lomo = _groups(pts), [], [], []
    for key, group in groups.items():
        models = _model_means(group)
        per_model = []
        for m in models:
            rest = [p for p in group if p.model != m]
            row = _row(rest, source) if rest else None
            f = row.factor if row is not None and row.applied else None
            mine = [p for p in group if p.model == m]
            base = [abs(p.log_ratio) for p in mine]
            lomo = [abs(p.log_ratio - math.log(f)) for p in mine] if f is not None else []
            per_model.append({"model": m, "runs": len(mine), "held_out_factor": f,
                              "held_out_note": None if f is not None else ("no other model in the group" if not rest else
                                                                            f"the others' factor is not applied ({row.why_not})" if row is not None
                                                                            else "the others' factor is out of bounds"),
                              "baseline_median_abs_log": _median(base), "lomo_median_abs_log": _median(lomo)})  # fmt: skip
            if lomo:
                pooled_base += base
                pooled_lomo += lomo
        full = _row(group, source)
        out_groups.append({
            "host_profile": key[0], "arch_class": key[1], "dtype": key[2], "tp": key[3], "models": list(models),
            "runs": len(group), "factor_in_sample": full.factor if full else None, "applied": bool(full and full.applied),
            "why_not": full.why_not if full else "factor out of bounds",
            "baseline_median_abs_log": _median([abs(p.log_ratio) for p in group]),
            "lomo_median_abs_log": _median([x for pm in per_model for x in ([pm["lomo_median_abs_log"]] if pm["lomo_median_abs_log"] is not None else [])]),
            "lomo_empty": None if len(models) > 1 else f"one model only ({next(iter(models))}): leave-one-model-out is empty",
            "per_model": per_model,
        })  # fmt: skip
    return {"groups": out_groups, "pooled": {"runs": len(pooled_lomo), "baseline_median_abs_log": _median(pooled_base),
                                             "lomo_median_abs_log": _median(pooled_lomo)}}  # fmt: skip


def first_pass(records: list[VerifyRecord]) -> dict:
    """Each figure's ln(measured / predicted) by class and dtype over the runs stored on the answer's GPU, as predicted
    (no correction): what the answers said before any measured correction."""
    by: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    models: dict[str, set] = defaultdict(set)
    for r in records:
        if not r.gpu or not r.host_gpu or r.gpu.lower() != r.host_gpu.lower():
            continue
        cls = f"{r.arch_class or 'unknown'} {r.weights_dtype or '?'}"
        models[cls].add(r.model)
        for fig in FIGURES:
            v = r.log_error(fig)
            if v is not None:
                by[cls][fig].append(v)
    return {cls: {"models": sorted(models[cls]),
                  "figures": {fig: {"runs": len(v), "median_log": _median(v), "median_abs_log": _median([abs(x) for x in v])}
                              for fig, v in figs.items()}}
            for cls, figs in sorted(by.items())}  # fmt: skip


def closed_loop_now(r: VerifyRecord) -> dict[str, float] | None:
    """The run's figures (``TPOT ms``, ``TTFT ms``, ``output tok/s``: means, as the closed loop reports them) as the
    physics predicts them now, no correction, at the run's own load: the closed loop of ``vllm bench serve
    --max-concurrency C`` (advisor.plan.layout.closed_loop_run) with the answer's batch limits and KV cache and the
    run's own prompt count; None for another pattern or a record without those fields (an older answer)."""
    if (r.pattern != "closed" or not r.max_concurrency or r.running_per_replica is None or r.max_num_seqs is None
            or r.max_num_batched_tokens is None or r.kv_cache_tokens is None or not r.prompt_len or not r.output_len
            or not r.gpu or (r.data_parallel_size or 1) != 1):  # fmt: skip
        return None
    from advisor.plan.layout import closed_loop_run, kv_fp8_profile
    from advisor.predict.absolute import ReplicaLayout

    if (pg := _profile_gpu(r)) is None:
        return None
    p, gpu = pg
    p = kv_fp8_profile(p) if r.kv_cache_dtype == "fp8" else p
    run = closed_loop_run(p, gpu, ReplicaLayout(tp=r.tensor_parallel_size or 1), prompt_len=r.prompt_len,
                          output_len=r.output_len, concurrency=r.max_concurrency, num_prompts=r.completed,
                          max_num_seqs=r.max_num_seqs, max_num_batched_tokens=r.max_num_batched_tokens,
                          kv_cache_tokens=r.kv_cache_tokens)  # fmt: skip
    return {"TPOT ms": run.mean_tpot_ms, "TTFT ms": run.mean_ttft_ms, "output tok/s": run.output_tok_s}


def physics_now(records: list[VerifyRecord]) -> dict:
    """Each figure's ln(measured / the physics now, no correction) by class and dtype, beside the same against the
    answer as printed: the decode step re-predicted for the answer's running sequences and context
    (:func:`predicted_now`), TPOT, TTFT and output tok/s from the closed loop replayed at the run's own load
    (:func:`closed_loop_now`). What the model's changes since the answers were made did to those runs (for campaign
    14: the closed-loop simulation, which its answers predate, and the MoE kernel cost, 7cc65ef): in sample for any
    correction fitted on them, out of sample for a physics term fitted elsewhere. Records without the answer's shape
    are left out and counted."""
    by: dict[str, dict[str, list[tuple[float, float]]]] = defaultdict(lambda: defaultdict(list))
    models: dict[str, set] = defaultdict(set)
    missing = 0
    for r in records:
        if not r.gpu or not r.host_gpu or r.gpu.lower() != r.host_gpu.lower():
            continue
        now = dict(closed_loop_now(r) or {})
        step = predicted_now(r)
        if step is not None:
            now["decode step ms"] = step
        if not now:
            missing += 1
            continue
        cls = f"{r.arch_class or 'unknown'} {r.weights_dtype or '?'}"
        models[cls].add(r.model)
        for fig, value in now.items():
            row = r.row(fig)
            if row is None or not value:
                continue
            printed = r.log_error(fig)  # ln(measured / predicted), as first_pass reports it
            if printed is not None:
                by[cls][fig].append((math.log(row.measured / value), printed))
    out = {}
    for cls, figs in sorted(by.items()):
        out[cls] = {"models": sorted(models[cls]), "figures": {
            fig: {"runs": len(v), "median_log_now": _median([a for a, _ in v]), "median_abs_log_now": _median([abs(a) for a, _ in v]),
                  "median_log_as_printed": _median([b for _, b in v]), "median_abs_log_as_printed": _median([abs(b) for _, b in v])}
            for fig, v in sorted(figs.items())}}  # fmt: skip
    return {"by_class": out, "records_without_shape": missing}


def user_section(user_records: list[VerifyRecord]) -> dict:
    """The same for the user's store (its rows are the ones ``advisor calibrate`` writes to the data dir)."""
    upts, uleft = points(user_records)
    urows, ubad = fit(upts, USER_CAMPAIGN)
    return {"records": len(user_records), "step_points": len(upts), "left_out": uleft + ubad,
            "first_pass": first_pass(user_records), "corrections": [r.model_dump() for r in urows],
            "leave_one_model_out": leave_one_model_out(upts, USER_CAMPAIGN)}  # fmt: skip


def evaluate(calibration_dir: Path) -> dict:
    """``calibrate --evaluate``'s verify section over the committed records: first pass by class, the fitted rows
    (and whether the shipped table is them), and leave one model out against no correction."""
    from advisor.predict.step_correction import TABLE

    records, files, skipped = committed_records(calibration_dir)
    pts, left = points(records)
    rows, bad = fit(pts, "; ".join(files))
    shipped = (calibration_dir / TABLE).read_text(encoding="utf-8") if (calibration_dir / TABLE).is_file() else ""
    res = {"available": bool(records), "sources": files, "records": len(records), "step_points": len(pts),
           "left_out": skipped + left + bad, "first_pass": first_pass(records), "physics_now": physics_now(records),
           "corrections": [r.model_dump() for r in rows], "shipped_matches_fit": shipped == render_rows(rows),
           "leave_one_model_out": leave_one_model_out(pts, "; ".join(files)),
           "baseline": "no correction: the physics' predicted step as the answer printed it"}  # fmt: skip
    return res


def store_user(records: list[VerifyRecord], path: Path, store: str) -> dict:
    """``advisor calibrate``: fit the user's verify records and write the data dir's step_corrections.csv (atomically;
    only when a row is fitted), which recommend then applies where it was measured."""
    from advisor.atomic import write_one

    pts, left = points(records)
    rows, bad = fit(pts, f"{USER_CAMPAIGN} {store}")
    if rows:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_one(path, render_rows(rows))
    return {"file": str(path), "records": len(records), "step_points": len(pts), "corrections": [r.model_dump() for r in rows],
            "left_out": left + bad}  # fmt: skip
