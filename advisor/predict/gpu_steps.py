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
test does), and ``evaluate()`` reports the out-of-sample error, leave-one-concurrency-out (one
model has been measured so far, so leave-one-model-out is not yet possible; it is reported as
unavailable with the reason).

Pure functions over the shipped files; no GPU is needed to evaluate.
"""

from __future__ import annotations

import json
import math
import statistics
from collections import defaultdict
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from advisor.hardware.gpus import get_gpu
from advisor.model.schema import ModelProfile
from advisor.predict.dataset import ProfileFn
from advisor.predict import stepcost as sc

GRID_DIR = "gpu_steps"
"""Folder under ``calibration/`` holding one sub-folder per measured host and vLLM version."""
MODEL_IDS = {"Llama-3.1-8B-Instruct": "meta-llama/Llama-3.1-8B-Instruct"}
"""gridbench's model labels (directory names on the GPU machine) -> bundled catalog ids."""
FIT_A_GRID = [i * 0.25e-3 for i in range(0, 41)]
"""Candidate SPEC_STEP_FIXED_S values (0-10 ms in 0.25 ms steps) for the fit."""
FIT_B_GRID = [i * 10e-6 for i in range(0, 41)]
"""Candidate SPEC_STEP_PER_SEQ_S values (0-400 us in 10 us steps) for the fit."""
GOAL_MEDIAN_ABS_LOG_R = 0.15
"""Issue goal: out-of-sample median |log(R_pred / R_meas)|."""


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
    """0 for the plain engine; else the truncation cap (12 = untruncated)."""
    tokens_per_seq: float
    """Measured tokens per sequence per step (1 + accepted drafts)."""
    context: float
    """Mean KV context over the differenced steps: prompt + mean of the two output lengths."""
    step_ms: float
    reps: int
    source: str


class PointResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model: str
    concurrency: int
    draft_cap: int
    tokens_per_seq: float
    step_ms_meas: float
    step_ms_pred: float
    r_meas: float | None
    r_pred: float | None
    graph_mode: str


def grid_dirs(calibration_dir: Path) -> list[Path]:
    root = calibration_dir / GRID_DIR
    return sorted(p for p in root.iterdir() if (p / "grid.jsonl").is_file()) if root.is_dir() else []


def load_points(folder: Path) -> list[GridPoint]:
    """Grid points of one measured folder (``grid.jsonl`` + ``boots.jsonl`` + ``gpu.csv``)."""
    boots = [json.loads(line) for line in (folder / "boots.jsonl").read_text().splitlines() if line.strip()]
    version = boots[0].get("vllm_version", "unknown") if boots else "unknown"
    gpu = "H200" if "H200" in (folder / "gpu.csv").read_text() else "unknown"
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for line in (folder / "grid.jsonl").read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            groups[(row["model"], row["draft_cap"], row["conc"])].append(row)
    points = []
    for (model, cap, conc), rows in sorted(groups.items()):
        r0 = rows[0]
        points.append(GridPoint(
            model=model, gpu=gpu, vllm_version=version, concurrency=conc, k=r0["k"], draft_cap=cap,
            tokens_per_seq=statistics.median(r["tokens_per_seq_step"] for r in rows),
            context=r0["prompt_len"] + (r0["out_short"] + r0["out_long"]) / 2,
            step_ms=statistics.median(r["step_ms"] for r in rows), reps=len(rows),
            source=f"calibration/{GRID_DIR}/{folder.name}/grid.jsonl",
        ))  # fmt: skip
    return points


def _shape(pt: GridPoint) -> sc.StepShape:
    if pt.draft_cap == 0:
        return sc.StepShape(seqs=pt.concurrency, tokens_per_seq=1, context=pt.context)
    # Every sequence drafts in these runs (dummy weights repeat), so draft_share is 1.
    return sc.StepShape(seqs=pt.concurrency, tokens_per_seq=max(1.0, pt.tokens_per_seq), context=pt.context,
                        spec=True, draft_share=1.0, k=pt.k)  # fmt: skip


