"""Real-vLLM step times measured on a GPU, against the step-cost model (``calibrate --evaluate``).

The grid (``calibration/gpu_steps/<host>-vllm<version>/grid.jsonl``) comes from
``calibration/gpu_steps/gridbench.py``: decode steps with prefill removed (difference of two
output lengths), dummy weights, plain steps from an engine without speculation and verification
steps from an engine booted with suffix decoding at K=32 whose drafts were truncated to a cap.
Each grid point is the median of its repetitions.

Two constants of the step-cost model come from this grid and nowhere else:
``SPEC_STEP_FIXED_S`` and ``SPEC_STEP_PER_SEQ_S`` (see :mod:`advisor.predict.stepcost`). They are
fitted here by least absolute log error of the verification step time, and this module is what
checks them: ``fit_spec_constants(points)`` on the shipped grid must give the shipped values (a
test does), and ``evaluate()`` reports the out-of-sample error of R leave-one-model-out (refit on
the other models, predict the held-out one) and leave-one-concurrency-out, and the bias per
architecture class (dense GQA, GQA MoE, MLA MoE).

A point is used only where its repetitions agree (``REP_AGREEMENT``): the differenced step is small
against the jitter of two whole ``generate`` calls at 15 tokens per step, and a few repetitions
disagree by 2x or more (one DeepSeek-V2-Lite difference came out negative). Such points are listed
under ``excluded`` with their repetitions, never silently dropped. Single-repetition points are
kept and counted (``single_rep_points``).

Pure functions over the shipped files; no GPU is needed to evaluate.
"""

from __future__ import annotations

import json
import math
import statistics
from collections import defaultdict
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from advisor.calibrate import manifests
from advisor.hardware.gpu_detect import gpu_name_for_specs
from advisor.hardware.gpus import get_gpu
from advisor.model.schema import ModelProfile
from advisor.predict.dataset import ProfileFn
from advisor.predict import host_profile as hp
from advisor.predict import stepcost as sc

GRID_DIR = manifests.root("gpu_steps_dir")
"""calibration/manifests.yaml ``gpu_steps_dir``."""
MODEL_IDS = manifests.labels("gpu_steps_model_ids")
"""calibration/manifests.yaml ``gpu_steps_model_ids``."""
FIT_A_GRID = [i * 0.25e-3 for i in range(0, 41)]
"""Candidate SPEC_STEP_FIXED_S values (0-10 ms in 0.25 ms steps) for the fit."""
FIT_B_GRID = [i * 10e-6 for i in range(0, 41)]
"""Candidate SPEC_STEP_PER_SEQ_S values (0-400 us in 10 us steps) for the fit."""
GOAL_MEDIAN_ABS_LOG_R = 0.15
"""Issue goal: out-of-sample median |log(R_pred / R_meas)|."""
GOAL_CLASS_BIAS = 0.25
"""Issue goal: no architecture class with a systematic R bias above 25 % (median R_pred/R_meas - 1)."""
REP_AGREEMENT = 1.5
"""A point with two or more repetitions is used when its two closest repetitions agree within this
factor (chosen by hand from the grid: agreeing pairs differ by <= 1.25x, disagreeing ones by >= 1.65x)."""


REP_TOKENS_SLACK = 1.02
"""A repetition may report up to 2 % more than 1 + K tokens per sequence per step (vLLM counts the draft tokens a
request accepts past its max_tokens, which the differencing does not fully cancel: 6.02 at K=5 in campaign 11);
beyond that the repetition is impossible and its point is not used (``rep_valid``)."""


