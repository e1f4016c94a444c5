"""Diff two host fingerprints and decide whether their throughput numbers may be compared (pure).

Every differing field is reported with a verdict and a reason. A field makes the hosts
NOT comparable when it is part of :func:`advisor.hardware.fingerprint.perf_view`, so
``comparable(a, b)`` holds exactly when ``a.fingerprint == b.fingerprint``.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from advisor.hardware.dsa import WQ_FIELDS, dev_sort_key, wq_sort_key
from advisor.hardware.fingerprint import HostFingerprint, distinct, is_perf_env, perf_view

_DSA_REASON = (
    "the enabled Intel DSA queue set is host state that moved vanilla baselines by +33-36% "
    "(7-8B models) in the seed write-up with no vLLM setting changed"
)

# field -> (comparable, reason) for fixed fields.
_RULES: dict[str, tuple[bool, str]] = {
    "hostname": (True, "the host's name does not change throughput"),
    "collected_at": (True, "when the fingerprint was taken"),
    "kernel": (True, "recorded for reference; kernel changes that matter show up elsewhere"),
    "gpu.count": (False, "GPU count sets the parallel layout and the memory available"),
    "gpu.visible_count": (False, "CUDA_VISIBLE_DEVICES changes how many GPUs vLLM can use"),
    "gpu.models": (False, "a different GPU model has different compute and memory bandwidth"),
    "gpu.memory_mib": (False, "GPU memory decides how many KV-cache blocks fit"),
    "gpu.driver": (False, "driver versions change kernels, clocks and NCCL behaviour"),
    "gpu.cuda_version": (False, "the driver's CUDA version comes with a different driver"),
    "gpu.compute_cap": (True, "follows the GPU model, which is compared on its own"),
    "gpu.source": (True, "how the GPUs were read, not what they are"),
    "cpu.model": (False, "the scheduler, sampler and suffix tree run on the CPU"),
    "cpu.sockets": (False, "socket count changes NUMA placement of the CPU-side work"),
    "cpu.threads": (True, "logical CPU count varies with SMT and container limits; recorded only"),
    "versions.vllm": (False, "vLLM versions differ in scheduler, kernels and defaults"),
    "versions.torch": (False, "torch versions differ in kernels and torch.compile output"),
    "versions.arctic_inference": (False, "Arctic Inference implements suffix decoding"),
    "cudagraph_mode": (
        False,
        "the CUDA graph path (PIECEWISE vs FULL_AND_PIECEWISE) can shift vanilla by +36% "
        "(seed write-up pitfall 1); unknown on one side counts as different",
    ),
    "dsa.bus_present": (True, "the DSA queue set is compared on its own"),
    "dsa.config_found": (
        True,
        "accel-config persistence decides the state after a reboot, not now",
    ),
    "dsa.saved_queues": (
        True,
        "accel-config persistence decides the state after a reboot, not now",
    ),
    "dsa.persisted": (True, "accel-config persistence decides the state after a reboot, not now"),
    "missing": (True, "what could not be read; differences that matter show in other fields"),
}


class FieldDiff(BaseModel):
    """One field that differs between host A and host B."""

    model_config = ConfigDict(extra="forbid")

    field: str
    """Dotted name, e.g. ``gpu.models``, ``dsa.wq.wq0.0.state``, ``env.VLLM_LHC_DSA``."""
    a: Any = None
    """Value on host A (None: absent or unknown)."""
    b: Any = None
    comparable: bool
    """False when this difference alone makes throughput numbers not comparable."""
    reason: str


class HostDiff(BaseModel):
    """All differences between two fingerprints and the overall verdict."""

    model_config = ConfigDict(extra="forbid")

    comparable: bool
    """True when throughput measured on A and on B may be pooled or compared."""
    fingerprint_a: str
    fingerprint_b: str
    differences: list[FieldDiff]

    @property
    def blocking(self) -> list[FieldDiff]:
        """The differences that make the hosts not comparable."""
        return [d for d in self.differences if not d.comparable]


def flat_view(fp: HostFingerprint) -> dict[str, Any]:
    """Every compared fact of ``fp`` under a dotted name (JSON-able values)."""
    view: dict[str, Any] = {
        "hostname": fp.hostname,
        "collected_at": fp.collected_at,
        "kernel": fp.kernel,
        "gpu.count": fp.gpu_count,
        "gpu.visible_count": fp.visible_gpu_count,
        "gpu.models": distinct([g.name for g in fp.gpus]),
        "gpu.memory_mib": distinct([g.memory_mib for g in fp.gpus]),
        "gpu.driver": distinct([g.driver_version for g in fp.gpus]),
        "gpu.cuda_version": fp.cuda_version,
        "gpu.compute_cap": distinct([g.compute_cap for g in fp.gpus]),
        "gpu.source": fp.gpu_source,
        "cpu.model": fp.cpu.model,
        "cpu.sockets": fp.cpu.sockets,
        "cpu.threads": fp.cpu.threads,
        "cudagraph_mode": fp.cudagraph_mode,
        "dsa.bus_present": fp.dsa.bus_present,
        "dsa.config_found": fp.dsa.config_found,
        "dsa.saved_queues": fp.dsa.saved_queues,
        "dsa.persisted": fp.dsa.persisted,
        "missing": sorted(fp.missing),
    }
    for name, value in fp.versions.model_dump().items():
        view[f"versions.{name}"] = value
    for dev, device in fp.dsa.devices.items():
        view[f"dsa.{dev}.state"] = device.state
    for wq, queue in fp.dsa.work_queues.items():
        for attr in WQ_FIELDS:
            view[f"dsa.wq.{wq}.{attr}"] = getattr(queue, attr)
    for name, value in fp.env.items():
        view[f"env.{name}"] = value
    return view


def _sort_key(field: str) -> tuple[int, Any]:
    if field.startswith("dsa.wq."):
        wq = field.split(".")[2] + "." + field.split(".")[3]
        return (2, (wq_sort_key(wq), field))
    if field.startswith("dsa.") and field.count(".") == 2:
        return (1, (dev_sort_key(field.split(".")[1]), field))
    return (0, field)


def _classify(field: str, a: HostFingerprint, b: HostFingerprint) -> tuple[bool, str]:
    """Verdict and reason for a differing ``field``."""
    if field in _RULES:
        return _RULES[field]
    if field.startswith("versions."):
        return False, "a different version of a serving package"
    if field.startswith("env."):
        name = field[4:]
        if name == "CUDA_VISIBLE_DEVICES":
            return True, "which GPUs are visible; how many is compared as gpu.visible_count"
        if is_perf_env(name):
            return False, f"{name} is read by the serving stack and may change throughput"
        return True, f"{name} sets an address, path, logging or telemetry, not throughput"
    parts = field.split(".")
    if parts[:2] == ["dsa", "wq"] and len(parts) == 5:
        wq, attr = f"{parts[2]}.{parts[3]}", parts[4]
        qa, qb = a.dsa.work_queues.get(wq), b.dsa.work_queues.get(wq)
        active_a, active_b = bool(qa and qa.active), bool(qb and qb.active)
        if attr == "state":
            if active_a != active_b:
                on_a, on_b = (("enabled" if x else "not enabled") for x in (active_a, active_b))
                return False, f"{wq} is {on_a} on A and {on_b} on B: {_DSA_REASON}"
            return True, "both states count as the same (enabled/locked or not enabled)"
        if attr in ("mode", "size", "type"):
            if active_a or active_b:
                return False, f"configuration of enabled queue {wq} changed: {_DSA_REASON}"
            return True, f"{wq} is not enabled on either host"
        if attr == "clients":
            return True, "processes holding the queue open (the write-up saw clients=0 either way)"
        return True, "a queue label"
    if parts[0] == "dsa" and len(parts) == 3 and parts[2] == "state":
        da, db = a.dsa.devices.get(parts[1]), b.dsa.devices.get(parts[1])
        if bool(da and da.active) != bool(db and db.active):
            return False, f"DSA device {parts[1]} enabled on one host only: {_DSA_REASON}"
        return True, "both states count as the same"
    return False, "unrecognised field; treated as not comparable to be safe"


def diff_hosts(a: HostFingerprint, b: HostFingerprint) -> HostDiff:
    """Every field that differs between ``a`` and ``b``, each with its verdict and reason."""
    va, vb = flat_view(a), flat_view(b)
    differences: list[FieldDiff] = []
    for field in sorted(va.keys() | vb.keys(), key=_sort_key):
        left, right = va.get(field), vb.get(field)
        if left == right:
            continue
        ok, reason = _classify(field, a, b)
        differences.append(FieldDiff(field=field, a=left, b=right, comparable=ok, reason=reason))
    same = perf_view(a) == perf_view(b)
    if not same and all(d.comparable for d in differences):  # pragma: no cover - guard
        guard = FieldDiff(
            field="fingerprint",
            a=a.fingerprint,
            b=b.fingerprint,
            comparable=False,
            reason="performance-relevant state differs",
        )
        differences.append(guard)
    return HostDiff(
        comparable=same,
        fingerprint_a=a.fingerprint,
        fingerprint_b=b.fingerprint,
        differences=differences,
    )


def comparable(a: HostFingerprint, b: HostFingerprint) -> bool:
    """True when throughput measured on ``a`` and ``b`` may be pooled (same performance view)."""
    return perf_view(a) == perf_view(b)
