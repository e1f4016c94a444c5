#!/usr/bin/env python3
"""Pre-register campaign 19 (issue 42 (b): real weights where speculation should win): what ``advisor recommend``
predicts for SmolLM2-135M-Instruct (real weights) serving the edit corpus (calibration/gpu_real/edit: code handed
back changed in one place), written before any device call, with the advisor commit that made it.

For each GPU the lent machine may be (H100 or H200; both report the CPU model "Intel(R) Xeon(R) Processor"), each
concurrency of the campaign (1, 8, 32), each option (suffix K=32, n-gram K=4; plain is 1 by definition) and each way
a user could describe this traffic:

- ``named``: ``--corpus blazedit``, the shipped corpus name for code-edit traffic (its K̄ is a published n-gram
  figure times the suffix/n-gram ratio, DERIVED);
- ``trace``: ``--corpus calibration/gpu_real/edit/edit_trace.jsonl``, the same prompts with reference answers
  written by someone else (K̄ replayed from the file);
- ``unknown``: no ``--corpus`` (the priors for unknown traffic).

Each figure is ``recommend MODEL --gpu G --gpus 1 --tp 1 --vllm-version 0.26 --concurrency C --spec S [--k 32 |
--ngram-k 4] --prompt-len P --output-len 256 --json``'s ``prediction`` (gain with its band, K̄, R, host profile), run
in-process with the host's CPU model set to the device's (the CLI reads the CPU to match a host profile).

    python scripts/c19_predictions.py --tokenizer .cache/models/SmolLM2-135M-Instruct \
        --out calibration/gpu_real/c19/predictions.json
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODEL = ROOT / "calibration/gpu_real/models/SmolLM2-135M-Instruct"
TRACE = ROOT / "calibration/gpu_real/edit/edit_trace.jsonl"
DEVICE_CPU = "Intel(R) Xeon(R) Processor"
GPUS = ("H100", "H200")
CONCURRENCY = (1, 8, 32)
OPTIONS = {"suffix:32": ("--spec", "suffix", "--k", "32"), "ngram:4": ("--spec", "ngram", "--ngram-k", "4")}
OUTPUT_LEN = 256


def _fake_cpu(model: str) -> None:
    import advisor.hardware.host as host

    real = host.collect_host

    def collect(*a, **kw):
        fp = real(*a, **kw)
        return fp.model_copy(update={"cpu": fp.cpu.model_copy(update={"model": model})})

    host.collect_host = collect


def _prompt_len(tokenizer: str) -> int:
    """Median prompt tokens of the edit corpus with the chat template (SmolLM2's tokenizer)."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tokenizer)
    lens = []
    for line in TRACE.read_text(encoding="utf-8").splitlines():
        user = json.loads(line)["messages"][:1]
        ids = tok.apply_chat_template(user, add_generation_prompt=True, tokenize=True)
        ids = ids["input_ids"] if hasattr(ids, "keys") else ids  # transformers 5 returns a BatchEncoding
        lens.append(len(ids))
    return int(statistics.median(lens))


def _recommend(args: list[str]) -> dict:
    from advisor.cli.app import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(args)
    if code != 0:
        raise SystemExit(f"recommend {' '.join(args)} exited {code}: {err.getvalue()[-2000:]}")
    return json.loads(out.getvalue())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokenizer", required=True, help="SmolLM2-135M-Instruct's directory (scripts/build_smollm2.py)")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    _fake_cpu(DEVICE_CPU)
    plen = _prompt_len(args.tokenizer)
    if plen < 64:
        raise SystemExit(f"median prompt length {plen} tokens: the tokenizer did not tokenize the prompts")
    corpora = {"named": ("--corpus", "blazedit"), "trace": ("--corpus", str(TRACE), "--tokenizer", args.tokenizer),
               "unknown": ()}  # fmt: skip
    rows = []
    for gpu in GPUS:
        for c in CONCURRENCY:
            for mode, corpus in corpora.items():
                for option, spec in OPTIONS.items():
                    cmd = [str(MODEL), "--gpu", gpu, "--gpus", "1", "--tp", "1", "--vllm-version", "0.26", "--concurrency",
                           str(c), *spec, "--prompt-len", str(plen), "--output-len", str(OUTPUT_LEN), *corpus, "--json"]  # fmt: skip
                    p = _recommend(["recommend", *cmd])["prediction"]
                    rows.append({"gpu": gpu, "concurrency": c, "corpus_mode": mode, "option": option,
                                 "gain": p["gain"], "gain_low": p["gain_low"], "gain_high": p["gain_high"],
                                 "k_bar": p["k_bar"], "r": p["r"], "host_profile": p.get("host_profile"),
                                 "host_match": p.get("host_match"), "k_bar_source": p["k_bar_source"],
                                 "command": "advisor recommend " + " ".join(cmd).replace(str(ROOT) + "/", "")})  # fmt: skip
                    print(f"{gpu} c{c} {mode:8s} {option:10s} gain {p['gain']:.3f} [{p['gain_low']:.2f}, "
                          f"{p['gain_high']:.2f}] K̄ {p['k_bar']:.2f} R {p['r']:.2f} {p.get('host_profile')}")  # fmt: skip
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    dirty = bool(subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "advisor", "calibration/host_profiles.csv",
                                 "rules"], capture_output=True, text=True).stdout.strip())  # fmt: skip
    body = {"advisor_commit": commit, "advisor_tree_dirty": dirty, "prompt_len_median": plen, "output_len": OUTPUT_LEN,
            "device_cpu": DEVICE_CPU, "note": __doc__.split("\n\n")[0], "predictions": rows}  # fmt: skip
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(body, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