class GridPoint(BaseModel):
    """One (model, draft cap, concurrency) point: medians over its repetitions."""

    model_config = ConfigDict(extra="forbid")

    model: str
    gpu: str
    vllm_version: str
    concurrency: int
    k: int
    """num_speculative_tokens the engine was booted with (0: no speculation)."""
    draft_cap: int
    """0 for the plain engine; else the truncation cap (suffix: 12 = untruncated; n-gram: K = untruncated)."""
    method: str = ""
    """The proposer the engine was booted with: "suffix", "ngram", or "" for a plain engine."""
    tokens_per_seq: float
    """Measured tokens per sequence per step (1 + accepted drafts)."""
    context: float
    """Mean KV context over the differenced steps: prompt + mean of the two output lengths."""
    step_ms: float
    reps: int
    rep_step_ms: list[float]
    """Every repetition's step time, in the order measured."""
    rep_tokens_per_seq: list[float] = []
    """Every repetition's tokens per sequence per step, in the order measured."""
    agrees: bool
    """Every repetition is physically possible (``rep_valid``) and the two closest agree within REP_AGREEMENT
    (always True for one valid repetition)."""
    arch_class: str = ""
    """dense, gqa-moe or mla-moe (set by ``evaluate`` from the model's profile)."""
    source: str


class PointResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model: str
    arch_class: str
    concurrency: int
    k: int
    draft_cap: int
    method: str = ""
    source: str = ""
    tokens_per_seq: float
    step_ms_meas: float
    step_ms_pred: float
    r_meas: float | None
    r_pred: float | None
    graph_mode: str


def grid_dirs(calibration_dir: Path) -> list[Path]:
    root = calibration_dir / GRID_DIR
    return sorted(p for p in root.iterdir() if (p / "grid.jsonl").is_file()) if root.is_dir() else []


def folder_gpu(folder: Path) -> str:
    """The catalog GPU a measured folder was taken on, from its ``gpu.csv`` (nvidia-smi's names)."""
    lines = [ln for ln in (folder / "gpu.csv").read_text().splitlines()[1:] if ln.strip()]
    names = {gpu_name_for_specs(ln.split(",")[0]) for ln in lines}
    return (names.pop() or "unknown") if len(names) == 1 else "unknown"


def spec_method(spec: str) -> str:
    """The proposer of gridbench's ``--spec`` ("suffix:32" -> "suffix", "ngram:5" -> "ngram", "none" -> "")."""
    return "" if spec == "none" else spec.split(":")[0]


def load_points(folder: Path) -> list[GridPoint]:
    """Grid points of one measured folder (``grid.jsonl`` + ``boots.jsonl`` + ``gpu.csv``)."""
    boots = [json.loads(line) for line in (folder / "boots.jsonl").read_text().splitlines() if line.strip()]
    version = boots[0].get("vllm_version", "unknown") if boots else "unknown"
    gpu = folder_gpu(folder)
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for line in (folder / "grid.jsonl").read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            groups[(row["model"], spec_method(row["spec"]), row["k"], row["draft_cap"], row["conc"])].append(row)
    points = []
    for (model, method, k, cap, conc), rows in sorted(groups.items()):
        r0 = rows[0]
        steps = [r["step_ms"] for r in rows]
        points.append(GridPoint(
            model=model, gpu=gpu, vllm_version=version, concurrency=conc, k=k, draft_cap=cap, method=method,
            tokens_per_seq=statistics.median(r["tokens_per_seq_step"] for r in rows),
            context=r0["prompt_len"] + (r0["out_short"] + r0["out_long"]) / 2,
            step_ms=statistics.median(steps), reps=len(rows), rep_step_ms=steps,
            rep_tokens_per_seq=[r["tokens_per_seq_step"] for r in rows],
            agrees=reps_agree(steps) and all(rep_valid(r["tokens_per_seq_step"], k) for r in rows),
            source=f"calibration/{GRID_DIR}/{folder.name}/grid.jsonl",
        ))  # fmt: skip
    return points


def rep_valid(tokens_per_seq: float, k: int) -> bool:
    """A repetition is physically possible: a step emits at most 1 + K tokens per sequence. More means the
    differencing of the two runs failed (seen with uncapped K=32 n-gram drafts, campaign 11: vLLM counts draft
    tokens accepted past max_tokens, so with 33-token steps a few overshooting requests move the step count of a
    ~30-step difference; such a point's other repetitions are not trusted either)."""
    return tokens_per_seq <= (1 + k) * REP_TOKENS_SLACK


