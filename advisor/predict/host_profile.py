"""Host cost profiles: the host work a speculative step serialises, per (GPU, CPU model, vLLM version).

A verification step with a CPU proposer (suffix decoding, n-gram) waits for the sampled ids to come
back to the CPU, drafts there and only then schedules the next step (async scheduling is off for
both: vllm/config/vllm.py, advisor.vllm_facts ``async_scheduling_with_suffix``). What that costs is
a property of the host (its CPU, its vLLM build), not of the model: each profile holds it as
``per-step + per-sequence x sequences`` seconds, one pair per method, in
``calibration/host_profiles.csv`` with its provenance (MEASURED, INFERRED or ASSUMED) and source.

A prediction uses the profile of the user's host when the fingerprint matches one
(:func:`match`); otherwise every known profile, their spread in the interval, and the probe
command that measures this host. Pure: reads the shipped CSV once.
"""

from __future__ import annotations

import csv
from functools import lru_cache
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from advisor.errors import DataError

PROFILES_FILE = "host_profiles.csv"
Method = Literal["suffix", "ngram"]
MatchKind = Literal["exact", "gpu+vllm", "gpu", "none", "given"]
PROBE_HINT = ("advisor probe MODEL --configs vanilla,suffix --dummy-weights --duration 120  "
              "(a few minutes on this host: measures its verification-step cost; `advisor calibrate` stores it)")  # fmt: skip
"""What measures an unknown host's profile (docs/probe.md)."""


MAX_COST_S = 10.0
"""Seconds of host work per step or per sequence no host has (measured ones are 0.1-10 ms): larger, negative, NaN or
infinite costs are a corrupt row (they divided by zero and took logs of negatives in predictions)."""


class HostProfile(BaseModel):
    """The serialised host work of one host's speculative steps."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    id: str
    aliases: str = ""
    """Space-separated other names (``release``: the measured vLLM-release profile; ``seed``: the seed host)."""
    gpu: str
    cpu_model: str
    vllm_version: str
    suffix_step_s: float = Field(ge=0.0, le=MAX_COST_S)
    suffix_per_seq_s: float = Field(ge=0.0, le=MAX_COST_S)
    ngram_step_s: float = Field(ge=0.0, le=MAX_COST_S)
    ngram_per_seq_s: float = Field(ge=0.0, le=MAX_COST_S)
    provenance: str
    source: str
    async_off_step_s: float = Field(default=0.0, ge=0.0, le=MAX_COST_S)
    async_off_per_seq_s: float = Field(default=0.0, ge=0.0, le=MAX_COST_S)
    """Of the per-step / per-sequence costs above, the share that is vLLM's async scheduling turned off
    (both CPU proposers turn it off: vllm/config/vllm.py), where a ``--no-async-scheduling`` vanilla
    run measured it: a labelled part of each method's cost, not added to it."""
    plain_floor_step_s: float = Field(default=0.0, ge=0.0, le=MAX_COST_S)
    plain_floor_per_seq_s: float = Field(default=0.0, ge=0.0, le=MAX_COST_S)
    """The host floor of a plain decode step behind ``vllm serve`` (per-step + per-sequence x sequences): the
    host work of one engine step (scheduling, input preparation, output processing, streaming on the same CPU).
    With async scheduling on (vanilla) vLLM overlaps it with the GPU's step, so a plain step costs
    max(GPU step, floor); a CPU-proposer step runs with async scheduling off and pays its host work on top
    of the GPU's (the per-step / per-sequence costs above). MEASURED from the vanilla runs of a model whose
    GPU step is far below it (host_infer.fit_plain_floor); 0: not measured (the GPU step alone)."""
    suffix_run_sigma: float = Field(default=0.0, ge=0.0, le=2.0)
    ngram_run_sigma: float = Field(default=0.0, ge=0.0, le=2.0)
    """Run-to-run spread of the method's R on this host class: the pooled standard deviation of ln R over settings
    (model, corpus, concurrency, configuration) probed in more than one fresh boot (host_infer.run_to_run_sigma).
    A prediction on this host carries it in its interval: one serving run lands that far from another at the
    same setting. 0: not measured (a profile without repeated probes; the seed rows' residual carries their noise)."""
    mtp_eager_step_s: float = Field(default=0.0, ge=0.0, le=MAX_COST_S)
    mtp_eager_per_draft_s: float = Field(default=0.0, ge=0.0, le=MAX_COST_S)
    """An MTP step of a drafter vLLM runs eagerly (``VllmFacts.mtp_eager_drafters``: no torch.compile, so each
    draft forward is host-bound Python work): seconds the step costs over the verification step of the main model
    at 1 + K tokens, for the first draft and for each further one (per step, whatever the batch: the measured cost
    did not grow with concurrency 1-32). MEASURED from ``mtp:1`` / ``mtp:3`` probes against vanilla
    (advisor.calibrate.mtp_cost); 0: not measured here (carried from the profiles that measured it)."""
    mtp_compiled_step_s: float = Field(default=0.0, ge=0.0, le=MAX_COST_S)
    mtp_compiled_per_draft_s: float = Field(default=0.0, ge=0.0, le=MAX_COST_S)
    """The same for a drafter vLLM compiles (every MTP drafter not in ``VllmFacts.mtp_eager_drafters``:
    DeepSeek-V3/R1, Qwen3-Next): compiled and graph-captured, its step still pays the proposer's per-step host work
    (drafter inputs and attention metadata, the sampled ids' round trip) before the first draft; each further draft is
    one more drafter forward. MEASURED from ``mtp:1`` / ``mtp:2`` / ``mtp:3`` probes against vanilla
    (advisor.calibrate.mtp_cost); 0: not measured here (carried from the profiles that measured it, else the drafter is
    priced as GPU work alone, ASSUMED)."""
    role: Literal["host", "exact", "reference"] = "host"
    """``host``: matched to a user's host by fingerprint, else by GPU; ``exact``: matched only when GPU, CPU
    model and vLLM line all match (a measurement of that host class behind ``vllm serve``, too specific to
    stand in for another CPU); ``reference``: a measurement kept for comparison, never matched."""

    def costs(self, method: Method = "suffix") -> tuple[float, float]:
        """(per-step, per-sequence) seconds a ``method`` verification step adds over a plain step."""
        return (self.suffix_step_s, self.suffix_per_seq_s) if method == "suffix" else (self.ngram_step_s, self.ngram_per_seq_s)

    def run_sigma(self, method: Method = "suffix") -> float:
        """Run-to-run sigma of ln R of ``method`` on this host class (0: not measured)."""
        return self.suffix_run_sigma if method == "suffix" else self.ngram_run_sigma

    def mtp_costs(self, eager: bool) -> tuple[float, float]:
        """(first-draft, per-further-draft) seconds an MTP step of an eager or a compiled drafter costs over a plain
        step on this host (0, 0: not measured here)."""
        if eager:
            return self.mtp_eager_step_s, self.mtp_eager_per_draft_s
        return self.mtp_compiled_step_s, self.mtp_compiled_per_draft_s

    def plain_floor(self, seqs: int) -> float:
        """Seconds below which a plain (async-scheduled) step of ``seqs`` sequences cannot go on this host."""
        return self.plain_floor_step_s + self.plain_floor_per_seq_s * seqs


