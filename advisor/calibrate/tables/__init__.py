"""One rebuild per shipped table under ``calibration/``: each module here names the files it writes (``OUTPUTS``),
what it reads (``INPUTS``) and ``build(calibration_dir) -> {file name: text}``, a pure function of committed inputs.
``advisor calibrate rebuild TABLE`` writes them; ``--check`` compares them with the shipped files, as the tests do.

Tables that are inputs, not results, have no rebuild: ``sweep_b200.csv`` (the seed sweep), ``kbar_published.csv``
(published K̄ with their quotes), ``corpus_shapes.csv`` (estimated lengths with their sources)."""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType

from advisor.errors import UsageError

TABLES: dict[str, str] = {
    "class_accuracy": "the plain-step error and held-out R bias per GPU and architecture class",
    "drafter_acceptance": "EAGLE-3 / EAGLE / draft-model acceptance per draft position, from published rows",
    "drafter_costs": "the drafter host term per host profile (forward fixed + per sequence)",
    "kbar_length": "K̄'s growth per doubling of the output length, per real-weight load",
    "kbar_own_priors": "per-corpus K̄ priors from real weights (and their evidence table)",
    "kbar_priors": "per-corpus K̄ priors the seed sweep implies",
    "host_profiles": "each host profile's costs refitted from its campaign (words from host_profiles_rows.yaml)",
    "moe_kernel_costs": "the fused-MoE kernel's cost per layer per GPU and dtype, from aiconfigurator's vLLM timings",
    "step_corrections": "measured decode-step corrections per host profile, class, dtype and TP, from verify records",
}
"""Rebuildable tables: name (its module here) -> what it holds."""


def csv_text(rows: list[dict], fields: list[str] | tuple[str, ...]) -> str:
    """The CSV text of ``rows`` under header ``fields`` (``\\n`` line ends), as every builder writes its table."""
    import csv
    import io

    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(fields), lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    return buf.getvalue()


def module(name: str) -> ModuleType:
    """The builder of table ``name``."""
    if name not in TABLES:
        raise UsageError(f"no shipped table {name!r} to rebuild; the tables: {', '.join(TABLES)} (or 'all')")
    return importlib.import_module(f"advisor.calibrate.tables.{name}")


def outputs(name: str) -> tuple[str, ...]:
    """File names (under calibration/) table ``name`` writes."""
    return tuple(module(name).OUTPUTS)


def build(name: str, calibration_dir: Path) -> dict[str, str]:
    """{file name: text} as table ``name``'s builder makes it now (nothing written)."""
    made = module(name).build(Path(calibration_dir))
    assert tuple(made) == outputs(name), (name, tuple(made))
    return made


def differing(name: str, calibration_dir: Path) -> list[str]:
    """Files of table ``name`` whose shipped text differs from a rebuild (empty: the table is its rebuild)."""
    return [f for f, text in build(name, calibration_dir).items()
            if not (Path(calibration_dir) / f).is_file() or (Path(calibration_dir) / f).read_text(encoding="utf-8") != text]  # fmt: skip


def write(name: str, calibration_dir: Path) -> list[Path]:
    """Rebuild table ``name`` and write its files (each atomically); returns the paths written."""
    from advisor.atomic import write_one

    out = []
    for f, text in build(name, calibration_dir).items():
        write_one(Path(calibration_dir) / f, text)
        out.append(Path(calibration_dir) / f)
    return out