def reps_agree(steps: list[float]) -> bool:
    """True when a point's repetitions can be trusted: all positive, and (with two or more) the two
    closest ones within REP_AGREEMENT of each other."""
    if any(s <= 0 for s in steps):
        return False
    if len(steps) < 2:
        return True
    xs = sorted(steps)
    return min(b / a for a, b in zip(xs, xs[1:])) <= REP_AGREEMENT


def arch_class(p: ModelProfile) -> str:
    """The architecture class the issue's bias goal is stated per: dense, gqa-moe or mla-moe."""
    if p.arch != "moe":
        return "dense"
    return "mla-moe" if p.attention == "mla" else "gqa-moe"


def _shape(pt: GridPoint) -> sc.StepShape:
    if pt.draft_cap == 0:
        return sc.StepShape(seqs=pt.concurrency, tokens_per_seq=1, context=pt.context)
    # Every sequence drafts in these runs (dummy weights repeat), so draft_share is 1.
    return sc.StepShape(seqs=pt.concurrency, tokens_per_seq=max(1.0, pt.tokens_per_seq), context=pt.context,
                        spec=True, draft_share=1.0, k=pt.k, method=pt.method or "suffix")  # fmt: skip


def _spec_base(p: ModelProfile, pt: GridPoint) -> tuple[float, str]:
    """Predicted verification step without the two fitted spec-step terms (seconds), graph mode."""
    cost = sc.step_cost(p, get_gpu(pt.gpu), 1, _shape(pt))
    return cost.total - cost.t_spec_fixed - cost.t_draft, cost.graph_mode


def _pair(pt: GridPoint) -> tuple[str, str, int]:
    """A verification point is compared with the plain step of the same folder (machine loan), model and concurrency."""
    return pt.source, pt.model, pt.concurrency


def fit_spec_constants(points: list[GridPoint], profiles: dict[str, ModelProfile],
                       method: str = "suffix") -> tuple[float, float]:  # fmt: skip
    """(per-step, per-sequence) cost of a ``method`` verification step over a plain one minimising the summed
    |log(pred/meas)| of that method's verification steps in ``points`` (grid search over FIT_A_GRID x FIT_B_GRID;
    ties: smaller a, b). For suffix on the shipped grid: SPEC_STEP_FIXED_S, SPEC_STEP_PER_SEQ_S."""
    plain = {_pair(pt) for pt in points if pt.draft_cap == 0 and pt.agrees}
    spec = [(pt, _spec_base(profiles[pt.model], pt)[0]) for pt in points
            if pt.draft_cap > 0 and pt.method == method and pt.agrees and _pair(pt) in plain]
    best = (math.inf, 0.0, 0.0)
    for a in FIT_A_GRID:
        for b in FIT_B_GRID:
            err = sum(abs(math.log((base + a + b * pt.concurrency) * 1e3 / pt.step_ms)) for pt, base in spec)
            if err < best[0] - 1e-12:
                best = (err, a, b)
    return round(best[1], 6), round(best[2], 6)