class HostMatch(BaseModel):
    """Which profiles a prediction for a host uses, and why."""

    model_config = ConfigDict(extra="forbid")

    kind: MatchKind
    profiles: list[str]
    """Profile ids (one for a match, all known for ``none``)."""
    note: str


_REGISTERED: dict[str, HostProfile] = {}
_USER: dict[str, HostProfile] = {}
USER_FILE = "host_profiles.csv"
"""The file ``advisor calibrate`` writes in the data dir: profiles measured by probes on the user's hosts."""
FIELDS = ("id", "aliases", "gpu", "cpu_model", "vllm_version", "suffix_step_s", "suffix_per_seq_s", "ngram_step_s",
          "ngram_per_seq_s", "provenance", "source", "async_off_step_s", "async_off_per_seq_s", "role",
          "plain_floor_step_s", "plain_floor_per_seq_s", "suffix_run_sigma", "ngram_run_sigma", "mtp_eager_step_s",
          "mtp_eager_per_draft_s", "mtp_compiled_step_s", "mtp_compiled_per_draft_s")  # fmt: skip


def run_sigma_of(ids, method: Method = "suffix") -> float:
    """The largest measured run-to-run sigma of ln R of ``method`` over the profiles ``ids`` (ids or aliases)."""
    return max((get(pid.strip()).run_sigma(method) for pid in ids), default=0.0)


def register(profile: HostProfile) -> None:
    """Add a profile for this process (a candidate being scored by advisor.calibrate.host_infer)."""
    _REGISTERED[profile.id] = profile


def profiles() -> tuple[HostProfile, ...]:
    """The shipped profiles, the user's (load_user) and any registered in this process."""
    return _shipped() + tuple(_USER.values()) + tuple(_REGISTERED.values())


def read_rows(text: str, skipped: list[str] | None = None) -> list[HostProfile]:
    """Profiles of a host_profiles.csv text. With ``skipped`` a bad row (a NaN, infinite or negative cost, a field
    over the csv module's 128 KiB limit) is left out and named there; without it, the first one raises ValueError."""
    from advisor.predict.csv_rows import read_models

    return read_models(text, lambda row: HostProfile(**row), "host profiles", skipped)


