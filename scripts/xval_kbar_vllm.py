#!/usr/bin/env python3
"""Cross-check ``advisor kbar``'s replay against real vLLM's suffix-decoding metrics.

    python scripts/xval_kbar_vllm.py [--venv .cache/vllm-venv] [--model .cache/tiny-llama] [--batch]

Runs vLLM 0.32 (CPU, the venv of scripts/setup_vllm_venv.sh) offline on the tiny random Llama of
tests/vllm_helpers/make_tiny_llama.py with suffix decoding (K=32, vLLM's defaults otherwise),
greedy, ``ignore_eos``, 200 tokens per request, 24 token-id prompts built from repeated motifs;
one request at a time (``--batch``: all 24 at once). Then replays the recorded prompts and outputs
through ``advisor.kbar.replay`` and compares vLLM's ``spec_decode_num_drafts`` /
``num_draft_tokens`` / ``num_accepted_tokens`` counters with the replay's.

Expected (one at a time): drafts and drafted tokens equal exactly; vLLM's accepted count is a
little higher, because the last step of a request cut at max_tokens verifies its draft against
tokens the model generates past the cut (counted as accepted, then dropped), which the recorded
output does not contain. Exit status 1 when drafts or drafted tokens differ (one-at-a-time mode).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
N_REQUESTS, MAX_TOKENS, K = 24, 200, 32


def _prompts() -> list[list[int]]:
    rng = random.Random(0)
    motifs = [[rng.randrange(3, 1000) for _ in range(rng.randrange(5, 30))] for _ in range(6)]
    prompts = []
    for _ in range(N_REQUESTS):
        p: list[int] = []
        while len(p) < 120:
            p += rng.choice(motifs) if rng.random() < 0.5 else [rng.randrange(3, 1000) for _ in range(rng.randrange(1, 10))]
        prompts.append(p[: rng.randrange(40, 160)])
    return prompts


def worker(model: str, batch: bool, out: str) -> None:
    """Runs inside the vLLM venv: generate and dump prompts, outputs and the spec-decode counters."""
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt

    prompts = _prompts()
    llm = LLM(model=model, speculative_config={"method": "suffix", "num_speculative_tokens": K},
              max_model_len=512, dtype="float32", enforce_eager=True, disable_log_stats=False, seed=0)  # fmt: skip
    sp = SamplingParams(temperature=0.0, max_tokens=MAX_TOKENS, ignore_eos=True)
    if batch:
        res = llm.generate([TokensPrompt(prompt_token_ids=p) for p in prompts], sp, use_tqdm=False)
    else:
        res = [llm.generate([TokensPrompt(prompt_token_ids=p)], sp, use_tqdm=False)[0] for p in prompts]
    counters = {m.name: m.value for m in llm.get_metrics() if m.name.startswith("vllm:spec_decode_num") and hasattr(m, "value")}
    with open(out, "w") as fh:
        json.dump({"prompts": prompts, "outputs": [list(r.outputs[0].token_ids) for r in res], "metrics": counters}, fh)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--venv", default=os.environ.get("ADVISOR_VLLM_VENV", str(ROOT / ".cache" / "vllm-venv")))
    ap.add_argument("--model", default=os.environ.get("ADVISOR_TINY_MODEL_DIR", str(ROOT / ".cache" / "tiny-llama")))
    ap.add_argument("--batch", action="store_true", help="all requests at once (concurrency 24)")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args.model, args.batch, args.worker)
        return 0

    python = Path(args.venv) / "bin" / "python"
    if not python.exists():
        print(f"no vLLM venv at {args.venv}: run scripts/setup_vllm_venv.sh", file=sys.stderr)
        return 2
    if not (Path(args.model) / ".done").exists():
        subprocess.run([str(python), str(ROOT / "tests" / "vllm_helpers" / "make_tiny_llama.py"), args.model], check=True)
    with tempfile.TemporaryDirectory() as tmp:
        out = str(Path(tmp) / "vllm.json")
        env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_TARGET_DEVICE": "cpu"}
        cmd = [str(python), __file__, "--worker", out, "--model", args.model] + (["--batch"] if args.batch else [])
        subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        with open(out) as fh:
            data = json.load(fh)

    sys.path.insert(0, str(ROOT))
    from advisor.kbar.replay import ReplayConfig, replay

    cfg = ReplayConfig(num_speculative_tokens=K, concurrency=N_REQUESTS if args.batch else 1, max_model_len=512)
    stats = list(replay(list(zip(data["prompts"], data["outputs"])), cfg))
    mine = {"vllm:spec_decode_num_drafts": sum(s.drafts for s in stats),
            "vllm:spec_decode_num_draft_tokens": sum(s.draft_tokens for s in stats),
            "vllm:spec_decode_num_accepted_tokens": sum(s.accepted for s in stats)}  # fmt: skip
    theirs = data["metrics"]
    print(f"{'counter':40s} {'vLLM':>8s} {'replay':>8s}")
    for name, value in mine.items():
        print(f"{name:40s} {theirs.get(name, float('nan')):>8} {value:>8}")
    exact = all(theirs.get(n) == mine[n] for n in list(mine)[:2])
    print("drafts and drafted tokens:", "identical" if exact else "differ")
    return 0 if exact or args.batch else 1


if __name__ == "__main__":
    raise SystemExit(main())
