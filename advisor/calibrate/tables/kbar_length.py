"""How K̄ grows with the output length: each real-weight load's own outputs replayed whole and cut at half.

    advisor calibrate rebuild kbar_length [--check]   # calibration/kbar_length.csv (needs Arctic Inference and
                                                      # .cache/models/SmolLM2-135M-Instruct: scripts/build_smollm2.py)

One row per speculative configuration and load of every evidence source of advisor.calibrate.tables.kbar_own_priors
(``calibration/real_cpu/run-*/``, ``calibration/gpu_real/**/`` with a ``replay.json``): the vanilla run's own
outputs for that load, replayed offline (advisor.kbar.runs.replay_boot, one fresh cache per load) as recorded
(``own_full``, outputs of up to max_tokens) and cut at max_tokens // 2 (``own_half``); ``growth`` = own_full /
own_half, K̄'s factor per doubling of the output length on this load. kbar_own_priors carries each measured K̄
to the priors' common output length with it (advisor.predict.kbar_prior.PRIOR_MAX_TOKENS): the CPU runs
generated 128 tokens, the H200 runs 256, and SmolLM2's suffix K̄ on ShareGPT is about 1.3x higher at 256 than
at 128 (it repeats itself in long answers), which a prior mixing the two without it would blur.
"""

from __future__ import annotations

import json
from pathlib import Path

from advisor.errors import DataError
from advisor.kbar import runs

OUTPUTS = ("kbar_length.csv",)
INPUTS = ("the vanilla responses of calibration/real_cpu/run-*/ and calibration/gpu_real/**/ (with a replay.json), "
          "replayed offline (needs Arctic Inference and .cache/models/SmolLM2-135M-Instruct)")
FIELDS = ["source", "corpus", "config", "concurrency", "max_tokens", "requests", "own_full", "own_half", "growth"]


def model_dir(cal: Path) -> Path:
    """SmolLM2-135M-Instruct's tokenizer, built by scripts/build_smollm2.py beside the checkout's calibration/."""
    return cal.parent / ".cache" / "models" / "SmolLM2-135M-Instruct"


def _row(source: str, corpus: str, config: str, conc: int, max_tokens: int, prs: list) -> dict:
    method, k = runs.method_k(config)
    half = max_tokens // 2
    full = runs.replay_boot(method, k, [(conc, prs)])[0]["tokens_per_step"]
    cut = runs.replay_boot(method, k, [(conc, [(p, ids[:half]) for p, ids in prs])])[0]["tokens_per_step"]
    return {"source": source, "corpus": corpus, "config": config, "concurrency": conc, "max_tokens": max_tokens,
            "requests": len(prs), "own_full": round(full, 4), "own_half": round(cut, 4), "growth": round(full / cut, 4)}  # fmt: skip


def rows_cpu(cal: Path, tok) -> list[dict]:
    out = []
    for path in sorted(cal.glob("real_cpu/run-*/results.json")):
        res = json.loads(path.read_text())
        src = str(path.relative_to(cal.parent))
        for corpus, body in res["corpora"].items():
            lines = [json.loads(x) for x in (path.parent / f"responses-{corpus}.jsonl").read_text().splitlines() if x.strip()]
            prs = runs.pairs(tok, [x for x in lines if x.get("config") == "vanilla"], res["max_tokens"])
            for cfg in body["configs"]:
                out.append(_row(src, corpus, cfg, res["concurrency"], res["max_tokens"], prs))
    return out


def rows_gpu(cal: Path, tok) -> list[dict]:
    out = []
    for path in sorted(cal.glob("gpu_real/**/replay.json")):
        run, src = path.parent, str(path.relative_to(cal.parent))
        groups = runs.by_config(runs.read_records(run))
        plain = {(r["corpus"], r["concurrency"]): r for r in groups.get("vanilla", [])}
        for cfg, recs in groups.items():
            if cfg == "vanilla" or cfg.split(":")[0] not in runs.REPLAYED:
                continue
            for r in recs:
                mt = r.get("max_tokens") or 256
                prs = runs.pairs(tok, runs.responses(run, "vanilla", plain[(r["corpus"], r["concurrency"])]), mt)
                out.append(_row(src, Path(r["corpus"]).stem, cfg, r["concurrency"], mt, prs))
    return out


def build(cal: Path) -> dict[str, str]:
    """{file name: text}: every load's growth, replayed now."""
    from advisor.kbar.replay import arctic_available
    from advisor.kbar.tokenize import load_tokenizer

    if not model_dir(cal).is_dir() or not arctic_available():
        raise DataError("kbar_length replays the committed runs: it needs Arctic Inference (scripts/install_arctic.sh) "
                        f"and {model_dir(cal)} (scripts/build_smollm2.py)")
    tok = load_tokenizer(str(model_dir(cal)))
    rows = rows_cpu(cal, tok) + rows_gpu(cal, tok)
    from advisor.calibrate.tables import csv_text

    return {OUTPUTS[0]: csv_text(rows, FIELDS)}