def predict_points(points: list[GridPoint], profiles: dict[str, ModelProfile],
                   constants: tuple[float, float] | None = None) -> list[PointResult]:  # fmt: skip
    """Predicted step time and R for every point; ``constants`` replace the shipped spec-step terms."""
    plain_meas = {_pair(pt): pt.step_ms for pt in points if pt.draft_cap == 0 and pt.agrees}
    out = []
    for pt in points:
        p = profiles[pt.model]
        gpu = get_gpu(pt.gpu)
        plain_pred = sc.step_cost(p, gpu, 1, sc.StepShape(seqs=pt.concurrency, tokens_per_seq=1, context=pt.context))
        if pt.draft_cap == 0:
            pred, mode = plain_pred.total, plain_pred.graph_mode
        elif constants is None:
            cost = sc.step_cost(p, gpu, 1, _shape(pt))
            pred, mode = cost.total, cost.graph_mode
        else:
            base, mode = _spec_base(p, pt)
            pred = base + constants[0] + constants[1] * pt.concurrency
        pm = plain_meas.get(_pair(pt))
        spec_point = pt.draft_cap > 0 and pm
        out.append(PointResult(
            model=pt.model, arch_class=arch_class(p), concurrency=pt.concurrency, k=pt.k, draft_cap=pt.draft_cap,
            method=pt.method, source=pt.source, tokens_per_seq=pt.tokens_per_seq,
            step_ms_meas=pt.step_ms, step_ms_pred=round(pred * 1e3, 3),
            r_meas=round(pt.step_ms / pm, 3) if spec_point else None,
            r_pred=round(pred / plain_pred.total, 3) if spec_point else None, graph_mode=mode,
        ))  # fmt: skip
    return out


def _abs_log_r(results: list[PointResult]) -> list[float]:
    return [abs(math.log(r.r_pred / r.r_meas)) for r in results if r.r_meas and r.r_pred]


def _bias(results: list[PointResult]) -> dict[str, float]:
    """Median R_pred / R_meas - 1 per architecture class (positive: R predicted too high)."""
    by: dict[str, list[float]] = defaultdict(list)
    for r in results:
        if r.r_meas and r.r_pred:
            by[r.arch_class].append(math.log(r.r_pred / r.r_meas))
    return {c: round(math.exp(statistics.median(v)) - 1, 4) for c, v in sorted(by.items())}


def _med(xs: list[float]) -> float | None:
    return round(statistics.median(xs), 4) if xs else None


def _held_out(points: list[GridPoint], profiles: dict[str, ModelProfile], key, method: str = "suffix") -> list[PointResult]:
    """Refit the two constants without each group of ``key`` and predict that group."""
    out: list[PointResult] = []
    for group in sorted({key(pt) for pt in points}):
        train = [pt for pt in points if key(pt) != group]
        held = [pt for pt in points if key(pt) == group]
        out += predict_points(held, profiles, constants=fit_spec_constants(train, profiles, method))
    return out


def _ngram(points: list[GridPoint], profiles: dict[str, ModelProfile]) -> dict:
    """n-gram's own verification steps (vLLM's CPU prompt-lookup proposer): the constants they fit, the
    host profile's, and how well each predicts R, in sample and held out by model and by concurrency.
    ``with_suffix_constants``: n-gram priced with suffix's measured constants (what the profile INFERRED before
    n-gram was measured)."""
    mine = [pt for pt in points if pt.method == "ngram"]
    if not mine:
        return {"available": False, "reason": "no n-gram verification steps in the grid"}
    pairs = {_pair(pt) for pt in mine}
    used = mine + [pt for pt in points if pt.draft_cap == 0 and _pair(pt) in pairs]
    fit = fit_spec_constants(used, profiles, "ngram")
    models = sorted({pt.model for pt in mine})
    # suffix measured on the same machine(s): the paired comparison the profile's n-gram per-step term rests on
    same = [pt for pt in points if pt.source in {q.source for q in mine} and pt.method in ("", "suffix")]
    suffix_same = fit_spec_constants(same, profiles, "suffix") if any(pt.method == "suffix" for pt in same) else None
    shipped = [r for r in predict_points(used, profiles) if r.method == "ngram"]
    refit = [r for r in predict_points(used, profiles, constants=fit) if r.method == "ngram"]
    before = [r for r in predict_points(used, profiles, constants=(sc.SPEC_STEP_FIXED_S, sc.SPEC_STEP_PER_SEQ_S))
              if r.method == "ngram"]  # fmt: skip
    lomo = [r for r in _held_out(used, profiles, lambda pt: pt.model, "ngram") if r.method == "ngram"] if len(models) > 1 else []
    loco = [r for r in _held_out(used, profiles, lambda pt: pt.concurrency, "ngram") if r.method == "ngram"]
    return {
        "available": True,
        "sources": sorted({pt.source for pt in mine}),
        "models": models,
        "points": len(mine),
        "fit": {"step_s": fit[0], "per_seq_s": fit[1]},
        "profile": dict(zip(("step_s", "per_seq_s"), hp.spec_costs("offline-grid", "ngram"))),
        "suffix_same_machine": {"step_s": suffix_same[0], "per_seq_s": suffix_same[1],
                                "models": sorted({pt.model for pt in same if pt.method == "suffix"})} if suffix_same else None,
        "r_median_abs_log_profile": _med(_abs_log_r(shipped)),
        "r_median_abs_log_in_sample": _med(_abs_log_r(refit)),
        "r_median_abs_log_with_suffix_constants": _med(_abs_log_r(before)),
        "r_median_abs_log_leave_one_model_out": _med(_abs_log_r(lomo)),
        "r_median_abs_log_leave_one_concurrency_out": _med(_abs_log_r(loco)),
        "table": [r.model_dump() for r in shipped],
    }


