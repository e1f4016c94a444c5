"""What an MTP step costs on a host, from ``mtp:K`` probes against vanilla (``advisor probe --configs
vanilla,mtp:1,mtp:3``), per drafter class: one vLLM runs eagerly (``VllmFacts.mtp_eager_drafters``: GLM-4.5's) or
compiles (DeepSeek-V3/R1's, Qwen3-Next's).

A step of ``mtp:K`` measures ``tokens_per_step x requests in flight / output tok/s`` (vLLM's counters, the same
definition as every probe's R). Its excess over the same pass's vanilla step is the drafting (K forwards of the MTP
layer, the EAGLE-style input preparation, the rejection sampler) and the verification's growth from 1 to 1 + K
tokens. It is fitted as a per-step cost for the first draft plus one per further draft, without a per-sequence term
(the measured excess did not grow from concurrency 1 to 32, for either class): host work per step. Eager (campaign 9,
GLM-4.5-Air cut to 12 layers): 6.1 ms + 3.5 ms per further draft. Compiled (campaign 10, DeepSeek-V3 cut to 4 layers,
its drafter compiled and graph-captured, as the boot log says): 3.5 ms + 0.9 ms; compiling removes most of each
further draft's cost, not the first draft's.

Pure: records in (read at the CLI edge), figures out. ``fit`` gives the two costs (medians over concurrency and
passes), ``evaluate`` checks them leave-one-concurrency-out against the R they predict, beside the R the ASSUMED
GPU-only drafter predicts (one MTP layer's share of the roofline, ``absolute.mtp_gain(..., gpu_only=True)``).
"""

from __future__ import annotations

from advisor.calibrate import manifests
import math
import statistics
from collections import defaultdict

MTP_EAGER_FIT = manifests.folders("mtp_eager_fit")
"""calibration/manifests.yaml ``mtp_eager_fit``."""
MTP_COMPILED_FIT = manifests.folders("mtp_compiled_fit")
"""calibration/manifests.yaml ``mtp_compiled_fit``."""
FIT_FOLDERS = {"eager": MTP_EAGER_FIT, "compiled": MTP_COMPILED_FIT}


def step_ms(r) -> float:
    """Milliseconds per engine step of a probe record: tokens per step x requests in flight / output tok/s."""
    return (r.tokens_per_step or 1.0) * r.in_flight / r.throughput_tok_s * 1e3


def points(records) -> list[dict]:
    """One point per ``mtp:K`` run, paired with its pass's vanilla (``host_infer.probe_pairs``: the same campaign, the
    latest vanilla started before it), R the step-time ratio the pair measured."""
    from advisor.calibrate.host_infer import probe_pairs

    pairs = [p for ps in probe_pairs(records, methods=("mtp",)).values() for p in ps]
    return [{"run": p.suf.log_path.rsplit("/", 2)[-2] if p.suf.log_path else p.suf.campaign_id,
             "concurrency": p.suf.concurrency, "k": p.k, "seqs": p.suf.in_flight, "model": p.suf.model, "gpu": p.suf.gpu,
             "tp": p.suf.tensor_parallel_size, "vanilla_ms": step_ms(p.van), "mtp_ms": step_ms(p.suf),
             "k_bar": p.kbar, "r_measured": p.r_meas}
            for p in sorted(pairs, key=lambda p: (p.suf.concurrency, p.suf.started_at))]  # fmt: skip


def fit(pts: list[dict], drafter: str = "eager") -> dict:
    """(first-draft, per-further-draft) seconds: medians over the points of the step's excess over the same pass's
    vanilla step at the same concurrency (``mtp:1``: the first draft; ``mtp:K`` > 1: (excess - first) / (K - 1)).
    The excess is measured whole (drafting, input preparation, rejection and the verification's growth from 1 to
    1 + K tokens), so ``absolute.mtp_gain`` prices an eager step as max(the modelled verification step, the
    plain step + this cost): the GPU verification alone where it is the larger."""
    excess = defaultdict(list)
    for pt in pts:
        excess[pt["k"]].append(pt["mtp_ms"] - pt["vanilla_ms"])
    if 1 not in excess:
        return {"available": False, "reason": "no mtp:1 runs"}
    first = statistics.median(excess[1])
    further = [(e - first) / (k - 1) for k, es in excess.items() if k > 1 for e in es]
    per = statistics.median(further) if further else 0.0
    return {"available": True, f"mtp_{drafter}_step_s": round(max(0.0, first) / 1e3, 5),
            f"mtp_{drafter}_per_draft_s": round(max(0.0, per) / 1e3, 5), "points": len(pts)}


