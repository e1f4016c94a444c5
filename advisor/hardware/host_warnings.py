"""Warnings about a host that a recommendation should carry (pure: fingerprint in, lines out)."""

from __future__ import annotations

from advisor.hardware.fingerprint import HostFingerprint
from advisor.hardware.gpu_detect import gpu_name_for_specs


def _names(items: list[str], limit: int = 8) -> str:
    shown = ", ".join(items[:limit])
    return shown if len(items) <= limit else f"{shown}, ... (+{len(items) - limit} more)"


def _gpu_warnings(fp: HostFingerprint) -> list[str]:
    if not fp.gpus:
        notes = [m for m in fp.missing if m.startswith(("nvidia-smi", "pynvml"))]
        why = f" ({'; '.join(notes)})" if notes else ""
        return [f"no GPUs detected{why}: pass --gpu and --gpus to describe the serving host"]
    out: list[str] = []
    models = sorted({g.name for g in fp.gpus})
    if len(models) > 1:
        out.append(
            f"GPUs of different models on one host ({', '.join(models)}): tensor parallelism "
            "runs at the slowest one's pace; pass --gpu to choose which to plan for"
        )
    unknown = [m for m in models if gpu_name_for_specs(m) is None]
    if unknown:
        out.append(
            f"GPU {', '.join(repr(m) for m in unknown)} is not in the spec table: "
            "pass --gpu with the closest known model"
        )
    if fp.visible_gpu_count != fp.gpu_count:
        out.append(
            f"CUDA_VISIBLE_DEVICES={fp.env.get('CUDA_VISIBLE_DEVICES', '')} makes "
            f"{fp.visible_gpu_count} of {fp.gpu_count} GPUs visible"
        )
    if fp.versions.vllm is None:
        out.append("GPUs found but vLLM is not installed in this Python environment")
    return out


def _dsa_warnings(fp: HostFingerprint) -> list[str]:
    dsa = fp.dsa
    path = dsa.config_path or "/etc/accel-config/accel-config.conf"
    out: list[str] = []
    if dsa.config_error is not None:
        out.append(f"accel-config file unreadable ({dsa.config_error}): DSA persistence unknown")
    if dsa.unsaved_queues:
        out.append(
            f"Intel DSA work queues enabled but not saved in {path} "
            f"({len(dsa.unsaved_queues)}: {_names(dsa.unsaved_queues)}): lost at reboot; "
            "run accel-config save-config (and accel-config load-config -e at boot)"
        )
    if dsa.saved_not_enabled and dsa.devices:
        out.append(
            f"{path} configures queues that are not enabled now "
            f"({_names(dsa.saved_not_enabled)}): after a reboot and accel-config load-config -e "
            "the host state differs from the one measured now"
        )
    return out


def host_warnings(fp: HostFingerprint) -> list[str]:
    """One line per host problem a user should act on; empty when there is nothing to say.

    Covers: no GPUs detected, mixed or unknown GPU models, CUDA_VISIBLE_DEVICES hiding GPUs,
    GPUs without vLLM, DSA queues enabled but not persisted by accel-config (lost at reboot),
    saved queues not enabled now, and an unreadable accel-config file.
    """
    return _gpu_warnings(fp) + _dsa_warnings(fp)