def _replicate(points: list[GridPoint], profiles: dict[str, ModelProfile], fitted_on: str) -> dict:
    """Suffix verification steps measured on another machine loan than the grid the constants were fitted on,
    predicted with the shipped constants: out of sample across machines of the host class (``points``: the
    fitted GPU's)."""
    others = {pt.source for pt in points if pt.method == "suffix" and pt.source != fitted_on}
    if not others:
        return {"available": False, "reason": "no suffix steps outside the fitted grid"}
    used = [pt for pt in points if pt.source in others]
    res = [r for r in predict_points(used, profiles) if r.method == "suffix"]
    return {"available": True, "sources": sorted(others), "points": len(res),
            "r_median_abs_log": _med(_abs_log_r(res)), "table": [r.model_dump() for r in res]}  # fmt: skip


def _other_gpu(points: list[GridPoint], profiles: dict[str, ModelProfile], fitted_gpu: str) -> dict:
    """Grids measured on another GPU type than the shipped constants' (campaign 12: one H100, same vLLM, engine
    and VM class), per GPU: out of sample, the plain step (the GEMM constants and the GPU table's datasheet
    figures) and each method's R with the shipped spec-step constants; then the constants that GPU's own
    verification steps fit (what its host profile carries), in sample and held out by model."""
    out: dict[str, dict] = {}
    for gpu in sorted({pt.gpu for pt in points} - {fitted_gpu}):
        mine = [pt for pt in points if pt.gpu == gpu]
        shipped = predict_points(mine, profiles)
        plain = [r for r in shipped if r.draft_cap == 0]
        entry: dict = {
            "sources": sorted({pt.source for pt in mine}),
            "models": sorted({pt.model for pt in mine}),
            "plain_points": len(plain),
            "plain_median_abs_log_step": _med([abs(math.log(r.step_ms_pred / r.step_ms_meas)) for r in plain]),
            "plain_median_log_step": _med([math.log(r.step_ms_pred / r.step_ms_meas) for r in plain]),
            "plain_table": [r.model_dump() for r in plain],
        }
        for method in ("suffix", "ngram"):
            res = [r for r in shipped if r.method == method]
            if not any(r.r_meas for r in res):
                continue
            fit = fit_spec_constants(mine, profiles, method)
            refit = [r for r in predict_points(mine, profiles, constants=fit) if r.method == method]
            models = sorted({pt.model for pt in mine if pt.method == method})
            lomo = ([r for r in _held_out(mine, profiles, lambda pt: pt.model, method) if r.method == method]
                    if len(models) > 1 else [])  # fmt: skip
            entry[method] = {
                "points": len(_abs_log_r(res)),
                "r_median_abs_log_shipped_profile": _med(_abs_log_r(res)),
                "r_median_log_shipped_profile": _med([math.log(r.r_pred / r.r_meas) for r in res if r.r_meas and r.r_pred]),
                "fit": {"step_s": fit[0], "per_seq_s": fit[1]},
                "fit_by_model": {m: dict(zip(("step_s", "per_seq_s"), fit_spec_constants(
                    [pt for pt in mine if pt.model == m], profiles, method))) for m in models},
                "r_median_abs_log_in_sample": _med(_abs_log_r(refit)),
                "r_median_abs_log_leave_one_model_out": _med(_abs_log_r(lomo)),
                "table": [r.model_dump() for r in res],
            }  # fmt: skip
        out[gpu] = entry
    if not out:
        return {"available": False, "reason": f"no grid on a GPU other than the {fitted_gpu}"}
    return {"available": True, "fitted_gpu": fitted_gpu, "by_gpu": out}