def r_predicted(profile, pt: dict, build: str, context: float, *, eager: bool,
                costs: tuple[float, float] | None) -> float:
    """R of ``pt``'s setting as ``absolute.mtp_gain`` prices it for the drafter class: with the given costs
    (seconds), or the ASSUMED GPU-only drafter (``None``)."""
    from advisor.hardware.gpus import get_gpu
    from advisor.predict.absolute import ReplicaLayout, mtp_gain

    seqs = max(1, round(pt["seqs"]))
    _, r, _ = mtp_gain(profile, get_gpu(pt["gpu"]), ReplicaLayout(tp=pt["tp"]), seqs, context, pt["k"], build=build,
                       eager=eager, eager_costs=costs, gpu_only=costs is None)  # fmt: skip
    return r


def evaluate(records, profile_of, build: str, context: float, shipped: tuple[float, float],
             drafter: str = "eager") -> dict:
    """The fit on every point, the shipped costs' agreement with it, and leave-one-concurrency-out: each
    concurrency's step excess and R predicted from the costs fitted on the others (R as ``mtp_gain`` prices it,
    the plain step modelled), against the GPU-only drafter's R."""
    eager = drafter == "eager"
    pts = points(records)
    if not pts:
        return {"available": False, "reason": "no vanilla + mtp:K probe records"}
    full = fit(pts, drafter)
    step_key, per_key = f"mtp_{drafter}_step_s", f"mtp_{drafter}_per_draft_s"
    rows, err_x, err_fit, err_gpu = [], [], [], []
    for conc in sorted({p["concurrency"] for p in pts}):
        f = fit([p for p in pts if p["concurrency"] != conc], drafter)
        if not f.get("available"):
            continue
        costs = (f[step_key], f[per_key])
        for pt in (p for p in pts if p["concurrency"] == conc):
            prof = profile_of(pt["model"])
            x_pred = (costs[0] + (pt["k"] - 1) * costs[1]) * 1e3
            x_meas = pt["mtp_ms"] - pt["vanilla_ms"]
            r_fit = r_predicted(prof, pt, build, context, eager=eager, costs=costs)
            r_gpu = r_predicted(prof, pt, build, context, eager=eager, costs=None)
            err_x.append(abs(math.log(x_pred / x_meas)))
            err_fit.append(abs(math.log(r_fit / pt["r_measured"])))
            err_gpu.append(abs(math.log(r_gpu / pt["r_measured"])))
            rows.append({"run": pt["run"], "concurrency": conc, "k": pt["k"], "excess_ms_measured": round(x_meas, 2),
                         "excess_ms_held_out": round(x_pred, 2), "r_measured": round(pt["r_measured"], 3),
                         "r_held_out": round(r_fit, 3), "r_gpu_only": round(r_gpu, 3)})  # fmt: skip

    def med(xs):
        return round(statistics.median(xs), 4) if xs else None

    return {"available": True, "drafter": drafter, "build": build, "fit": full,
            "shipped": {step_key: shipped[0], per_key: shipped[1]},
            "shipped_matches_fit": bool(full.get("available")) and math.isclose(shipped[0], full[step_key], rel_tol=0.02)
            and math.isclose(shipped[1], full[per_key], rel_tol=0.02, abs_tol=1e-5),
            "leave_one_concurrency_out": {"median_abs_log_excess": med(err_x), "median_abs_log_r": med(err_fit),
                                          "gpu_only_median_abs_log_r": med(err_gpu), "rows": rows}}  # fmt: skip
