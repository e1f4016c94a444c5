"""Resolve the host a recommendation is for: given on the command line, detected (nvidia-smi, sysfs), or the
settings' default."""

from __future__ import annotations

from advisor.domain.host import HostContext


def resolve_host(settings, gpu: str | None, gpus: int | None) -> HostContext:
    """Fill what the user did not give from this machine (nvidia-smi, sysfs), then from settings."""
    from advisor.hardware.dsa import read_dsa
    from advisor.hardware.gpus import get_gpu

    notes: list[str] = []
    origin = "command line"
    if gpu is None or gpus is None:
        from advisor.hardware.gpu_detect import detect_gpus, gpu_name_for_specs

        import os

        from advisor.hardware.gpu_detect import visible_gpus

        found = detect_gpus()
        visible, note = visible_gpus(found.gpus, os.environ.get("CUDA_VISIBLE_DEVICES"))
        if note and found.gpus:
            notes.append(note)
        found = found.model_copy(update={"gpus": visible})
        if len({g.name for g in found.gpus}) > 1:
            notes.append(f"mixed GPU models ({', '.join(sorted({g.name for g in found.gpus}))}); sizing for the first, "
                         "restrict with CUDA_VISIBLE_DEVICES or pass --gpu/--gpus")  # fmt: skip
        if found.gpus:
            detected_name = gpu_name_for_specs(found.gpus[0].name)
            if gpu is None and detected_name is None:
                notes.append(f"detected GPU {found.gpus[0].name!r} is not in the spec table; using {settings.default_gpu}")
            gpu = gpu or detected_name or settings.default_gpu
            gpus = gpus or len(found.gpus)
            origin = "detected"
        else:
            which = []
            if gpu is None:
                which.append(f"GPU {settings.default_gpu}")
            if gpus is None:
                which.append(f"count {settings.default_gpus}")
            notes.append(
                f"no GPU detected: recommending for {gpus or settings.default_gpus}x{gpu or settings.default_gpu} "
                f"({' and '.join(which)} from the settings' default, ADVISOR_DEFAULT_GPU/ADVISOR_DEFAULT_GPUS; "
                "pass --gpu and --gpus for your host)"
            )
            gpu = gpu or settings.default_gpu
            gpus = gpus or settings.default_gpus
            origin = "default (no GPU detected)"
    spec = get_gpu(gpu)
    dsa, _missing = read_dsa(settings.sysfs_root, settings.etc_root)
    enabled = bool(dsa.enabled_queues) if (dsa.devices or dsa.work_queues) else None
    from advisor.errors import UsageError
    from advisor.settings import MAX_GPUS

    if not 1 <= gpus <= MAX_GPUS:
        raise UsageError(f"{gpus} GPUs: one server is planned for 1 to {MAX_GPUS} GPUs (--gpus)")
    return HostContext(gpu=spec.name, gpus=gpus, origin=origin, dsa_enabled=enabled, dsa_persisted=dsa.persisted, notes=notes)