def evaluate(calibration_dir: Path, profile_for: ProfileFn) -> dict:
    """The ``gpu_steps`` section of ``calibrate --evaluate``: per-point table, in-sample,
    leave-one-model-out and leave-one-concurrency-out errors of R, and the bias per class."""
    loaded = [pt for folder in grid_dirs(calibration_dir) for pt in load_points(folder)]
    if not loaded:
        return {"available": False, "reason": f"no grid under calibration/{GRID_DIR}/"}
    profiles = {m: profile_for(MODEL_IDS.get(m, m)) for m in {pt.model for pt in loaded}}
    loaded = [pt.model_copy(update={"arch_class": arch_class(profiles[pt.model])}) for pt in loaded]
    every = [pt for pt in loaded if pt.agrees]
    fitted_on = hp.get("offline-grid").source
    fitted_gpu = next((pt.gpu for pt in every if pt.source == fitted_on), hp.get("offline-grid").gpu)
    same_gpu = [pt for pt in every if pt.gpu == fitted_gpu]  # other machines of the class; other GPUs: _other_gpu
    # The suffix constants and their checks: the grid the host profile names as its source (plain and suffix).
    points = [pt for pt in every if pt.source == fitted_on and pt.method in ("", "suffix")]
    excluded = [pt for pt in loaded if not pt.agrees]
    shipped = predict_points(points, profiles)
    before = predict_points(points, profiles, constants=(0.0, sc.DRAFT_CPU_S_PER_SEQ_ASSUMED))
    lomo = _held_out(points, profiles, key=lambda pt: pt.model)
    loco = _held_out(points, profiles, key=lambda pt: pt.concurrency)
    models = sorted(profiles)
    plain = [abs(math.log(r.step_ms_pred / r.step_ms_meas)) for r in shipped if r.draft_cap == 0]
    plain_by_model = {
        m: _med([abs(math.log(r.step_ms_pred / r.step_ms_meas)) for r in shipped if r.draft_cap == 0 and r.model == m])
        for m in models
    }
    oos = _med(_abs_log_r(lomo))
    bias = _bias(lomo)
    biased = sorted(c for c, b in bias.items() if abs(b) > GOAL_CLASS_BIAS)
    return {
        "available": True,
        "sources": sorted({pt.source for pt in points}),
        "models": models,
        "classes": {m: arch_class(profiles[m]) for m in models},
        "vllm_versions": sorted({pt.vllm_version for pt in points}),
        "points": len(points),
        "single_rep_points": sum(1 for pt in points if pt.reps == 1),
        "excluded": [
            {"model": pt.model, "k": pt.k, "draft_cap": pt.draft_cap, "concurrency": pt.concurrency,
             "rep_step_ms": pt.rep_step_ms, "rep_tokens_per_seq": pt.rep_tokens_per_seq, "method": pt.method,
             "source": pt.source,
             "why": f"repetitions disagree by more than {REP_AGREEMENT}x, or one is <= 0 or emits more than 1 + K "
                    "tokens per sequence per step"}
            for pt in excluded
        ],  # fmt: skip
        "constants": {"SPEC_STEP_FIXED_S": sc.SPEC_STEP_FIXED_S, "SPEC_STEP_PER_SEQ_S": sc.SPEC_STEP_PER_SEQ_S},
        "plain_median_abs_log_step": _med(plain),
        "plain_median_abs_log_step_by_model": plain_by_model,
        "r_median_abs_log_before_refit": _med(_abs_log_r(before)),
        "r_median_abs_log_baseline_r_equals_1": _med([abs(math.log(r.r_meas)) for r in shipped if r.r_meas and r.r_pred]),
        "r_median_abs_log_in_sample": _med(_abs_log_r(shipped)),
        "r_median_abs_log_leave_one_model_out": oos,
        "r_median_abs_log_leave_one_model_out_by_model": {
            m: _med(_abs_log_r([r for r in lomo if r.model == m])) for m in models
        },
        "r_median_abs_log_leave_one_concurrency_out": _med(_abs_log_r(loco)),
        "r_bias_leave_one_model_out_by_class": bias,
        "classes_biased_beyond_goal": biased,
        "leave_one_model_out_note": (
            f"needs a second measured model; measured so far: {', '.join(models)}" if len(models) < 2 else None
        ),
        "goal": {"median_abs_log_r": GOAL_MEDIAN_ABS_LOG_R, "class_bias": GOAL_CLASS_BIAS},
        "meets_goal": oos is not None and oos <= GOAL_MEDIAN_ABS_LOG_R and not biased,
        "table": [r.model_dump() for r in shipped],
        "suffix_other_machines": _replicate(same_gpu, profiles, fitted_on),
        "ngram": _ngram(same_gpu, profiles),
        "other_gpu": _other_gpu(every, profiles, fitted_gpu),
    }


