"""The fused-MoE kernel's measured cost per layer (issue 40, item 4): a pure lookup in the shipped table
``calibration/moe_kernel_costs.csv`` (built by ``advisor calibrate rebuild moe_kernel_costs`` from NVIDIA
aiconfigurator's vLLM 0.24.0 timings: advisor.calibrate.moe_kernels says how and what is held out).

A row says: on GPU G, vLLM's fused-MoE Triton kernel for weights of dtype D costs, per MoE layer and rank,

    fixed_us + expert bytes read / bandwidth x bytes_mult + expert FLOPs / peak x flops_mult

(peak: the GPU's FP8 peak for FP8 weights, its BF16 peak otherwise; no efficiency factor besides the row's). The step
model (advisor.predict.stepcost) prices a MoE layer's routed experts with it where a row matches the GPU and the
weights dtype, at EP 1 (experts sliced over TP); elsewhere (other GPUs, int4 checkpoints, expert parallelism) the
routed experts stream at the dense GEMMs' efficiency with two grouped-GEMM floors, as before, and the step says so.
"""

from __future__ import annotations

from functools import lru_cache

from pydantic import BaseModel, ConfigDict, Field

from advisor.errors import DataError

TABLE = "moe_kernel_costs.csv"
FORMAT_BYTES = {"bf16": 2.0, "fp8": 1.0, "mxfp4": 4.25 / 8}
"""Stored bytes per expert parameter of each kernel's weights (MXFP4: 4-bit values + one 8-bit scale per 32): the
bytes the table's ``bytes_mult`` multiplies, in the fit and in the step model alike."""
COLUMNS = ("gpu", "dtype", "fixed_us", "bytes_mult", "flops_mult", "points", "shapes", "in_sample_median_abs_log",
           "in_sample_median_log", "power_law_median_log", "power_law_median_abs_log", "ep_median_log", "ep_points",
           "other_gpu", "other_gpu_median_abs_log", "applies", "provenance", "source")  # fmt: skip


class MoeKernelCost(BaseModel):
    """One GPU x weights dtype's fitted fused-MoE cost (a row of the table)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    gpu: str = Field(min_length=1)
    """advisor.hardware.gpus spec name the timings ran on."""
    dtype: str = Field(min_length=1)
    """Weights dtype (``bf16``, ``fp8``, ``mxfp4``): the kernel vLLM runs for it."""
    fixed_us: float = Field(ge=0, le=1000)
    """Fixed microseconds per MoE layer and rank (routing sort, launch, tail of the grouped GEMMs)."""
    bytes_mult: float = Field(gt=0.5, lt=4)
    """Expert bytes' time over the ideal stream at the GPU's peak bandwidth."""
    flops_mult: float = Field(ge=0, lt=8)
    """Expert FLOPs' time over the GPU's peak (added to the streaming, not overlapped)."""
    points: int = Field(ge=1)
    shapes: int = Field(ge=1)
    in_sample_median_abs_log: float = Field(ge=0)
    in_sample_median_log: float
    power_law_median_log: float | None = None
    """Held out: the same shapes with skewed routing, median ln(predicted / measured)."""
    power_law_median_abs_log: float | None = None
    ep_median_log: float | None = None
    """Held out: expert parallelism (EP > 1), median ln(predicted / measured); negative: the form is optimistic."""
    ep_points: int = Field(ge=0)
    other_gpu: str
    other_gpu_median_abs_log: float | None = None
    """Held out: the other GPU's timings predicted with this GPU's coefficients."""
    applies: str
    provenance: str
    source: str

    def seconds(self, layers: int, expert_bytes: float, expert_flops: float, bandwidth: float, peak: float) -> float:
        """Seconds of ``layers`` MoE layers' routed experts on one rank (``expert_bytes``, ``expert_flops``: that rank's,
        over all those layers; ``peak``: the GPU's FP8 peak for an ``fp8`` row, its BF16 peak otherwise)."""
        return layers * self.fixed_us * 1e-6 + expert_bytes / bandwidth * self.bytes_mult + expert_flops / peak * self.flops_mult

    def peak_flops(self, gpu) -> float:
        """The peak the row's FLOPs were fitted against (advisor.calibrate.moe_kernels): FP8 for ``fp8``, else BF16."""
        return (gpu.fp8_tflops if self.dtype == "fp8" and gpu.fp8_tflops else gpu.bf16_tflops) * 1e12


@lru_cache(maxsize=1)
def rows() -> tuple[MoeKernelCost, ...]:
    """The shipped table (a DataError naming it when malformed)."""
    from advisor.paths import data_path
    from advisor.predict.csv_rows import read_models

    path = data_path("calibration") / TABLE
    try:
        return tuple(read_models(path.read_text(encoding="utf-8"), lambda r: MoeKernelCost.model_validate(
            {k: (None if v == "" else v) for k, v in r.items()}), TABLE))  # fmt: skip
    except (OSError, ValueError) as exc:
        raise DataError(f"calibration/{TABLE}: {exc}; rebuild it with: advisor calibrate rebuild moe_kernel_costs") from None


def lookup(gpu: str, dtype: str) -> MoeKernelCost | None:
    """The row measured on ``gpu`` for weights of ``dtype`` (advisor.predict.step_correction.dtype_key), else None."""
    return next((r for r in rows() if r.gpu == gpu and r.dtype == dtype), None)
