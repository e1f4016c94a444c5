"""Rows of a CSV table the runtime reads, each validated into a model: with ``skipped`` a bad row (or the unparseable
rest of the file) is left out and named there; without it the first bad row raises (host_profiles.csv,
step_corrections.csv, shipped or the user's)."""

from __future__ import annotations

import csv
import io
from typing import Callable, TypeVar

T = TypeVar("T")


def read_models(text: str, make: Callable[[dict], T], label: str, skipped: list[str] | None = None) -> list[T]:
    """``make(row)`` for every row of ``text``; ``label`` names the table in the ``skipped`` lines."""
    from pydantic import ValidationError

    out: list[T] = []
    reader = csv.DictReader(io.StringIO(text))
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return out
        except csv.Error as exc:  # the rest of the file cannot be parsed past this line
            if skipped is None:
                raise ValueError(f"line {reader.line_num}: {exc}") from None
            skipped.append(f"{label}: line {reader.line_num} and after left out: {exc}")
            return out
        try:
            out.append(make(row))
        except (ValidationError, TypeError) as exc:
            if skipped is None:
                raise
            first = exc.errors()[0] if isinstance(exc, ValidationError) else {"loc": (), "msg": str(exc)}
            skipped.append(f"{label}: line {reader.line_num} left out: {'.'.join(map(str, first['loc']))}: {first['msg']}")
