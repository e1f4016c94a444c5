"""calibration/class_accuracy.csv from the shipped real-vLLM step grids (calibration/gpu_steps/*/grid.jsonl).

Per GPU and architecture class: the plain decode step's median and largest |ln(predicted / measured)| with the
shipped GEMM constants, and (on the GPU the spec-step constants were fitted on) the median ln(R_pred / R_meas) of
suffix verification steps, each model held out of the fit that predicts it (advisor.calibrate.gpu_steps).
"""

from __future__ import annotations

from pathlib import Path

OUTPUTS = ("class_accuracy.csv",)
INPUTS = "calibration/gpu_steps/*/grid.jsonl (manifest gpu_steps_dir)"


def build(cal: Path) -> dict[str, str]:
    """{file name: text} of the table advisor.predict.class_accuracy reads."""
    from advisor.calibrate.gpu_steps import class_accuracy_rows
    from advisor.model.load import load_profile
    from advisor.predict.class_accuracy import TABLE, table_text

    assert OUTPUTS == (TABLE,)
    return {TABLE: table_text(class_accuracy_rows(cal, load_profile))}
