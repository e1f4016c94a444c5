"""VerifyRecord: one ``advisor verify`` run, predicted vs measured per figure, with the host it ran on.

The probe store keeps these in its ``verify_runs`` table (advisor.probe.store); committed campaigns keep them one
JSON object per line in ``calibration/serving_bench/<campaign>/verify_records.jsonl`` (scripts/c14_verify_records.py).
Both are read back through this schema: a row it refuses is left out with the reason. ``advisor calibrate`` turns
the plain-decoding runs into measured step corrections (advisor.calibrate.step_corrections).
"""

from __future__ import annotations

import math
import re
from datetime import datetime, timezone
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from advisor.model.source import MAX_MODEL_CHARS

SCHEMA_VERSION = 1
"""The layout of a VerifyRecord; a row written by a newer advisor is left out by readers, never misread."""
FIGURES = ("TPOT ms", "TTFT ms", "output tok/s", "decode step ms")
Pattern = Literal["closed", "poisson", "gamma", "burst"]
MAX_FIGURE = 1e9
"""A figure no run measures (ms or tok/s): larger is a corrupt value."""


class Predicted(BaseModel):
    """The answer's band for one figure."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    value: float | None = Field(default=None, ge=0, le=MAX_FIGURE)
    low: float | None = Field(default=None, ge=0, le=MAX_FIGURE)
    high: float | None = Field(default=None, ge=0, le=MAX_FIGURE)


class FigureRow(BaseModel):
    """Predicted vs measured for one figure (advisor.probe.verify.compare's row)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    figure: Literal["TPOT ms", "TTFT ms", "output tok/s", "decode step ms"]
    statistic: str = Field(min_length=1, max_length=40)
    predicted: Predicted | None = None
    measured: float = Field(ge=0, le=MAX_FIGURE)
    prediction_error_pct: float | None = None
    in_band: bool | None = None
    limit: float | None = Field(default=None, gt=0, le=MAX_FIGURE)
    passed: bool | None = None
    measured_spread: dict[str, float] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _judged(self) -> "FigureRow":
        if (self.limit is None) != (self.passed is None):
            raise ValueError(f"{self.figure}: a limit without a verdict, or a verdict without a limit")
        if self.limit is not None and self.passed != (self.measured <= self.limit):
            raise ValueError(f"{self.figure}: passed is {self.passed} but measured {self.measured:g} vs limit {self.limit:g}")
        return self


class VerifyRecord(BaseModel):
    """One verify run: the answer it checked, the run's load and figures, the host (fingerprint) it was stored on."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    schema_version: Literal[1] = SCHEMA_VERSION
    created_at: str
    """ISO-8601 UTC, when it was stored."""
    campaign: str | None = None
    """A committed campaign's name (its folder under calibration/serving_bench/); None: the user's own run."""
    label: str | None = None
    """The campaign's name for this answer (e.g. ``q30-fp8-t25``)."""
    source: str = Field(min_length=1)
    """The result file read (``--result``, or the one ``--url`` wrote)."""
    model: str
    """The model the answer is for."""
    model_id: str
    """The model the run names (vLLM's ``model_id``: the same model, maybe by its local path)."""
    arch_class: Literal["dense", "gqa-moe", "mla-moe"] | None = None
    weights_dtype: str | None = None
    """``bf16``, ``fp8``, ... (advisor.predict.step_correction.dtype_key)."""
    weights: Literal["real", "dummy"] = "real"
    """``dummy``: the server ran ``--load-format dummy`` (verify --dummy-weights)."""
    method: str | None = None
    """The answer's speculative method, ``none`` for plain decoding (None: an answer older than this field)."""
    gpu: str | None = None
    """The GPU the answer is for."""
    gpus: int | None = Field(default=None, ge=1, le=4096)
    tensor_parallel_size: int | None = Field(default=None, ge=1, le=4096)
    data_parallel_size: int | None = Field(default=None, ge=1, le=4096)
    vllm_version: str | None = None
    vllm_version_source: Literal["server", "host", "answer"] | None = None
    """Where ``vllm_version`` comes from: the server's /version (``--url``), this host's installed vLLM, or the
    vLLM line the answer was computed for."""
    host_fingerprint: str = Field(min_length=1, max_length=128)
    """advisor.hardware.fingerprint of the host verify ran on (the one the run was measured on where the result
    file is this host's)."""
    host_gpu: str | None = None
    """That host's GPU (spec name), None without one: advisor calibrate uses a run only where it is ``gpu``."""
    host: dict | None = None
    """The full host fingerprint object."""
    cpu_model: str | None = None
    pattern: Pattern
    max_concurrency: int | None = Field(default=None, ge=1, le=1_000_000)
    request_rate: float | None = Field(default=None, gt=0)
    compared_with: Literal["closed", "poisson"]
    load_matched: bool
    """Whether the run offered the answer's load (False: compared with the answer's figures anyway, with a warning)."""
    prompt_len: int | None = Field(default=None, ge=1)
    output_len: int | None = Field(default=None, ge=1)
    """The answer's lengths."""
    mean_prompt_len: float = Field(ge=0)
    mean_output_len: float = Field(ge=0)
    completed: int = Field(ge=1)
    failed: int = Field(default=0, ge=0)
    duration_s: float = Field(gt=0)
    statistic: str
    rows: list[FigureRow] = Field(min_length=1)
    sla_max_tpot_ms: float | None = Field(default=None, gt=0)
    sla_max_ttft_ms: float | None = Field(default=None, gt=0)
    sla_claimed: bool
    sla_met: bool | None
    sla_missed: bool
    step_correction: float = Field(default=1.0, gt=0, le=100)
    """The measured step correction the answer's decode step already carried (1: the physics alone): the lab divides
    it out, so a correction is never fitted on top of itself."""
    running_per_replica: int | None = Field(default=None, ge=1, le=1_000_000)
    """Sequences the answer's decode step was predicted for (its operating point; None: an answer older than this
    field): with ``context_tokens`` the lab re-predicts the step with the physics as it is now."""
    context_tokens: float | None = Field(default=None, ge=0)
    """Mean context of those sequences in the answer's decode step (prompt + half the output)."""
    max_num_seqs: int | None = Field(default=None, ge=1, le=1_000_000)
    """The answer's max_num_seqs (with the next three: the closed loop the lab replays at the run's own load)."""
    max_num_batched_tokens: int | None = Field(default=None, ge=1, le=10_000_000)
    """The answer's max_num_batched_tokens."""
    kv_cache_dtype: str | None = None
    """The answer's --kv-cache-dtype (``auto`` or ``fp8``)."""
    kv_cache_tokens: int | None = Field(default=None, ge=0)
    """The KV cache the answer's memory plan predicted (tokens per GPU)."""
    advisor_version: str | None = None
    warnings: list[str] = Field(default_factory=list)

    @field_validator("model", "model_id")
    @classmethod
    def _model(cls, value: str) -> str:
        if not value.strip() or len(value) > MAX_MODEL_CHARS or re.search(r"[\x00-\x1f\x7f]", value):
            raise ValueError(f"not a model id or path (empty, over {MAX_MODEL_CHARS} characters, or with control characters)")
        return value

    @field_validator("created_at")
    @classmethod
    def _when(cls, value: str) -> str:
        try:
            datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            raise ValueError("not an ISO-8601 time") from None
        return value

    @field_validator("source", "campaign", "label", "vllm_version", "cpu_model", "gpu", "host_gpu", "weights_dtype",
                     "method", "advisor_version")  # fmt: skip
    @classmethod
    def _inert(cls, value: str | None) -> str | None:
        """Text a file or a server wrote: kept without terminal escapes or bidi controls (advisor.errors.printable)."""
        from advisor.errors import printable

        return None if value is None else printable(value[:1000], keep_newlines=False)

    @field_validator("warnings")
    @classmethod
    def _inert_list(cls, value: list[str]) -> list[str]:
        from advisor.errors import printable

        return [printable(v[:1000], keep_newlines=False) for v in value[:50]]

    @model_validator(mode="after")
    def _consistent(self) -> "VerifyRecord":
        figures = [r.figure for r in self.rows]
        if len(set(figures)) != len(figures):
            raise ValueError(f"a figure appears twice in rows ({', '.join(figures)})")
        if self.sla_missed != (self.sla_claimed and self.sla_met is False):
            raise ValueError("sla_missed must be sla_claimed and sla_met false")
        if self.pattern == "closed" and self.max_concurrency is None:
            raise ValueError("a closed loop without max_concurrency")
        if self.pattern in ("poisson", "gamma") and self.request_rate is None:
            raise ValueError(f"{self.pattern} arrivals without request_rate")
        return self

    def row(self, figure: str) -> FigureRow | None:
        return next((r for r in self.rows if r.figure == figure), None)

    def step_point(self) -> tuple[float, float] | None:
        """(predicted decode step with no correction, measured median ITL) in ms, or None: the run has no step row."""
        r = self.row("decode step ms")
        if r is None or r.predicted is None or not r.predicted.value or r.measured <= 0:
            return None
        return r.predicted.value / self.step_correction, r.measured

    def log_error(self, figure: str) -> float | None:
        """ln(measured / predicted) of ``figure`` (None: not predicted)."""
        r = self.row(figure)
        if r is None or r.predicted is None or not r.predicted.value or r.measured <= 0:
            return None
        return math.log(r.measured / r.predicted.value)


def now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def record_of(verdict: dict, bench: dict, host: dict, *, weights: str = "real", vllm_version: str | None = None,
              vllm_version_source: str | None = None, campaign: str | None = None, label: str | None = None,
              created_at: str | None = None) -> VerifyRecord:  # fmt: skip
    """The record of a comparison (advisor.probe.verify.compare) of ``bench`` (the answer's ``benchmark`` object) on
    the host ``host`` (advisor.probe.campaign.host_info's ``{"fingerprint", "host", "gpu", "gpus"}``), validated:
    DataError (one line, nothing stored) when a value is not one a run has."""
    from pydantic import ValidationError

    from advisor.errors import DataError

    try:
        return _record_of(verdict, bench, host, weights=weights, vllm_version=vllm_version,
                          vllm_version_source=vllm_version_source, campaign=campaign, label=label, created_at=created_at)  # fmt: skip
    except ValidationError as exc:
        first = exc.errors()[0]
        raise DataError(f"the run of {str(bench.get('model'))[:200]} was compared but cannot be stored: "
                        f"{'.'.join(map(str, first['loc']))}: {first['msg']} (--no-store compares only)") from None  # fmt: skip


def _record_of(verdict: dict, bench: dict, host: dict, *, weights: str, vllm_version: str | None,
               vllm_version_source: str | None, campaign: str | None, label: str | None, created_at: str | None) -> VerifyRecord:  # fmt: skip
    answer = bench.get("answer") or {}
    sla = verdict.get("sla") or {}
    load = verdict["load"]
    fp = host.get("host") if isinstance(host.get("host"), dict) else None
    if vllm_version is None:
        installed = ((fp or {}).get("versions") or {}).get("vllm")
        vllm_version, vllm_version_source = (installed, "host") if installed else (answer.get("vllm_version"), "answer")
    if vllm_version is None:
        vllm_version_source = None
    return VerifyRecord(
        created_at=created_at or now(), campaign=campaign, label=label, source=verdict["result"], model=bench["model"],
        model_id=verdict["model_id"], arch_class=answer.get("arch_class"), weights_dtype=answer.get("weights_dtype"),
        weights=weights, method=answer.get("method"), gpu=answer.get("gpu"), gpus=answer.get("gpus"),
        tensor_parallel_size=answer.get("tensor_parallel_size"), data_parallel_size=answer.get("data_parallel_size"),
        vllm_version=vllm_version, vllm_version_source=vllm_version_source, host_fingerprint=host["fingerprint"],
        host_gpu=host.get("gpu"), host=fp, cpu_model=((fp or {}).get("cpu") or {}).get("model"),
        pattern=load["pattern"], max_concurrency=load.get("max_concurrency"), request_rate=load.get("request_rate"),
        compared_with=verdict["compared_with"], load_matched=verdict.get("load_matched", False),
        prompt_len=bench.get("prompt_len"), output_len=bench.get("output_len"),
        mean_prompt_len=verdict["mean_prompt_len"], mean_output_len=verdict["mean_output_len"],
        completed=verdict["completed"], failed=verdict["failed"], duration_s=verdict["duration_s"],
        statistic=verdict["statistic"], rows=verdict["rows"], sla_max_tpot_ms=sla.get("max_tpot_ms"),
        sla_max_ttft_ms=sla.get("max_ttft_ms"), sla_claimed=verdict["sla_claimed"], sla_met=verdict["sla_met"],
        sla_missed=verdict["sla_missed"], step_correction=answer.get("step_correction") or 1.0,
        running_per_replica=answer.get("running_per_replica"), context_tokens=answer.get("context_tokens"),
        max_num_seqs=answer.get("max_num_seqs"), max_num_batched_tokens=answer.get("max_num_batched_tokens"),
        kv_cache_dtype=answer.get("kv_cache_dtype"), kv_cache_tokens=answer.get("kv_cache_tokens"),
        advisor_version=answer.get("advisor_version"), warnings=verdict["warnings"],
    )  # fmt: skip


def used_for_correction(r: VerifyRecord) -> str | None:
    """Why advisor calibrate leaves this run out of the step corrections (None: it is used)."""
    if r.method != "none":
        return f"method {r.method or 'unknown'}: only plain-decoding runs measure the plain decode step"
    if r.step_point() is None:
        return "no decode step row (no median ITL in the result, or no step in the answer)"
    if not r.load_matched:
        return "the run offered another load than the answer's: its step is for another batch"
    if not r.gpu or not r.host_gpu or r.host_gpu.lower() != r.gpu.lower():
        return (f"stored on a host {'with ' + r.host_gpu if r.host_gpu else 'without a GPU'}, the answer is for "
                f"{r.gpu or 'an unknown GPU'}: verify must run on the host that ran the benchmark")
    if r.arch_class is None or not r.weights_dtype:
        return "the answer does not name the model's class and weights (an answer older than verify records)"
    if not r.vllm_version:
        return "no vLLM version known for the run"
    return None
