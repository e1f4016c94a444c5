"""GPU spec table (``catalog/gpus.yaml``): pure lookups over a small, sourced table."""

from __future__ import annotations

from functools import lru_cache

from pydantic import BaseModel, ConfigDict, Field

from advisor.errors import DataError, UsageError


class GpuSpec(BaseModel):
    """One GPU model. Every number is per GPU and comes with ``source``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    """Short name used on the command line (``--gpu H200``)."""
    aliases: list[str] = Field(default_factory=list)
    """Other spellings, e.g. what nvidia-smi prints."""
    memory_mib: int = Field(gt=0)
    """Total device memory in MiB as the driver reports it (what gmu multiplies)."""
    bandwidth_tbs: float = Field(gt=0)
    """Peak memory bandwidth, TB/s."""
    bf16_tflops: float = Field(gt=0)
    """Dense BF16 tensor-core peak, TFLOP/s."""
    fp8_tflops: float | None = Field(default=None, gt=0)
    """Dense FP8 tensor-core peak, TFLOP/s; None when the GPU has no FP8 tensor cores."""
    interconnect_gbs: float = Field(gt=0)
    """Per-GPU interconnect bandwidth (NVLink / Infinity Fabric / PCIe), GB/s."""
    source: str = Field(min_length=1)
    """Where the numbers come from."""

    @property
    def memory_bytes(self) -> int:
        return self.memory_mib * 1024 * 1024


@lru_cache(maxsize=1)
def gpu_table() -> dict[str, GpuSpec]:
    """All GPUs keyed by upper-cased name and aliases."""
    from advisor.paths import data_path
    from advisor.yamlfast import safe_load

    path = data_path("catalog") / "gpus.yaml"
    try:
        raw = safe_load(path.read_text())
        specs = [GpuSpec(**entry) for entry in raw["gpus"]]
    except Exception as exc:  # noqa: BLE001 - any failure here is a broken shipped file
        raise DataError(f"{path}: invalid GPU table: {exc}") from exc
    table: dict[str, GpuSpec] = {}
    for spec in specs:
        for key in (spec.name, *spec.aliases):
            table[key.upper()] = spec
    return table


def gpu_names() -> list[str]:
    """Short names of the known GPUs, in table order."""
    seen: list[str] = []
    for spec in gpu_table().values():
        if spec.name not in seen:
            seen.append(spec.name)
    return seen


def get_gpu(name: str) -> GpuSpec:
    """Look a GPU up by short name or alias (case-insensitive)."""
    spec = gpu_table().get(name.strip().upper())
    if spec is None:
        raise UsageError(f"unknown GPU {name!r}; known: {', '.join(gpu_names())}")
    return spec
