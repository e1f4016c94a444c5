"""Measured step corrections: a factor on the decode step per host profile and model class, applied only where
``advisor verify`` measured it (issue 40, item 4). Pure: reads the shipped table once; the user's rows are handed in.

A row says: on host profile H (advisor.predict.host_profile), models of class C (dense, gqa-moe, mla-moe) with weights
of dtype D (``bf16``, ``fp8``, ...) at TP t ran their plain decode step ``factor`` times the step the physics predicts
(the median inter-token latency of a ``vllm bench serve`` run over the answer's predicted step). The lab fits them
(advisor.calibrate.step_corrections): ``calibration/step_corrections.csv`` from the committed campaigns' verify
records, ``<data dir>/step_corrections.csv`` from the user's (``advisor calibrate``). Nothing here is typed in.

A prediction uses a row only where it was measured: the host matches the row's profile by GPU and vLLM line (and CPU
where known: advisor.predict.host_profile.match, kinds ``exact`` or ``gpu+vllm``), the model's class and dtype are the
row's, the layout's TP is one the row measured (and one replica unless the class is dense: MoE replicas exchange
tokens, which no TP-1 run measured). Everything else is predicted by the physics alone, and says nothing about a
correction. The recommendation runs inside :func:`applied`, which makes the chosen rows visible to
:func:`advisor.predict.absolute.decode_step` for that call only.
"""

from __future__ import annotations

import csv
import io
import math
from contextlib import contextmanager
from contextvars import ContextVar
from functools import lru_cache
from typing import TYPE_CHECKING, Iterator, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from advisor.errors import DataError

if TYPE_CHECKING:
    from advisor.model.schema import ModelProfile

ArchClass = Literal["dense", "gqa-moe", "mla-moe"]
TABLE = "step_corrections.csv"
"""The shipped table under calibration/ (the committed campaigns' verify records)."""
USER_FILE = "step_corrections.csv"
"""The file ``advisor calibrate`` writes in the data dir (the user's verify records)."""
FACTOR_BOUNDS = (0.2, 5.0)
"""A measured step more than 5x off the physics is a broken run or model, not a correction: refused."""
COLUMNS = ("host_profile", "arch_class", "dtype", "tp", "factor", "applied", "why_not", "points", "models", "campaigns",
           "weights", "log_min", "log_max", "provenance", "source")  # fmt: skip
MATCHED = ("exact", "gpu+vllm")
"""advisor.predict.host_profile.match kinds under which a row counts as measured on the host: the vLLM line is the
row's (a ``gpu`` match is another vLLM line: its kernels are not the measured ones)."""


def class_of(arch: str | None, attention: str | None) -> ArchClass:
    """dense, gqa-moe or mla-moe from a profile's ``arch`` and ``attention`` (advisor.predict.class_accuracy's classes)."""
    if arch != "moe":
        return "dense"
    return "mla-moe" if attention == "mla" else "gqa-moe"


def dtype_key(weights_dtype: str | None) -> str:
    """``fp8`` for FP8 weights, ``bf16`` for any 16-bit float, else the dtype as the profile names it."""
    d = (weights_dtype or "").strip().lower()
    if d in ("bf16", "bfloat16", "fp16", "float16", "half", "f16"):
        return "bf16"
    return d or "unknown"


def key_of(p: "ModelProfile") -> tuple[ArchClass, str]:
    return class_of(p.arch, p.attention), dtype_key(p.weights_dtype)


