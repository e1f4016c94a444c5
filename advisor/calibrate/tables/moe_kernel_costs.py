"""calibration/moe_kernel_costs.csv from NVIDIA aiconfigurator's measured fused-MoE timings on vLLM 0.24.0 (H100, H200):
per GPU and weights dtype, the fused-MoE kernel's fixed cost per layer and its bytes and FLOPs multipliers, with the
held-out figures (skewed routing, EP > 1, the other GPU) beside them (advisor.calibrate.moe_kernels)."""

from __future__ import annotations

from pathlib import Path

OUTPUTS = ("moe_kernel_costs.csv",)
INPUTS = "calibration/moe_kernels/aiconfigurator_vllm0.24.0_moe.csv (scripts/extract_aiconfigurator_moe.py)"


def build(cal: Path) -> dict[str, str]:
    """{file name: text} of the table advisor.predict.moe_kernel reads."""
    from advisor.calibrate.moe_kernels import fit, read_rows
    from advisor.calibrate.tables import csv_text
    from advisor.predict.moe_kernel import COLUMNS, TABLE

    assert OUTPUTS == (TABLE,)
    return {TABLE: csv_text(fit(read_rows(cal)), COLUMNS)}
