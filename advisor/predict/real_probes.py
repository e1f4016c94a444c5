"""Real-weight probes against the predictor (``calibrate --evaluate``'s ``real_probes`` section:
issue #22's evaluation (b)).

The CLI reads every ``calibration/**/probes.sqlite`` and ``calibration/**/records.jsonl`` and hands the records in; records with
real weights on a GPU that form a campaign (one model, corpus, concurrency, host) with a
``vanilla`` run and ``suffix:K`` and/or ``ngram:K`` runs are scored. For each campaign the predictor
is asked, without the measured K̄ (that would be the answer), for each option's gain on that host
(its host profile by GPU, CPU model and vLLM version), chooses the best of plain / suffix / n-gram,
and is scored on

- ``chosen_within_2pct``: the chosen option's measured throughput is within 2 % of the best measured;
- ``median_abs_log_gain_error``: median |ln(predicted / measured)| over every speculative option.

A probed model the catalog does not know (e.g. a directory on the GPU machine) is resolved by its
folder name under ``.cache/models/`` (scripts/build_smollm2.py builds SmolLM2-135M-Instruct there).
"""

from __future__ import annotations

import math
import statistics
from pathlib import Path

GOAL_WITHIN = 0.02
GOAL_MEDIAN_ABS_LOG = 0.15


def _profile(model: str, profile_of, calibration_dir: Path):
    from advisor.errors import AdvisorError
    from advisor.predict.host_infer import profile_for_record

    try:
        return profile_for_record(model, profile_of)
    except AdvisorError:
        local = calibration_dir.parent / ".cache" / "models" / model.rstrip("/").rsplit("/", 1)[-1]
        if local.is_dir():
            return profile_of(str(local))
        raise


def usable(records: list) -> list:
    """The records evaluation (b) scores: finished, measured, on a GPU, with real weights."""
    return [r for r in records if r.outcome == "ok" and r.throughput_tok_s and r.gpu and r.weights == "real"]


def evaluate(records: list, calibration_dir: Path, profile_of) -> dict:
    """Score ``records`` (ProbeRecords read at the edge: ``cli/calibrate.py``'s ``calibration_records``)."""
    from advisor.domain.workload import Workload
    from advisor.errors import AdvisorError
    from advisor.hardware.gpus import get_gpu
    from advisor.predict import kbar_prior as kp
    from advisor.predict.absolute import ReplicaLayout, ngram_gain
    from advisor.predict.api import predict

    recs = usable(records)
    by: dict[str, list] = {}
    for r in recs:
        by.setdefault(r.campaign_id, []).append(r)
    rows, skipped = [], []
    for cid, rs in sorted(by.items()):
        vans = [r for r in rs if r.config == "vanilla"]
        specs = [r for r in rs if r.config.split(":", 1)[0] in ("suffix", "ngram") and "@" not in r.config]
        if not vans or not specs:
            continue
        van = max(vans, key=lambda v: v.started_at)
        try:
            p = _profile(van.model, profile_of, calibration_dir)
        except AdvisorError as exc:
            skipped.append(f"{cid}: {exc}")
            continue
        gpu = get_gpu(van.gpu)
        cpu = ((van.host or {}).get("cpu") or {}).get("model")
        corpus = Path(van.corpus).stem if van.corpus.endswith(".jsonl") else van.corpus
        work = Workload(corpus=corpus, concurrency=van.concurrency)
        options = {"vanilla": (1.0, 1.0)}
        for s in specs:
            method, k = s.config.split(":", 1)[0], int(s.config.split(":", 1)[1] or 0)
            sp = predict(p, gpu, s.tensor_parallel_size, work, host_state="OFF", k=k if method == "suffix" else 32,
                         cpu_model=cpu, vllm_version=s.vllm_version)  # fmt: skip
            if method == "suffix":
                pred = sp.gain
            else:
                ctx = kp.shape_for(corpus).context(p.family)
                pred = ngram_gain(p, gpu, ReplicaLayout(tp=s.tensor_parallel_size), s.concurrency, ctx, k, sp.k_bar)[0].value
            options[s.config] = (pred, s.throughput_tok_s / van.throughput_tok_s)
        chosen = max(options, key=lambda o: options[o][0])
        best = max(m for _, m in options.values())
        rows.append({"campaign": cid, "model": van.model, "corpus": corpus, "concurrency": van.concurrency, "gpu": van.gpu,
                     "options": {o: {"predicted": round(a, 4), "measured": round(b, 4)} for o, (a, b) in options.items()},
                     "chosen": chosen, "chosen_frac": round(options[chosen][1] / best, 4),
                     "within_2pct": options[chosen][1] >= (1 - GOAL_WITHIN) * best})  # fmt: skip
    if not rows:
        return {"available": False, "reason": "no real-weight GPU probe campaigns under calibration/ (vanilla + "
                                              "suffix/ngram with weights=real)", "skipped": skipped}  # fmt: skip
    errs = [abs(math.log(o["predicted"] / o["measured"])) for r in rows for name, o in r["options"].items() if name != "vanilla"]
    med = statistics.median(errs)
    within = sum(r["within_2pct"] for r in rows) / len(rows)
    return {"available": True, "campaigns": len(rows), "chosen_within_2pct_share": round(within, 4),
            "median_abs_log_gain_error": round(med, 4),
            "meets_goal": within == 1.0 and med <= GOAL_MEDIAN_ABS_LOG, "rows": rows, "skipped": skipped}  # fmt: skip
