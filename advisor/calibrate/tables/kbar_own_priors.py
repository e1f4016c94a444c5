"""Per-corpus K̄ priors from real weights: vLLM's measured acceptance and the two offline replays.

    advisor calibrate rebuild kbar_own_priors [--check]   # calibration/kbar_own_evidence.csv and
                                                          # calibration/kbar_own_priors.csv

Evidence (one row per measured setting: host, corpus, configuration, concurrency):
- ``calibration/real_cpu/run-*/results.json`` (``calibration/real_cpu/measure.py``: vLLM 0.32 on
  this project's 2-core CPU machine);
- ``calibration/gpu_real/**/replay.json`` (``calibration/gpu_real/replay_own.py`` over the lead's
  ``real_campaign.py`` runs on the H200, vLLM 0.26), when present.

Each row has vLLM's measured K̄ (tokens per step), the own-output replay's (the vanilla run's
outputs), the reference-response replay's, own / reference, and K̄'s growth per doubling of the output
length on that load's own outputs (``calibration/kbar_length.csv``, advisor/calibrate/tables/kbar_length.py): the
priors are stated at kbar_prior.PRIOR_MAX_TOKENS output tokens, each measured K̄ carried there with it. A prior per corpus and method:
``k_bar`` = median measured K̄ over the settings; ``k_bar_low``/``k_bar_high`` = the lowest and
highest measured, each scaled by its own-output replay's 95% bootstrap interval over requests
(the sampling spread of a few dozen prompts) and widened by the largest |ln(own replay /
measured)| seen for that method (the replay's own error); ``own_over_reference`` = median
of measured / reference replay, the factor by which replaying a corpus's reference responses
under-predicts this model's acceptance, with its min and max. All from one model (SmolLM2-135M-
Instruct, the only real checkpoint the project can run): say so wherever it is used.
"""

from __future__ import annotations

import csv
import json
import math
import shlex
from pathlib import Path

from advisor.calibrate import manifests
from advisor.predict.kbar_prior import derive_own

OUTPUTS = ("kbar_own_evidence.csv", "kbar_own_priors.csv")
INPUTS = "calibration/real_cpu/run-*/results.json, calibration/gpu_real/**/replay.json, calibration/kbar_length.csv"
FIELDS = ["source", "host", "vllm", "dtype", "model", "corpus", "config", "method", "k", "concurrency", "max_tokens", "requests",
          "measured_k_bar", "own_k_bar", "own_same_run_k_bar", "reference_k_bar", "ln_own", "ln_reference",
          "measured_over_reference", "own_ci_low", "own_ci_high", "growth_per_doubling"]  # fmt: skip


def _growth(cal: Path) -> dict[tuple, str]:
    """{(source, corpus, config, concurrency): K̄'s growth per doubling of the output length} from
    calibration/kbar_length.csv (advisor.calibrate.tables.kbar_length; several loads of one key: the first, in file order)."""
    out: dict[tuple, str] = {}
    length = cal / "kbar_length.csv"
    if length.is_file():
        for r in csv.DictReader(length.open()):
            out.setdefault((r["source"], r["corpus"], r["config"], int(r["concurrency"])), r["growth"])
    return out


def _rows_cpu(cal: Path) -> list[dict]:
    cpu = manifests.labels("real_cpu_runs")  # the campaign's host and vLLM version (results.json records neither)
    rows = []
    for path in sorted(cal.glob("real_cpu/run-*/results.json")):
        res = json.loads(path.read_text())
        for corpus, body in res["corpora"].items():
            for cfg, r in body["configs"].items():
                rows.append(_row(str(path.relative_to(cal.parent)), cpu["host"], cpu["vllm"],
                                 res["model"], corpus, cfg, res["concurrency"], res["max_tokens"], r,
                                 dtype=_dtype(shlex.split(res.get("extra_args") or ""))))  # fmt: skip
    return rows


def _rows_gpu(cal: Path) -> list[dict]:
    rows = []
    for path in sorted(cal.glob("gpu_real/**/replay.json")):
        res = json.loads(path.read_text())
        first = json.loads((path.parent / "records.jsonl").read_text().splitlines()[0])
        for r in res["rows"]:
            rows.append(_row(str(path.relative_to(cal.parent)), r.get("gpu") or "gpu", r.get("vllm_version") or "",
                             "SmolLM2-135M-Instruct", r["corpus"], r["config"], r["concurrency"], r["max_tokens"], r,
                             dtype=_dtype(first.get("command") or [])))  # fmt: skip
    return rows


def _dtype(argv: list[str], model_dtype: str = "bfloat16") -> str:
    """The dtype a server ran at: its ``--dtype`` (``--dtype X`` or ``--dtype=X``), else the model's own
    (SmolLM2's config.json says bfloat16; ``auto`` means that too)."""
    for i, a in enumerate(argv):
        value = a.split("=", 1)[1] if a.startswith("--dtype=") else argv[i + 1] if a == "--dtype" and i + 1 < len(argv) else None
        if value:
            return model_dtype if value == "auto" else {"bf16": "bfloat16", "fp32": "float32", "float": "float32"}.get(value, value)
    return model_dtype


def _row(source, host, vllm, model, corpus, cfg, conc, max_tokens, r, *, dtype: str) -> dict:
    m, own, ref = r["measured"]["tokens_per_step"], r["own"]["tokens_per_step"], r["reference"]["tokens_per_step"]
    method, k = cfg.split(":")[0], int(cfg.split(":")[1].split("@")[0])
    return {"source": source, "host": host, "vllm": vllm, "dtype": dtype, "model": model, "corpus": corpus, "config": cfg,
            "method": method, "k": k, "concurrency": conc, "max_tokens": max_tokens,
            "requests": r["measured"].get("requests"), "measured_k_bar": round(m, 4), "own_k_bar": round(own, 4),
            "own_same_run_k_bar": round(r["own_same_run"]["tokens_per_step"], 4), "reference_k_bar": round(ref, 4),
            "ln_own": round(math.log(own / m), 4), "ln_reference": round(math.log(ref / m), 4),
            "measured_over_reference": round(m / ref, 4),
            "own_ci_low": _r(r["own"].get("ci_low")), "own_ci_high": _r(r["own"].get("ci_high"))}  # fmt: skip


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 4)


def build(cal: Path) -> dict[str, str]:
    """{file name: text} of the evidence table and the priors derived from it."""
    rows = _rows_cpu(cal) + _rows_gpu(cal)
    growth = _growth(cal)
    for r in rows:
        r["growth_per_doubling"] = growth.get((r["source"], r["corpus"], r["config"], int(r["concurrency"])), "")
    priors = derive_own(rows)  # the one derivation (advisor.predict.kbar_prior), also used leave-one-host-out
    from advisor.calibrate.tables import csv_text

    return {OUTPUTS[0]: csv_text(rows, FIELDS), OUTPUTS[1]: csv_text(priors, list(priors[0]))}