def render_rows(rows: list[HostProfile]) -> str:
    """host_profiles.csv text of ``rows``."""
    import io

    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=FIELDS, lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow(r.model_dump())
    return buf.getvalue()


def use_user_profiles(rows: list[HostProfile]) -> None:
    """Make the user's probed profiles known to predictions in this process (the CLI edge reads the file)."""
    _USER.clear()
    _USER.update({r.id: r for r in rows})


@lru_cache(maxsize=1)
def _shipped() -> tuple[HostProfile, ...]:
    """calibration/host_profiles.csv."""
    from advisor.paths import data_path

    path = data_path("calibration") / PROFILES_FILE
    try:
        with path.open(newline="") as fh:
            return tuple(HostProfile(**row) for row in csv.DictReader(fh))
    except OSError as exc:
        raise DataError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except (TypeError, ValueError) as exc:
        raise DataError(f"{path}: invalid row: {exc}") from None


def get(name: str) -> HostProfile:
    """The profile called ``name`` (its id or an alias)."""
    for p in profiles():
        if name == p.id or name in p.aliases.split():
            return p
    raise DataError(f"calibration/{PROFILES_FILE} has no host profile {name!r}")


def spec_costs(name: str, method: Method = "suffix") -> tuple[float, float]:
    return get(name).costs(method)


def _norm(s: str | None) -> str:
    return (s or "").strip().lower()


def _line(version: str | None) -> str:
    """``0.26.0`` and ``0.26`` alike -> ``0.26`` (a vLLM line)."""
    return ".".join(_norm(version).split(".")[:2])


def _hosts() -> tuple[HostProfile, ...]:
    """The shipped profiles of hosts that stand in for a GPU (not the exact-only or reference measurements)."""
    return tuple(p for p in _shipped() if p.role == "host")


def _exact_only() -> tuple[HostProfile, ...]:
    """The shipped profiles matched only to their own host class (GPU, CPU model, vLLM line)."""
    return tuple(p for p in _shipped() if p.role == "exact")


def known() -> tuple[HostProfile, ...]:
    """The profiles that stand in for a host not matched exactly (their spread is its interval): the user's
    probed hosts first, then the shipped hosts (exact-only serving measurements are matched, never spread)."""
    return tuple(_USER.values()) + _hosts()


def listed() -> tuple[HostProfile, ...]:
    """Every profile a prediction may use: ``known()`` and the exact-only ones."""
    return tuple(_USER.values()) + _exact_only() + _hosts()


def match(gpu: str, cpu_model: str | None = None, vllm_version: str | None = None) -> HostMatch:
    """The profiles for a host: the one whose GPU, CPU model and vLLM version all match (the user's probed
    profiles first, then the exact-only serving measurements, then the hosts); else one of the same GPU and
    vLLM version; else one of the same GPU (CPU and vLLM unverified); else all. An ``exact`` profile never
    stands in for another CPU or vLLM line."""
    known = list(_USER.values()) + list(_hosts())
    same_gpu = [p for p in known if _norm(p.gpu) == _norm(gpu)]
    exact = [p for p in list(_USER.values()) + list(_exact_only()) + list(_hosts()) if _norm(p.gpu) == _norm(gpu)
             and cpu_model and _norm(p.cpu_model) == _norm(cpu_model)
             and vllm_version and _line(p.vllm_version) == _line(vllm_version)]  # fmt: skip
    if exact:
        return HostMatch(kind="exact", profiles=[exact[0].id], note=f"host profile {exact[0].id} ({exact[0].provenance.split(';')[0]})")
    same_v = [p for p in same_gpu if vllm_version and _line(p.vllm_version) == _line(vllm_version)]
    if same_v:
        return HostMatch(kind="gpu+vllm", profiles=[same_v[0].id],
                         note=f"host profile {same_v[0].id}: same GPU and vLLM, CPU not verified")  # fmt: skip
    if same_gpu:
        p = same_gpu[0]
        return HostMatch(kind="gpu", profiles=[p.id],
                         note=f"host profile {p.id} (the known {p.gpu} host: {p.cpu_model}, vLLM {p.vllm_version}); "
                              f"this host's CPU and vLLM are not verified, so the interval carries the spread "
                              f"of the known profiles; measure it: {PROBE_HINT}")  # fmt: skip
    ids = [p.id for p in _hosts()]
    return HostMatch(kind="none", profiles=ids,
                     note=f"no host profile for {gpu}: the prediction spans the known profiles ({', '.join(ids)}) "
                          f"and the interval their spread; measure this host: {PROBE_HINT}")  # fmt: skip
