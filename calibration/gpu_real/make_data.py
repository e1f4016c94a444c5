"""The prompt files the H200 campaigns carry (.device/c3/data): humaneval (all 164, chat messages) and the
first N ShareGPT prompts of at most 7,680 characters (the campaigns' own filter: 2 x (4096 - 256)), in the
order ``advisor.probe.corpus`` reads them, so the first 600 are the files of campaigns 1-3.

    python calibration/gpu_real/make_data.py --out .device/c3/data --sharegpt 2400
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from advisor.probe.corpus import load_corpus


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--sharegpt", type=int, default=600, help="how many ShareGPT prompts (default 600)")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for name, limit in (("humaneval", None), ("sharegpt", args.sharegpt)):
        corpus = load_corpus(name, limit=limit, max_chars=2 * (4096 - 256))
        tmp = args.out / f".{name}.jsonl.tmp"
        with tmp.open("w") as fh:
            for p in corpus.prompts:
                fh.write(json.dumps({"messages": p.messages} if p.messages else {"prompt": p.text}) + "\n")
        tmp.replace(args.out / f"{name}.jsonl")
        print(f"{name}: {len(corpus.prompts)} prompts")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
