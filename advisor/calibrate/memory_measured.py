"""The memory planner against real vLLM's own start-up lines (``calibrate --evaluate``'s ``gpu_memory``).

Every boot of the GPU grid (``calibration/gpu_steps/<host>-vllm<version>/boots.jsonl``, one engine
log per boot beside it) logged "Available KV cache memory: X GiB" and, with speculation, "Estimated
CUDA graph memory: Y GiB" (vllm/v1/worker/gpu_worker.py ``determine_available_memory``,
gpu_model_runner.py ``profile_cudagraph_memory``). This module plans the same configuration (the
boot's model, K, gmu and max_model_len; TP 1, the ``LLM`` class's scheduler defaults) and sets the
two side by side. Pure reads of shipped files; no GPU needed.
"""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from advisor.hardware.gpus import get_gpu
from advisor.domain.decision import Decision
from advisor.plan.memory import plan_memory
from advisor.predict.dataset import ProfileFn
from advisor.calibrate.gpu_steps import GRID_DIR, MODEL_IDS, folder_gpu, grid_dirs, spec_method

GOAL_KV_REL_ERR = 0.05
"""Issue goal: the planner's KV cache within 5 % of real vLLM's at K=0 and K=32."""
_KV = re.compile(r"Available KV cache memory: ([\d.]+) GiB")
_GRAPH = re.compile(r"Estimated CUDA graph memory: ([\d.]+) GiB")


class MemoryPoint(BaseModel):
    """One boot: vLLM's own figures and the planner's for the same configuration (GiB per GPU)."""

    model_config = ConfigDict(extra="forbid")

    model: str
    k: int
    method: str = ""
    """The boot's speculative method (suffix, ngram; "" without speculation)."""
    gpu: str
    vllm_version: str
    kv_measured: float
    kv_planned: float
    rel_err: float
    weights_measured: float
    weights_planned: float
    graph_estimate_measured: float | None
    """vLLM's CUDA-graph estimate (subtracted from the KV budget); None where the log has no such line."""
    graph_planned: float
    source: str


def measured_points(calibration_dir: Path, profile_for: ProfileFn) -> list[MemoryPoint]:
    """One MemoryPoint per logged boot of every grid folder (a boot whose log lacks the KV line is skipped)."""
    out = []
    for folder in grid_dirs(calibration_dir):
        gpu = folder_gpu(folder)
        for line in (folder / "boots.jsonl").read_text().splitlines():
            if not line.strip():
                continue
            boot = json.loads(line)
            log = folder / f"{boot.get('boot')}.log"
            text = log.read_text(errors="replace") if log.is_file() else ""
            kv = _KV.search(text)
            if not kv:
                continue
            graph = _GRAPH.search(text)
            k = int(boot["k"])
            method = spec_method(boot["spec"])
            d = Decision(speculative_method=method or None, num_speculative_tokens=k or None,
                         gpu_memory_utilization=boot["gmu"], tensor_parallel_size=1, max_model_len=boot["max_model_len"])  # fmt: skip
            version = boot.get("vllm_version", "unknown")
            plan = plan_memory(profile_for(MODEL_IDS.get(boot["model"], boot["model"])), get_gpu(gpu), d, num_gpus=1,
                               vllm_version=version)  # fmt: skip
            t = plan.terms_gib
            meas = float(kv.group(1))
            out.append(MemoryPoint(
                model=boot["model"], k=k, method=method, gpu=gpu, vllm_version=version,
                kv_measured=meas, kv_planned=round(t["kv_cache"], 2), rel_err=round(t["kv_cache"] / meas - 1, 4),
                weights_measured=boot["model_memory_gib"], weights_planned=round(t["weights"], 2),
                graph_estimate_measured=float(graph.group(1)) if graph else None,
                graph_planned=round(t.get("cudagraph", 0.0), 2),
                source=f"calibration/{GRID_DIR}/{folder.name}/{log.name}",
            ))  # fmt: skip
    return out


def evaluate(calibration_dir: Path, profile_for: ProfileFn) -> dict:
    """The ``gpu_memory`` section: per-boot table, worst and median relative KV error, the goal."""
    pts = measured_points(calibration_dir, profile_for)
    if not pts:
        return {"available": False, "reason": "no boot logs with vLLM's 'Available KV cache memory' line"}
    errs = [abs(p.rel_err) for p in pts]
    return {
        "available": True,
        "boots": len(pts),
        "models": sorted({p.model for p in pts}),
        "ks": sorted({p.k for p in pts}),
        "kv_median_abs_rel_err": round(statistics.median(errs), 4),
        "kv_max_abs_rel_err": round(max(errs), 4),
        "goal": GOAL_KV_REL_ERR,
        "meets_goal": max(errs) <= GOAL_KV_REL_ERR,
        "table": [p.model_dump() for p in pts],
    }
