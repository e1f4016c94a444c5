"""calibration/step_corrections.csv from the committed verify records (calibration/manifests.yaml set
``verify_records``; advisor.calibrate.step_corrections): one row per host profile x model class x weights dtype x TP
where plain-decoding runs measured the decode step (median ITL over the answer's predicted step); the runtime applies
a row only there (advisor.predict.step_correction)."""

from __future__ import annotations

from pathlib import Path

OUTPUTS = ("step_corrections.csv",)
INPUTS = "calibration/manifests.yaml verify_records (campaign 14's verify_records.jsonl)"


def build(cal: Path) -> dict[str, str]:
    """{file name: text} of the table advisor.predict.step_correction reads."""
    from advisor.calibrate.step_corrections import rebuild_text
    from advisor.predict.step_correction import TABLE

    assert OUTPUTS == (TABLE,)
    return {TABLE: rebuild_text(cal)}
