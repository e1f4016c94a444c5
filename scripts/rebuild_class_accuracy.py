#!/usr/bin/env python3
"""Rebuild calibration/class_accuracy.csv from the shipped real-vLLM step grids (calibration/gpu_steps/*/grid.jsonl).

    python scripts/rebuild_class_accuracy.py            # rewrite the table (atomically)
    python scripts/rebuild_class_accuracy.py --check    # exit 1 if the shipped table differs from a rebuild

Per GPU and architecture class: the plain decode step's median and largest |ln(predicted / measured)| with the
shipped GEMM constants, and (on the GPU the spec-step constants were fitted on) the median ln(R_pred / R_meas) of
suffix verification steps, each model held out of the fit that predicts it (advisor.calibrate.gpu_steps).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def build() -> str:
    from advisor.model.load import load_profile
    from advisor.paths import data_path
    from advisor.predict.class_accuracy import table_text
    from advisor.calibrate.gpu_steps import class_accuracy_rows

    return table_text(class_accuracy_rows(data_path("calibration"), load_profile))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="compare with the shipped table; exit 1 when they differ")
    args = ap.parse_args()
    from advisor.paths import data_path
    from advisor.predict.class_accuracy import TABLE

    path = data_path("calibration") / TABLE
    text = build()
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
