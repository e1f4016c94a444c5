"""Detect the GPUs of this host (nvidia-smi, else pynvml) and map their names to spec-table names.

Only :func:`detect_gpus` touches the system; :func:`parse_query_gpu`, :func:`parse_cuda_version` and
:func:`gpu_name_for_specs` are pure so that tests can feed them captured output.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

NVIDIA_SMI_TIMEOUT_S = 15.0
"""nvidia-smi can stall on a wedged driver; never wait longer than this."""

QUERY_FIELDS = ("index", "name", "memory.total", "driver_version", "compute_cap")
"""Fields asked of ``nvidia-smi --query-gpu``. ``compute_cap`` is missing on old drivers: retried without."""

GpuSource = Literal["nvidia-smi", "pynvml"]


class GpuInfo(BaseModel):
    """One GPU as the driver reports it."""

    model_config = ConfigDict(extra="forbid")

    index: int
    """Driver index (nvidia-smi's ``index``; not affected by CUDA_VISIBLE_DEVICES)."""
    name: str
    """Marketing name as the driver prints it, e.g. ``NVIDIA H200``."""
    memory_mib: int | None = None
    """Total device memory in MiB (``memory.total``)."""
    driver_version: str | None = None
    """Kernel driver version, e.g. ``580.159.04``."""
    compute_cap: str | None = None
    """CUDA compute capability, e.g. ``9.0`` (None on drivers that cannot report it)."""


class GpuDetection(BaseModel):
    """What :func:`detect_gpus` found, plus notes on what it could not read."""

    model_config = ConfigDict(extra="forbid")

    gpus: list[GpuInfo] = Field(default_factory=list)
    cuda_version: str | None = None
    """Highest CUDA version the driver supports (``CUDA Version`` in nvidia-smi's header)."""
    source: GpuSource | None = None
    missing: list[str] = Field(default_factory=list)


# --- name mapping ------------------------------------------------------------------------------

_SPEC_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    # Word boundaries keep GB200 (Grace-Blackwell) off B200, GH200 (Grace-Hopper) off H200 and
    # "RTX A1000" off A100: those are different parts with different memory and clocks.
    ("B200", re.compile(r"\bB200\b")),
    ("H200", re.compile(r"\bH200\b")),
    ("H100", re.compile(r"\bH100\b")),
    ("A100", re.compile(r"\bA100\b")),
    ("L40S", re.compile(r"\bL40S\b")),
    ("MI300X", re.compile(r"\bMI300X\b")),
)


def gpu_name_for_specs(name: str | None) -> str | None:
    """Map a driver-reported GPU name to the spec table's short name, or None if unknown.

    ``"NVIDIA H200"`` → ``"H200"``, ``"NVIDIA H100 80GB HBM3"`` → ``"H100"``,
    ``"NVIDIA A100-SXM4-80GB"`` → ``"A100"``, ``"AMD Instinct MI300X"`` → ``"MI300X"``.
    Grace superchips (``GH200``, ``GB200``) and unlisted parts give None: callers then ask
    for ``--gpu`` instead of guessing.
    """
    if not name:
        return None
    upper = name.strip().upper()
    for short, pattern in _SPEC_PATTERNS:
        if pattern.search(upper):
            return short
    return None


# --- nvidia-smi parsing ------------------------------------------------------------------------


def _int_or_none(text: str) -> int | None:
    digits = re.match(r"\s*(\d+)", text)
    return int(digits.group(1)) if digits else None


def _str_or_none(text: str) -> str | None:
    text = text.strip()
    return None if text in ("", "[N/A]", "N/A", "[Not Supported]") else text


def parse_query_gpu(text: str, fields: tuple[str, ...] = QUERY_FIELDS) -> list[GpuInfo]:
    """Parse ``nvidia-smi --query-gpu=<fields> --format=csv,noheader[,nounits]`` output.

    Memory may come as ``143771`` or ``143771 MiB``; both parse. Blank lines are skipped.
    Raises ValueError on a line with the wrong number of columns.
    """
    gpus: list[GpuInfo] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        cols = [c.strip() for c in line.split(",")]
        if len(cols) != len(fields):
            raise ValueError(f"expected {len(fields)} columns, got {len(cols)}: {line!r}")
        row = dict(zip(fields, cols, strict=True))
        gpus.append(
            GpuInfo(
                index=_int_or_none(row["index"]) if row.get("index") else len(gpus),
                name=row["name"],
                memory_mib=_int_or_none(row.get("memory.total", "")),
                driver_version=_str_or_none(row.get("driver_version", "")),
                compute_cap=_str_or_none(row.get("compute_cap", "")),
            )
        )
    return gpus


_CUDA_RE = re.compile(r"CUDA Version\s*:\s*([0-9][0-9.]*)")


def parse_cuda_version(text: str) -> str | None:
    """The ``CUDA Version: 13.0`` of nvidia-smi's banner (or of ``nvidia-smi --version``)."""
    match = _CUDA_RE.search(text)
    return match.group(1) if match else None


