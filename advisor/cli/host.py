"""``advisor host`` and ``advisor host diff``: a thin adapter over ``advisor.hardware.host``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from advisor.cli._app import app
from advisor.cli.common import emit_json

if TYPE_CHECKING:
    from advisor.hardware.host import HostDiff, HostFingerprint

host_app = typer.Typer(
    name="host",
    no_args_is_help=False,
    add_completion=False,
    rich_markup_mode=None,
)
app.add_typer(host_app, name="host")


def _cudagraph(value: str | None) -> str | None:
    from typing import get_args

    from advisor.errors import UsageError
    from advisor.domain.decision import CudagraphMode

    if value is None:
        return None
    known = get_args(CudagraphMode)
    if value.strip().upper() not in known:
        raise UsageError(f"--cudagraph-mode {value!r}: expected one of {', '.join(known)}")
    return value.strip().upper()


@host_app.callback(invoke_without_command=True)
def host(
    ctx: typer.Context,
    as_json: bool = typer.Option(
        False, "--json", help="Print the fingerprint as JSON (the format `host diff` reads)."
    ),
    save: Path | None = typer.Option(
        None, "--save", metavar="FILE", help="Also write the JSON fingerprint to FILE (atomically)."
    ),
    cudagraph_mode: str | None = typer.Option(
        None,
        "--cudagraph-mode",
        metavar="MODE",
        help="Record the vLLM cudagraph mode the measurements use (e.g. FULL_AND_PIECEWISE).",
    ),
    sysfs_root: Path | None = typer.Option(
        None, "--sysfs-root", help="Read sysfs here instead of /sys (ADVISOR_SYSFS_ROOT)."
    ),
    etc_root: Path | None = typer.Option(
        None, "--etc-root", help="Read /etc files here (ADVISOR_ETC_ROOT)."
    ),
) -> None:
    """Fingerprint this host: GPUs, driver, CPU, vLLM/torch versions, Intel DSA work queues and
    whether accel-config persists them, perf-relevant env, and a hash of what matters for
    throughput. Measurements are comparable only between hosts with the same hash; see
    `advisor host diff`. Nothing unreadable is an error: it is listed under "missing"."""
    if ctx.invoked_subcommand is not None:
        return
    from advisor.cli.common import settings as global_settings
    from advisor.hardware.host import collect_host, save_host

    settings = global_settings()
    roots = {"sysfs_root": sysfs_root, "etc_root": etc_root}
    settings = settings.model_copy(update={k: v for k, v in roots.items() if v is not None})
    fp = collect_host(settings, cudagraph_mode=_cudagraph(cudagraph_mode))
    if save is not None:
        save_host(fp, save)
    if as_json:
        emit_json(fp.model_dump(mode="json"))
    else:
        _print_host(fp, saved_to=save)


@host_app.command("diff")
def diff(
    a: Path = typer.Argument(
        ..., metavar="A.json", help="Fingerprint of host A (advisor host --json)."
    ),
    b: Path = typer.Argument(..., metavar="B.json", help="Fingerprint of host B."),
    as_json: bool = typer.Option(False, "--json", help="Print the diff as JSON."),
) -> None:
    """Compare two saved host fingerprints: every differing field, and whether it makes
    throughput numbers from the two hosts NOT comparable (GPU model/count/driver, vLLM/torch
    version, enabled DSA queue set, cudagraph mode, perf env) and why.

    \b
    Exit status:
      0  comparable (measurements may be pooled)
      1  not comparable
      2  a file could not be read (or bad arguments)
      5  a file is not a host fingerprint
    """
    from advisor.hardware.host import diff_hosts, load_host

    result = diff_hosts(load_host(a), load_host(b))
    if as_json:
        emit_json(result.model_dump(mode="json"))
    else:
        _print_diff(result, a, b)
    if not result.comparable:
        raise typer.Exit(code=1)


# --- rendering ---------------------------------------------------------------------------------


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, list):
        return ", ".join(str(v) for v in value) if value else "(none)"
    return str(value)


def _print_host(fp: HostFingerprint, saved_to: Path | None) -> None:
    from advisor.cli.common import table
    from advisor.hardware.host import gpu_name_for_specs, host_warnings

    rows: list[tuple[str, Any]] = [
        ("host", f"{fp.hostname} (collected {fp.collected_at}, kernel {_fmt(fp.kernel)})"),
        ("fingerprint", fp.fingerprint),
    ]
    for name in sorted({g.name for g in fp.gpus}):
        same = [g for g in fp.gpus if g.name == name]
        mem = _fmt(sorted({g.memory_mib for g in same}, key=str))
        drv = _fmt(sorted({g.driver_version for g in same}, key=str))
        spec = gpu_name_for_specs(name) or "not in spec table"
        rows.append(
            (
                "GPUs",
                f"{len(same)} x {name}, {mem} MiB, driver {drv}, "
                f"CUDA {_fmt(fp.cuda_version)} (spec {spec}; via {fp.gpu_source})",
            )
        )
    if not fp.gpus:
        rows.append(("GPUs", "none detected"))
    elif fp.visible_gpu_count != fp.gpu_count:
        rows.append(("visible GPUs", fp.visible_gpu_count))
    cpu, v = fp.cpu, fp.versions
    rows += [
        ("CPU", f"{_fmt(cpu.model)}, {_fmt(cpu.sockets)} socket(s), {_fmt(cpu.threads)} threads"),
        ("vLLM", _fmt(v.vllm)),
        ("torch", _fmt(v.torch)),
        ("arctic-inference", _fmt(v.arctic_inference)),
        ("cudagraph mode", fp.cudagraph_mode or "(not given; --cudagraph-mode)"),
    ]
    rows += [("env", f"{name}={value}") for name, value in fp.env.items()]
    dsa = fp.dsa
    devices = ", ".join(f"{d} {_fmt(dev.state)}" for d, dev in dsa.devices.items())
    rows.append(("Intel DSA", devices or "no devices"))
    if dsa.devices:
        rows.append(("DSA enabled queues", _fmt(dsa.enabled_queues)))
        persist = {True: "yes", False: "NO", None: "-"}[dsa.persisted]
        found = "found" if dsa.config_found else "absent"
        rows.append(
            ("accel-config", f"{dsa.config_path} ({found}); enabled set persists: {persist}")
        )
    typer.echo(table(rows))
    if dsa.work_queues:
        _print_queues(fp)
    for note in fp.missing:
        typer.echo(f"missing: {note}")
    for line in host_warnings(fp):
        typer.echo(f"warning: {line}")
    if saved_to is not None:
        typer.echo(f"saved: {saved_to}")


def _columns(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> str:
    """A plain fixed-width table (no rich: the output goes to logs and narrow terminals alike)."""
    widths = [max(len(r[i]) for r in (header, *rows)) for i in range(len(header))]
    lines = [
        "  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
        for r in (header, *rows)
    ]
    return "\n".join(lines)


def _print_queues(fp: HostFingerprint) -> None:
    saved = set(fp.dsa.saved_queues)
    header = ("queue", "device", "state", "mode", "size", "type", "clients", "name", "saved")
    rows = [
        (
            wq,
            q.device,
            _fmt(q.state),
            _fmt(q.mode),
            _fmt(q.size),
            _fmt(q.type),
            _fmt(q.clients),
            _fmt(q.name),
            "yes" if wq in saved else "no",
        )
        for wq, q in fp.dsa.work_queues.items()
    ]
    typer.echo("DSA work queues")
    typer.echo(_columns(header, rows))


def _print_diff(result: HostDiff, a: Path, b: Path) -> None:
    typer.echo(f"A = {a}\nB = {b}")
    for d in sorted(result.differences, key=lambda d: d.comparable):
        verdict = "comparable    " if d.comparable else "NOT comparable"
        typer.echo(f"  {verdict}  {d.field}: {_fmt(d.a)} -> {_fmt(d.b)}")
        typer.echo(f"  {'':14}    why: {d.reason}")
    if not result.differences:
        typer.echo("  no differences")
    if result.comparable:
        typer.echo(f"comparable: same fingerprint {result.fingerprint_a[:16]}")
    else:
        fields = ", ".join(d.field for d in result.blocking)
        typer.echo(f"NOT comparable: {len(result.blocking)} field(s) differ ({fields})")
