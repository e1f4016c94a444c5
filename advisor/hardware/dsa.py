"""Intel DSA devices and work queues from sysfs, and whether accel-config persists them.

sysfs (idxd driver): ``<sysfs>/bus/dsa/devices/`` holds ``dsaN`` (devices; ``iaxN`` share the bus)
and ``wqN.M`` (work queue M of device N), each a directory of one-value files: ``state``,
``mode``, ``size``, ``type``, ``clients``, ``name``.

Persistence: ``accel-config save-config`` writes ``<etc>/accel-config/accel-config.conf``, a JSON
array of device objects (``"dev": "dsa0"``) whose ``groups`` hold ``grouped_workqueues``
(``"dev": "wq0.0"``, mode, size, type, name, ...); queues outside a group sit under
``"ungrouped workqueues"``. It saves only enabled devices and queues and writes no ``state`` key
(intel/idxd-config ``accfg/list.c`` ``cmd_save``, ``util/json.c`` ``util_wq_to_json`` with
``UTIL_JSON_SAVE``). ``accel-config load-config -e`` at boot restores them; without the file the
kernel brings every queue up disabled.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, computed_field

from advisor.hardware._derived import DerivedModel

ACTIVE_STATES = frozenset({"enabled", "locked"})
"""Queue/device states that count as "enabled" (accel-config lists ``locked`` queues as active too)."""

WQ_FIELDS = ("state", "mode", "size", "type", "clients", "name")
"""Work-queue attributes read from sysfs."""

_WQ_RE = re.compile(r"^wq(\d+)\.(\d+)$")
_DEV_RE = re.compile(r"^(dsa|iax)(\d+)$")


def wq_sort_key(wq: str) -> tuple[int, int, str]:
    """Natural order: wq0.2 < wq0.10 < wq1.0."""
    match = _WQ_RE.match(wq)
    return (int(match.group(1)), int(match.group(2)), "") if match else (1 << 30, 0, wq)


def dev_sort_key(dev: str) -> tuple[int, str]:
    """Natural order by device number: dsa0 < iax1 < dsa2 < dsa10."""
    match = _DEV_RE.match(dev)
    return (int(match.group(2)), dev) if match else (1 << 30, dev)


class WorkQueue(BaseModel):
    """One DSA/IAX work queue (``wqN.M``); None where sysfs had no such file."""

    model_config = ConfigDict(extra="forbid")

    device: str
    """Owning device, e.g. ``dsa0``."""
    state: str | None = None
    """``disabled``, ``enabled`` (or ``locked``/``unknown``)."""
    mode: str | None = None
    """``shared`` or ``dedicated``."""
    size: int | None = None
    """Queue depth (descriptors)."""
    type: str | None = None
    """``user``, ``kernel`` or ``none``."""
    clients: int | None = None
    """Processes that have the queue open now."""
    name: str | None = None
    """Free-form label set with ``accel-config config-wq --name``."""

    @property
    def active(self) -> bool:
        return self.state in ACTIVE_STATES


class DsaDevice(BaseModel):
    """One accelerator device on the dsa bus (``dsaN`` or ``iaxN``)."""

    model_config = ConfigDict(extra="forbid")

    state: str | None = None
    """``enabled``, ``disabled``, ``halted`` or ``unknown``."""

    @property
    def active(self) -> bool:
        return self.state in ACTIVE_STATES


class DsaInfo(DerivedModel):
    """Devices, work queues and accel-config persistence of one host."""

    bus_present: bool = False
    """True when ``<sysfs>/bus/dsa/devices`` exists (idxd driver loaded)."""
    devices: dict[str, DsaDevice] = Field(default_factory=dict)
    """Keyed by device name (``dsa0``)."""
    work_queues: dict[str, WorkQueue] = Field(default_factory=dict)
    """Keyed by queue name (``wq0.0``)."""
    config_path: str | None = None
    """Where the accel-config file was looked for."""
    config_found: bool = False
    config_error: str | None = None
    """Why the accel-config file could not be used, if it exists but is unreadable."""
    saved_queues: list[str] = Field(default_factory=list)
    """Queues the accel-config file would configure (and enable with ``load-config -e``)."""

    @computed_field  # type: ignore[prop-decorator]
    @property
    def enabled_devices(self) -> list[str]:
        """Devices whose state is enabled."""
        return sorted((d for d, dev in self.devices.items() if dev.active), key=dev_sort_key)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def enabled_queues(self) -> list[str]:
        """Queues whose state is enabled (or locked)."""
        return sorted((q for q, wq in self.work_queues.items() if wq.active), key=wq_sort_key)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def unsaved_queues(self) -> list[str]:
        """Enabled now but absent from the accel-config file: lost at reboot."""
        saved = set(self.saved_queues)
        return [q for q in self.enabled_queues if q not in saved]

    @computed_field  # type: ignore[prop-decorator]
    @property
    def saved_not_enabled(self) -> list[str]:
        """In the accel-config file but not enabled now: a reboot + load would change the state."""
        enabled = set(self.enabled_queues)
        return sorted((q for q in self.saved_queues if q not in enabled), key=wq_sort_key)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def persisted(self) -> bool | None:
        """Whether the enabled queue set survives a reboot (equals the saved set); None without DSA."""
        if not self.devices and not self.work_queues:
            return None
        return not self.unsaved_queues and not self.saved_not_enabled


# --- reading -----------------------------------------------------------------------------------


def _read_attr(path: Path) -> str | None:
    """One sysfs attribute, stripped; None if absent. Other OSErrors propagate to the caller."""
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        return None


def _to_int(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        return None


def read_work_queue(path: Path, device: str) -> WorkQueue:
    """Read ``state``/``mode``/``size``/``type``/``clients``/``name`` of one queue directory."""
    raw = {field: _read_attr(path / field) for field in WQ_FIELDS}
    return WorkQueue(
        device=device,
        state=raw["state"],
        mode=raw["mode"],
        size=_to_int(raw["size"]),
        type=raw["type"],
        clients=_to_int(raw["clients"]),
        name=raw["name"] if raw["name"] else None,
    )


def _device_of(wq: str, devices: dict[str, DsaDevice]) -> str:
    match = _WQ_RE.match(wq)
    number = match.group(1) if match else "?"
    for prefix in ("dsa", "iax"):
        if f"{prefix}{number}" in devices:
            return f"{prefix}{number}"
    return f"dsa{number}"


def _saved_queues_in(node: Any, out: list[str]) -> None:
    """Collect ``wqN.M`` names from any depth of an accel-config JSON document."""
    if isinstance(node, dict):
        dev = node.get("dev")
        # save-config writes no state; a pasted ``accel-config list`` output does.
        state = node.get("state", "enabled")
        if isinstance(dev, str) and _WQ_RE.match(dev) and state in ACTIVE_STATES:
            out.append(dev)
        for value in node.values():
            _saved_queues_in(value, out)
    elif isinstance(node, list):
        for value in node:
            _saved_queues_in(value, out)


def parse_accel_config(text: str) -> list[str]:
    """Queue names an accel-config JSON file configures. Raises ValueError if not such a file."""
    doc = json.loads(text)
    if not isinstance(doc, list):
        raise ValueError("expected a JSON array of devices")
    found: list[str] = []
    _saved_queues_in(doc, found)
    return sorted(set(found), key=wq_sort_key)


def read_dsa(sysfs_root: Path, etc_root: Path) -> tuple[DsaInfo, list[str]]:
    """Read DSA state under ``sysfs_root`` and persistence under ``etc_root``.

    Returns the info and notes on what could not be read (for ``HostFingerprint.missing``).
    """
    missing: list[str] = []
    bus = sysfs_root / "bus" / "dsa" / "devices"
    config = etc_root / "accel-config" / "accel-config.conf"
    info = DsaInfo(config_path=str(config))
    if not sysfs_root.is_dir():
        missing.append(f"sysfs: {sysfs_root} not found")
    elif not bus.is_dir():
        missing.append(f"Intel DSA: {bus} absent (no DSA hardware or idxd driver not loaded)")
    else:
        info.bus_present = True
        try:
            entries = sorted(p.name for p in bus.iterdir())
        except OSError as exc:
            missing.append(f"Intel DSA: cannot list {bus}: {exc}")
            entries = []
        for entry in entries:
            if _DEV_RE.match(entry):
                try:
                    info.devices[entry] = DsaDevice(state=_read_attr(bus / entry / "state"))
                except OSError as exc:
                    missing.append(f"Intel DSA: {entry}/state unreadable: {exc}")
        for entry in entries:
            if _WQ_RE.match(entry):
                try:
                    info.work_queues[entry] = read_work_queue(
                        bus / entry, _device_of(entry, info.devices)
                    )
                except OSError as exc:
                    missing.append(f"Intel DSA: {entry} unreadable: {exc}")
        info.devices = dict(sorted(info.devices.items(), key=lambda kv: dev_sort_key(kv[0])))
        info.work_queues = dict(sorted(info.work_queues.items(), key=lambda kv: wq_sort_key(kv[0])))
        if not info.devices:
            missing.append(f"Intel DSA: no dsa/iax devices under {bus}")
    if config.is_file():
        info.config_found = True
        try:
            info.saved_queues = parse_accel_config(config.read_text())
        except (OSError, ValueError) as exc:  # json.JSONDecodeError is a ValueError
            info.config_error = f"{config}: {exc}"
            missing.append(f"accel-config: {config} unreadable: {exc}")
    return info, missing