class StepCorrection(BaseModel):
    """One measured factor on the plain decode step (a row of the tables)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    host_profile: str = Field(min_length=1)
    """advisor.predict.host_profile id the runs matched."""
    arch_class: ArchClass
    dtype: str = Field(min_length=1)
    tp: str
    """The TP sizes measured, ';'-separated: the row applies only at those."""
    factor: float = Field(gt=FACTOR_BOUNDS[0], lt=FACTOR_BOUNDS[1])
    """exp(mean over models of the mean ln(measured step / predicted step) of each model's runs)."""
    applied: bool
    """False: kept and shown, never applied (``why_not`` says why)."""
    why_not: str = ""
    points: int = Field(ge=1)
    models: str
    """The measured models, ';'-separated."""
    campaigns: str
    """Where the runs come from (a committed campaign's folder, or ``user store``), ';'-separated."""
    weights: str
    """``real``, ``dummy`` or both, ';'-separated."""
    log_min: float
    log_max: float
    """Smallest and largest ln(measured / predicted) of one run: the spread behind the factor."""
    provenance: str
    source: str

    @field_validator("tp")
    @classmethod
    def _tps(cls, value: str) -> str:
        if not value or not all(t.isdigit() and 1 <= int(t) <= 4096 for t in value.split(";")):
            raise ValueError("not ';'-separated TP sizes")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> "StepCorrection":
        if not self.applied and not self.why_not:
            raise ValueError("a row that is not applied must say why (why_not)")
        if self.log_min > self.log_max + 1e-9:
            raise ValueError("log_min above log_max")
        return self

    @property
    def tps(self) -> tuple[int, ...]:
        return tuple(int(t) for t in self.tp.split(";"))

    def label(self) -> str:
        return f"{self.arch_class} {self.dtype} on host profile {self.host_profile} at TP {self.tp.replace(';', '/')}"

    def note(self, how: str = "") -> str:
        """The line a prediction that uses this row carries."""
        n = len(self.models.split(";"))
        return (f"MEASURED step correction x{self.factor:.2f} for {self.label()} from campaign {self.campaigns.replace(';', ', ')} "
                f"({self.points} run(s) of {n} model(s): {self.models.replace(';', ', ')}; {self.weights.replace(';', '+')} weights; "
                f"median ITL / predicted decode step, advisor.calibrate.step_corrections){how}")  # fmt: skip


def read_rows(text: str, skipped: list[str] | None = None) -> list[StepCorrection]:
    """Rows of a step_corrections.csv text. With ``skipped`` a bad row is left out and named there; without it the
    first bad row raises ValueError."""
    from advisor.predict.csv_rows import read_models

    return read_models(text, lambda row: StepCorrection(**{k: v for k, v in row.items() if k is not None}), "step corrections", skipped)


def render_rows(rows: list[StepCorrection]) -> str:
    """step_corrections.csv text of ``rows`` (what the lab writes)."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=COLUMNS, lineterminator="\n")
    w.writeheader()
    for r in rows:
        d = r.model_dump()
        d["factor"] = f"{r.factor:.4f}"
        d["log_min"], d["log_max"] = f"{r.log_min:.4f}", f"{r.log_max:.4f}"
        w.writerow(d)
    return buf.getvalue()


@lru_cache(maxsize=1)
def shipped() -> tuple[StepCorrection, ...]:
    """calibration/step_corrections.csv (empty when the file is absent)."""
    from advisor.paths import data_path

    path = data_path("calibration") / TABLE
    if not path.is_file():
        return ()
    try:
        return tuple(read_rows(path.read_text(encoding="utf-8")))
    except OSError as exc:
        raise DataError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except (TypeError, ValueError) as exc:
        raise DataError(f"{path}: invalid row: {str(exc).splitlines()[0]}") from None


def for_host(gpu: str, cpu_model: str | None, vllm_version: str | None,
             user_rows: tuple[StepCorrection, ...] | list[StepCorrection] = ()) -> tuple[tuple[StepCorrection, ...], str]:  # fmt: skip
    """(the rows measured on this host's profile, how the host matched it): the user's rows first (they replace a
    shipped row of the same profile, class, dtype and TP), then the shipped ones. Nothing when the host matches no
    profile by GPU and vLLM line."""
    from advisor.predict import host_profile as hp

    m = hp.match(gpu, cpu_model, vllm_version)
    if m.kind not in MATCHED:
        return (), ""
    pid = m.profiles[0]
    how = "" if m.kind == "exact" else f"; host matched to {pid} by GPU and vLLM line, CPU not verified"
    out: dict[tuple, StepCorrection] = {}
    for r in [*shipped(), *user_rows]:
        if r.host_profile == pid:
            out[(r.arch_class, r.dtype, r.tp)] = r
    return tuple(out.values()), how


_ACTIVE: ContextVar[tuple[tuple[StepCorrection, ...], str]] = ContextVar("advisor_step_corrections", default=((), ""))


@contextmanager
def applied(rows: tuple[StepCorrection, ...] | list[StepCorrection], how: str = "") -> Iterator[None]:
    """Within the block, :func:`lookup` (and so every decode step priced) sees ``rows`` (the host's, from
    :func:`for_host`); outside it, none."""
    token = _ACTIVE.set((tuple(rows), how))
    try:
        yield
    finally:
        _ACTIVE.reset(token)


def lookup(p: "ModelProfile", tp: int, dp: int = 1) -> tuple[StepCorrection, str] | None:
    """(the row measured for ``p`` at TP ``tp`` x DP ``dp`` on the host of the enclosing :func:`applied`, how the
    host matched) or None: a row of the model's class and dtype measured at that TP, one replica unless the class is
    dense. The caller multiplies by its factor only when ``applied``; a row that is not applied is said, not used."""
    rows, how = _ACTIVE.get()
    if not rows:
        return None
    cls, dt = key_of(p)
    for r in rows:
        if r.arch_class == cls and r.dtype == dt and tp in r.tps and (dp == 1 or cls == "dense"):
            return r, how
    return None


def not_applied_note(r: StepCorrection) -> str:
    return (f"step correction x{r.factor:.2f} measured for {r.label()} (campaign {r.campaigns.replace(';', ', ')}) NOT "
            f"APPLIED: {r.why_not}; the physics alone")  # fmt: skip


def log_ratio(measured: float, predicted: float) -> float:
    return math.log(measured / predicted)