def visible_gpus(gpus: list[GpuInfo], cuda_visible_devices: str | None) -> tuple[list[GpuInfo], str | None]:
    """The GPUs a process started with this ``CUDA_VISIBLE_DEVICES`` sees, and a note when it restricts them.

    CUDA's rules (CUDA C Programming Guide, "CUDA Environment Variables"): unset → all; a
    comma-separated list of indices or ``GPU-…``/``MIG-…`` UUIDs, in that order; the list ends at
    the first entry that names no device; an empty value hides every GPU. Indices here are the
    driver's (nvidia-smi's ``index``), which match CUDA's order with ``CUDA_DEVICE_ORDER=PCI_BUS_ID``
    (the ordering vLLM's docs recommend). UUIDs are not resolved: the count is taken as given.
    """
    if cuda_visible_devices is None:
        return gpus, None
    value = cuda_visible_devices.strip()
    by_index = {g.index: g for g in gpus}
    chosen: list[GpuInfo] = []
    for token in (t.strip() for t in value.split(",")) if value else ():
        if token.upper().startswith(("GPU-", "MIG-")):
            if not gpus:
                break
            chosen.append(gpus[min(len(chosen), len(gpus) - 1)])  # same model assumed; count is what matters
            continue
        try:
            idx = int(token)
        except ValueError:
            break
        if idx not in by_index or by_index[idx] in chosen:
            break
        chosen.append(by_index[idx])
    note = f"CUDA_VISIBLE_DEVICES={cuda_visible_devices!r}: {len(chosen)} of {len(gpus)} GPUs visible"
    return chosen, note


# --- detection ---------------------------------------------------------------------------------


def _run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv, capture_output=True, text=True, timeout=NVIDIA_SMI_TIMEOUT_S, check=False
    )


def _from_nvidia_smi(exe: str) -> GpuDetection:
    """Query GPUs through the nvidia-smi executable ``exe``."""
    found = GpuDetection(source="nvidia-smi")
    fields = QUERY_FIELDS
    try:
        proc = _run([exe, f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits"])
        if proc.returncode != 0 and "compute_cap" in (proc.stdout + proc.stderr):
            fields = tuple(f for f in QUERY_FIELDS if f != "compute_cap")
            proc = _run([exe, f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits"])
    except (OSError, subprocess.SubprocessError) as exc:
        found.missing.append(f"nvidia-smi failed to run: {exc}")
        return found
    if proc.returncode != 0:
        detail = (proc.stderr or proc.stdout).strip().splitlines()
        found.missing.append(
            f"nvidia-smi exited {proc.returncode}: {detail[0] if detail else 'no output'}"
        )
        return found
    try:
        found.gpus = parse_query_gpu(proc.stdout, fields)
    except ValueError as exc:
        found.missing.append(f"nvidia-smi output not understood: {exc}")
        return found
    try:
        banner = _run([exe])
        found.cuda_version = parse_cuda_version(banner.stdout)
    except (OSError, subprocess.SubprocessError) as exc:
        found.missing.append(f"CUDA version: nvidia-smi banner failed: {exc}")
    if found.gpus and found.cuda_version is None:
        found.missing.append("CUDA version: not in nvidia-smi's banner")
    return found


def _from_pynvml() -> GpuDetection | None:
    """Query GPUs through NVML's Python binding; None when pynvml is not importable."""
    try:
        import pynvml  # type: ignore[import-not-found]
    except ImportError:
        return None
    found = GpuDetection(source="pynvml")

    def text(value: str | bytes) -> str:
        return value.decode() if isinstance(value, bytes) else value

    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        found.missing.append(f"pynvml: NVML init failed: {exc}")
        return found
    try:
        driver = text(pynvml.nvmlSystemGetDriverVersion())
        cuda = pynvml.nvmlSystemGetCudaDriverVersion_v2()
        found.cuda_version = f"{cuda // 1000}.{(cuda % 1000) // 10}"
        for i in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
            major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(handle)
            found.gpus.append(
                GpuInfo(
                    index=i,
                    name=text(pynvml.nvmlDeviceGetName(handle)),
                    memory_mib=pynvml.nvmlDeviceGetMemoryInfo(handle).total // (1024 * 1024),
                    driver_version=driver,
                    compute_cap=f"{major}.{minor}",
                )
            )
    except pynvml.NVMLError as exc:
        found.missing.append(f"pynvml: query failed: {exc}")
    finally:
        try:
            pynvml.nvmlShutdown()
        except pynvml.NVMLError as exc:
            found.missing.append(f"pynvml: shutdown failed: {exc}")
    return found


def detect_gpus() -> GpuDetection:
    """Find this host's GPUs: nvidia-smi on PATH first, then pynvml; neither → empty list + notes."""
    exe = shutil.which("nvidia-smi")
    if exe is not None:
        found = _from_nvidia_smi(exe)
    else:
        via_nvml = _from_pynvml()
        if via_nvml is None:
            found = GpuDetection(missing=["nvidia-smi: not on PATH", "pynvml: not importable"])
        else:
            found = via_nvml
            if not found.gpus:
                found.missing.insert(0, "nvidia-smi: not on PATH")
    if not found.gpus:
        found.missing.append("GPUs: none detected")
    return found
