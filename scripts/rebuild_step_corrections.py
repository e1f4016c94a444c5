#!/usr/bin/env python3
"""Rebuild calibration/step_corrections.csv from the committed verify records (calibration/manifests.yaml set
``verify_records``; advisor.calibrate.step_corrections).

    python scripts/rebuild_step_corrections.py            # rewrite the table (atomically)
    python scripts/rebuild_step_corrections.py --check    # exit 1 if the shipped table differs from a rebuild

One row per host profile x model class x weights dtype x TP where plain-decoding runs measured the decode step
(median ITL over the answer's predicted step); the runtime applies a row only there (advisor.predict.step_correction).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="compare with the shipped table; exit 1 when they differ")
    args = ap.parse_args()
    from advisor.calibrate.step_corrections import rebuild_text
    from advisor.paths import data_path
    from advisor.predict.step_correction import TABLE

    path = data_path("calibration") / TABLE
    text = rebuild_text(data_path("calibration"))
    if args.check:
        same = path.is_file() and path.read_text() == text
        print(f"{path}: {'matches a rebuild' if same else 'differs from a rebuild'}")
        return 0 if same else 1
    from advisor.atomic import write_one

    write_one(path, text)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