def _spec_base(p: ModelProfile, pt: GridPoint) -> tuple[float, str]:
    """Predicted verification step without the two fitted spec-step terms (seconds), graph mode."""
    cost = sc.step_cost(p, get_gpu(pt.gpu), 1, _shape(pt))
    return cost.total - cost.t_spec_fixed - cost.t_draft, cost.graph_mode


def fit_spec_constants(points: list[GridPoint], profiles: dict[str, ModelProfile]) -> tuple[float, float]:
    """(SPEC_STEP_FIXED_S, SPEC_STEP_PER_SEQ_S) minimising the summed |log(pred/meas)| of the
    verification steps in ``points`` (grid search over FIT_A_GRID x FIT_B_GRID; ties: smaller a, b)."""
    spec = [(pt, _spec_base(profiles[pt.model], pt)[0]) for pt in points if pt.draft_cap > 0]
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
    plain_meas = {(pt.model, pt.concurrency): pt.step_ms for pt in points if pt.draft_cap == 0}
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
        pm = plain_meas.get((pt.model, pt.concurrency))
        spec_point = pt.draft_cap > 0 and pm
        out.append(PointResult(
            model=pt.model, concurrency=pt.concurrency, draft_cap=pt.draft_cap, tokens_per_seq=pt.tokens_per_seq,
            step_ms_meas=pt.step_ms, step_ms_pred=round(pred * 1e3, 3),
            r_meas=round(pt.step_ms / pm, 3) if spec_point else None,
            r_pred=round(pred / plain_pred.total, 3) if spec_point else None, graph_mode=mode,
        ))  # fmt: skip
    return out


def _abs_log_r(results: list[PointResult]) -> list[float]:
    return [abs(math.log(r.r_pred / r.r_meas)) for r in results if r.r_meas and r.r_pred]


def evaluate(calibration_dir: Path, profile_for: ProfileFn) -> dict:
    """The ``gpu_steps`` section of ``calibrate --evaluate``: per-point table, in-sample and
    leave-one-concurrency-out errors of R, and what is missing for leave-one-model-out."""
    points = [pt for folder in grid_dirs(calibration_dir) for pt in load_points(folder)]
    if not points:
        return {"available": False, "reason": f"no grid under calibration/{GRID_DIR}/"}
    profiles = {m: profile_for(MODEL_IDS.get(m, m)) for m in {pt.model for pt in points}}
    shipped = predict_points(points, profiles)
    before = predict_points(points, profiles, constants=sc.SPEC_STEP_COSTS["seed"])
    loco: list[PointResult] = []
    for conc in sorted({pt.concurrency for pt in points}):
        train = [pt for pt in points if pt.concurrency != conc]
        held = [pt for pt in points if pt.concurrency == conc]
        consts = fit_spec_constants(train, profiles)
        loco += predict_points(held, profiles, constants=consts)
    models = sorted(profiles)
    plain = [abs(math.log(r.step_ms_pred / r.step_ms_meas)) for r in shipped if r.draft_cap == 0]

    def med(xs: list[float]) -> float | None:
        return round(statistics.median(xs), 4) if xs else None

    oos = med(_abs_log_r(loco))
    return {
        "available": True,
        "sources": sorted({pt.source for pt in points}),
        "models": models,
        "vllm_versions": sorted({pt.vllm_version for pt in points}),
        "points": len(points),
        "constants": {"SPEC_STEP_FIXED_S": sc.SPEC_STEP_FIXED_S, "SPEC_STEP_PER_SEQ_S": sc.SPEC_STEP_PER_SEQ_S},
        "plain_median_abs_log_step": med(plain),
        "r_median_abs_log_before_refit": med(_abs_log_r(before)),
        "r_median_abs_log_in_sample": med(_abs_log_r(shipped)),
        "r_median_abs_log_leave_one_concurrency_out": oos,
        "r_median_abs_log_leave_one_model_out": None,
        "leave_one_model_out_note": (
            f"needs a second measured model; measured so far: {', '.join(models)}" if len(models) < 2 else None
        ),
        "goal": GOAL_MEDIAN_ABS_LOG_R,
        "meets_goal": oos is not None and oos <= GOAL_MEDIAN_ABS_LOG_R,
        "table": [r.model_dump() for r in shipped],
    }