def class_accuracy_rows(calibration_dir: Path, profile_for: ProfileFn) -> list:
    """The rows of calibration/class_accuracy.csv (advisor.predict.class_accuracy), from the shipped grids: per
    GPU and architecture class, the plain step's |ln(pred/meas)| (the shipped constants, every agreeing point)
    and, on the GPU the spec-step constants were fitted on, the median ln(R_pred/R_meas) of suffix verification
    steps with each model held out of the fit (what ``evaluate`` reports as r_bias_leave_one_model_out_by_class,
    kept in log form)."""
    from advisor.predict.class_accuracy import ClassAccuracy

    loaded = [pt for folder in grid_dirs(calibration_dir) for pt in load_points(folder)]
    profiles = {m: profile_for(MODEL_IDS.get(m, m)) for m in {pt.model for pt in loaded}}
    every = [pt.model_copy(update={"arch_class": arch_class(profiles[pt.model])}) for pt in loaded if pt.agrees]
    fitted_on = hp.get("offline-grid").source
    points = [pt for pt in every if pt.source == fitted_on and pt.method in ("", "suffix")]
    lomo = _held_out(points, profiles, key=lambda pt: pt.model)
    fitted_gpu = next((pt.gpu for pt in points), None)
    out = []
    for gpu in sorted({pt.gpu for pt in every}):
        mine = [pt for pt in every if pt.gpu == gpu]
        plain = [r for r in predict_points(mine, profiles) if r.draft_cap == 0]
        for cls in sorted({arch_class(profiles[pt.model]) for pt in mine}):
            logs = [abs(math.log(r.step_ms_pred / r.step_ms_meas)) for r in plain if r.arch_class == cls]
            held = [r for r in lomo if r.arch_class == cls and r.r_meas and r.r_pred] if gpu == fitted_gpu else []
            bias = [math.log(r.r_pred / r.r_meas) for r in held]
            out.append(ClassAccuracy(
                gpu=gpu, arch_class=cls, models=";".join(sorted({pt.model for pt in mine if arch_class(profiles[pt.model]) == cls})),
                plain_points=len(logs), plain_median_abs_log=_med(logs), plain_max_abs_log=round(max(logs), 4) if logs else None,
                r_points=len(bias), r_models=len({r.model for r in held}), r_bias_lomo=_med(bias),
                source=";".join(sorted({pt.source for pt in mine if arch_class(profiles[pt.model]) == cls}))))  # fmt: skip
    return out
