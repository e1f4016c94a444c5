"""Refuse to render a configuration that is predicted not to boot (unless forced)."""

from __future__ import annotations

from collections.abc import Callable

from advisor.errors import NotBootableError
from advisor.render.files import summary_line
from advisor.rules.policy import load_policy


def boots(rec) -> bool | None:
    """The memory plan's verdict (None when there is no plan)."""
    return None if not rec.memory else rec.memory.boots


def nothing_boots() -> str:
    """The hint where no GPU count the memory planner considers (up to the policy table's largest ``tp_ladder``) boots."""
    return f"no configuration within {max(load_policy().tp_ladder)} GPUs boots with these settings"


def nearest_booting(rec, try_gpus: Callable[[int], object]) -> str | None:
    """The nearest configuration that boots, as the flags to pass: the memory plan's smallest GPU
    count that holds the weights, re-planned through the same core (``try_gpus(n)`` returns the
    recommendation for n GPUs)."""
    need = rec.memory.min_gpus_for_weights if rec.memory else None
    if not need or need <= rec.host.gpus:
        return None
    for gpus in sorted({need, 1 << (need - 1).bit_length()}):
        alt = try_gpus(gpus)
        if boots(alt):
            return f"--gpus {gpus} ({summary_line(alt.decision)})"
    return None


def check_boots(rec, try_gpus: Callable[[int], object], *, force: bool) -> list[str]:
    """Raise NotBootableError for a configuration that does not boot unless ``force``; the
    warnings to print when forced."""
    if boots(rec) is not False:
        return []
    reason = rec.memory.reason
    where = f"{rec.host.gpus}x{rec.host.gpu}"
    nearest = nearest_booting(rec, try_gpus)
    hint = f"nearest configuration that boots: {nearest}" if nearest else nothing_boots()
    if not force:
        raise NotBootableError(f"not rendering: {summary_line(rec.decision)} on {where} {reason}; {hint}; pass --force to render it anyway")
    return [f"rendered with --force although it does not boot on {where}: {reason}; {hint}"]
