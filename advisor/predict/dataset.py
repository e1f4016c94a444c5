"""Calibration data: the seed sweep and probe records as one list of observations.

An observation is one (model, corpus, host, configuration) where both vanilla and suffix ran at
the same host state: the gain is suffix throughput / vanilla throughput. Seed rows compare only
within one host state (van_off/suf_off = OFF, van_on/suf_on = ON; dsa_on/sufdsa_on are a
second ON measurement of the same two configurations, since the write-up found the DSA env to be
noise). Probe records pair a campaign's ``suffix:K`` runs with its ``vanilla`` run.
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Iterable
from functools import lru_cache

from pydantic import BaseModel, ConfigDict, Field

from advisor.errors import DataError
from advisor.model.schema import ModelProfile
from advisor.predict.stepcost import Build

SEED_FILE = "sweep_b200.csv"
SEED_GPU = "B200"
SEED_TP = 8
SEED_CONCURRENCY = 32
SEED_K = 32
"""K of every seed run (seed README, 'The setup'): a fact of the data, not the default K, which is the decider's
(rules/policy/decider.yaml ``num_speculative_tokens``, chosen because the seed measured this one)."""
KBAR_FLOOR = 1.0
"""K̄ counts emitted tokens per step, so it is at least 1: where gain × R < 1 the step-cost model
underestimates R, and the calibrated model (not the prior) has to carry the rest."""

ProfileFn = Callable[[str], ModelProfile]


class Observation(BaseModel):
    """One measured suffix-vs-vanilla comparison."""

    model_config = ConfigDict(extra="forbid")

    model: str
    """Model id (HF id for seed rows) as load_profile resolves it."""
    label: str
    """Short name for reports (the seed's ``model`` column)."""
    corpus: str | None
    family: str
    """Family as the seed or the profile says."""
    host_state: str
    """``OFF`` or ``ON`` (DSA work queues of the host at the time)."""
    gpu: str = SEED_GPU
    tp: int = Field(default=SEED_TP, ge=1)
    concurrency: int = Field(default=SEED_CONCURRENCY, ge=1)
    k: int = Field(default=SEED_K, ge=1)
    vanilla_tps: float = Field(gt=0)
    suffix_tps: float = Field(gt=0)
    k_bar: float | None = None
    """Measured tokens per step of the suffix run, when the record has it."""
    source: str
    """``seed``, ``seed-dsa`` (the DSA-env replicate) or ``probe:<campaign_id>``."""
    build: Build = "seed"
    """vLLM build the row was measured on: ``seed`` (the write-up's 1.7.dev) or ``release``
    (probe records); selects the step-cost model's suffix-step costs."""

    @property
    def gain(self) -> float:
        return self.suffix_tps / self.vanilla_tps


def _num(text: str | None) -> float | None:
    text = (text or "").strip()
    return float(text) if text else None


@lru_cache(maxsize=1)
def _seed_rows() -> tuple[dict, ...]:
    from advisor.paths import data_path

    path = data_path("calibration") / SEED_FILE
    try:
        with path.open(newline="") as fh:
            return tuple(csv.DictReader(fh))
    except OSError as exc:
        raise DataError(f"{path}: cannot read: {exc.strerror or exc}") from None


def seed_observations(*, replicates: bool = True) -> list[Observation]:
    """Observations of calibration/sweep_b200.csv (rows with a missing value are dropped)."""
    out: list[Observation] = []
    pairs = [("OFF", "van_off", "suf_off", "seed"), ("ON", "van_on", "suf_on", "seed")]
    if replicates:
        pairs.append(("ON", "dsa_on", "sufdsa_on", "seed-dsa"))
    for row in _seed_rows():
        for state, van, suf, source in pairs:
            v, s = _num(row.get(van)), _num(row.get(suf))
            if v is None or s is None:
                continue
            out.append(Observation(
                model=row["hf_id"], label=row["model"], corpus=row["corpus"], family=row["family"],
                host_state=state, vanilla_tps=v, suffix_tps=s, source=source,
            ))  # fmt: skip
    return out


def host_state_of(host: dict | None) -> str:
    """``ON`` when the host fingerprint lists enabled DSA work queues, else ``OFF``."""
    dsa = (host or {}).get("dsa") or {}
    queues = dsa.get("enabled_queues") if isinstance(dsa, dict) else None
    return "ON" if queues else "OFF"


def probe_observations(records: Iterable, profile_of: ProfileFn | None = None,
                       skipped: list[str] | None = None) -> list[Observation]:  # fmt: skip
    """Pair each campaign's ok ``suffix:K`` records with its ok ``vanilla`` record. Records of
    dummy-weight runs are left out: their K̄ and gain are not those of real traffic; so are records
    without a GPU (a CPU vLLM's gain says nothing about a GPU's, and would be fitted as the seed's B200).

    A record whose model no longer resolves (a probed directory since removed, a path that is a device or FIFO,
    an id unknown offline) is left out too, never fatal: one row must not stop every answer; ``skipped``, when
    given, gets each such record with the reason."""
    from advisor.errors import AdvisorError
    from advisor.hardware.gpus import get_gpu
    from advisor.kbar.runs import method_k

    by_campaign: dict[str, list] = {}
    for rec in records:
        if rec.outcome == "ok" and rec.throughput_tok_s and rec.weights != "dummy" and rec.gpu:
            by_campaign.setdefault(rec.campaign_id, []).append(rec)
    out: list[Observation] = []
    for campaign, recs in sorted(by_campaign.items()):
        vanilla = [r for r in recs if r.config == "vanilla"]
        if not vanilla:
            continue
        van = max(vanilla, key=lambda r: r.started_at)
        for rec in recs:
            if not rec.config.startswith("suffix:"):
                continue
            k = method_k(rec.config)[1]  # "suffix:8@gmu=0.8" carries overrides
            try:
                family = profile_of(rec.model).family if profile_of else "instruct"
            except AdvisorError as exc:
                if skipped is not None:
                    skipped.append(f"probe {campaign}/{rec.config} left out of the fit: its model does not resolve: {exc}")
                continue
            try:
                get_gpu(rec.gpu)
            except AdvisorError as exc:  # a GPU this advisor's table does not know (a newer advisor's row, an edit)
                if skipped is not None:
                    skipped.append(f"probe {campaign}/{rec.config} left out of the fit: {exc}")
                continue
            out.append(Observation(
                model=rec.model, label=rec.model.split("/")[-1], corpus=rec.corpus, family=family,
                host_state=host_state_of(rec.host), gpu=rec.gpu, tp=rec.tensor_parallel_size,
                concurrency=rec.concurrency, k=k, vanilla_tps=van.throughput_tok_s, suffix_tps=rec.throughput_tok_s,
                k_bar=rec.tokens_per_step or rec.mean_acceptance_length, source=f"probe:{campaign}", build="release",
            ))  # fmt: skip
    return out


def default_profile_of(settings=None) -> ProfileFn:
    """load_profile with an in-process cache (bundled catalog resolves the seed models offline)."""
    from advisor.model.load import load_profile

    from advisor.errors import AdvisorError

    cache: dict[str, ModelProfile | AdvisorError] = {}

    def profile_of(model: str) -> ModelProfile:
        if model not in cache:
            try:
                cache[model] = load_profile(model, settings)
            except AdvisorError as exc:  # remembered: a model that does not resolve is not looked up again per row
                cache[model] = exc
        hit = cache[model]
        if isinstance(hit, AdvisorError):
            raise hit
        return hit

    return profile_of
