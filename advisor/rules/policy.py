"""The decider's policy table: P(win) bands and the defaults no rule sets (rules/policy/decider.yaml).

One table, read once: :func:`advisor.plan.choose.choose` and the layout search take every threshold
and default from it. vLLM's own defaults are not here (advisor.vllm_facts)."""

from __future__ import annotations

from functools import lru_cache
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from advisor.errors import DataError

Count = Annotated[int, Field(ge=1)]
"""A positive whole number: a K, a sequence or token count, a TP size."""


def _ordered(name: str, values: tuple, *, ascending: bool) -> None:
    """A search grid or ladder is tried in its written order: strictly ascending or descending, as its field says."""
    pairs = list(zip(values, values[1:]))
    if not all((a < b) if ascending else (a > b) for a, b in pairs):
        raise ValueError(f"{name}: need strictly {'ascending' if ascending else 'descending'} values, got {list(values)}")


class Bands(BaseModel):
    """P(suffix wins) thresholds per rules policy."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    flip_off_below: float = Field(ge=0, le=1)
    """Lower edge of the band where a suffix prediction is unsure (the probe that settles it is printed)."""
    flip_on_above: float = Field(ge=0, le=1)
    """Upper edge of that band."""
    open_at: float = Field(ge=0, le=1)
    """The even odds inside the band (kept ordered between its edges; no decision reads it since issue 39)."""

    @model_validator(mode="after")
    def _ordered(self) -> "Bands":
        if not self.flip_off_below <= self.open_at <= self.flip_on_above:
            raise ValueError("need flip_off_below <= open_at <= flip_on_above")
        return self

    def unsure(self, p_win: float) -> bool:
        """Inside the band where the prediction does not decide on its own (probe it)."""
        return self.flip_off_below <= p_win <= self.flip_on_above


class Policy(BaseModel):
    """rules/policy/decider.yaml."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    p_win: Bands
    fitted_factor_within: float = Field(gt=0, le=2)
    """|ln fitted_factor| up to which a suffix prediction decides without a probe plan (beyond: unsure)."""
    num_speculative_tokens: int = Field(ge=1, le=64)
    """Suffix K when neither --k nor a rule sets it: the one K default, which every other default of K reads
    (advisor.kbar, advisor.probe.configs, advisor.predict.api; tests/test_k_default.py greps for a second one)."""
    ngram_num_speculative_tokens: int = Field(ge=1, le=64)
    """n-gram K when neither --ngram-k nor a probe label sets it (vLLM has no default for it): the layout search, the
    probe's bare ``ngram`` and ``advisor kbar --method ngram`` read it (advisor.kbar.ngram.default_k)."""
    probe_default_k: dict[Literal["mtp", "eagle3", "eagle", "draft_model"], Annotated[int, Field(ge=1, le=16)]]
    """K of a probe configuration written without one (``advisor probe --configs mtp,eagle3@draft=...``), per method
    whose K is not one of the two above (advisor.probe.configs.default_k)."""
    suffix_k_fallback: tuple[Count, ...] = Field(max_length=8)
    """Lower suffix K the layout search tries, in this order, where the rules' K does not boot (without --k):
    the values below the rules' K (advisor.methods.suffix)."""
    suffix_full_k_fallback: tuple[Count, ...] = Field(max_length=8)
    """Lower suffix K the layout search tries, in this order, below the line's default K on a vLLM line whose suffix
    speculator verifies all K every step (``VllmFacts.suffix_drafts_full_k``; advisor.methods.suffix)."""
    drafter_k_grid: tuple[Annotated[int, Field(ge=1, le=16)], ...] = Field(min_length=1, max_length=16)
    """num_speculative_tokens searched for a drafter method (EAGLE-3, EAGLE, draft model), ascending, where
    ``--draft-k`` does not fix it (advisor.methods.eagle3)."""
    drafter_ks_scored: Count
    """Ks of a drafter method scored in full per layout: the best this many of ``drafter_k_grid`` at the offered
    load per replica (advisor.plan.layout._drafter_ks)."""
    seqs_caps: tuple[Count, ...] = Field(min_length=1, max_length=16)
    """max_num_seqs caps the layout search tries, in this order, for a latency objective or a TPOT limit at a
    fixed load, and for the last suffix K where it does not boot at vLLM's default batch (advisor.plan.layout)."""
    boot_k_ladder: tuple[Count, ...] = Field(max_length=16)
    """The nearest configuration that boots (advisor.plan.memory.nearest_bootable), first move: lower K values
    tried, in this order (those below the current K), suffix kept."""
    boot_seqs_ladder: tuple[Count, ...] = Field(max_length=16)
    """Its second move: lower max_num_seqs values tried, in this order (below the current or vLLM's default)."""
    boot_gmu_ladder: tuple[Annotated[float, Field(gt=0, lt=1)], ...] = Field(max_length=16)
    """Its third move: higher gpu_memory_utilization values tried, in this order (above the current, at most
    ``boot_max_gmu``)."""
    boot_max_gmu: float = Field(gt=0, lt=1)
    """Highest gpu_memory_utilization the nearest-bootable search proposes."""
    boot_len_ladder: tuple[Count, ...] = Field(max_length=16)
    """Its fourth move: lower max_model_len values tried, in this order (below the current)."""
    tp_ladder: tuple[Count, ...] = Field(min_length=1, max_length=16)
    """Tensor-parallel sizes, ascending, for the minimum GPU count that holds the weights and the nearest-bootable
    search's fifth move (higher TP, up to the host's GPUs); the largest bounds both ("not within N GPUs")."""
    seqs_grid: tuple[Count, ...] = Field(min_length=1, max_length=64)
    """max_num_seqs values the operating-point search predicts, ascending (advisor.plan.operating_point.grid: up to
    the per-replica load or the KV cache's slots); its largest also bounds the K-by-batch-size schedule."""
    batched_tokens_grid: tuple[Count, ...] = Field(min_length=1, max_length=16)
    """max_num_batched_tokens values the operating-point search predicts, ascending (those below max_num_seqs are
    skipped: vLLM requires max_num_batched_tokens >= max_num_seqs)."""
    suffix_max_running: Count
    """The suffix load cut-off: most running sequences per replica at which suffix decoding is searched without a
    probe on this host (advisor.plan.operating_point.suffix_load_guard); above it its gain is extrapolated."""
    probe_repeat_passes: int = Field(ge=2, le=10)
    """Boots of each configuration a probe plan asks for (``advisor probe --repeat``, at most 10) where the host
    class's measured run-to-run noise of R exceeds the predicted margin (advisor.plan.probe_plan)."""
    p_win_cap_unchecked: float = Field(gt=0.5, le=1)
    """Highest P(win) printed for a class whose R was never checked out of sample, or is biased beyond
    ``class_bias_goal`` there (advisor.predict.class_accuracy)."""
    class_bias_goal: float = Field(gt=0, le=1)
    """|R_pred / R_meas - 1| held out by model beyond which a class's bias widens its gain interval."""
    sources: dict[str, str]
    """Where each value comes from and what it means: one entry per field above, no other."""

    @model_validator(mode="after")
    def _grids_and_sources(self) -> "Policy":
        _ordered("suffix_k_fallback", self.suffix_k_fallback, ascending=False)
        _ordered("seqs_caps", self.seqs_caps, ascending=False)
        _ordered("suffix_full_k_fallback", self.suffix_full_k_fallback, ascending=False)
        _ordered("drafter_k_grid", self.drafter_k_grid, ascending=True)
        _ordered("seqs_grid", self.seqs_grid, ascending=True)
        _ordered("boot_k_ladder", self.boot_k_ladder, ascending=False)
        _ordered("boot_seqs_ladder", self.boot_seqs_ladder, ascending=False)
        _ordered("boot_gmu_ladder", self.boot_gmu_ladder, ascending=True)
        _ordered("boot_len_ladder", self.boot_len_ladder, ascending=False)
        _ordered("tp_ladder", self.tp_ladder, ascending=True)
        _ordered("batched_tokens_grid", self.batched_tokens_grid, ascending=True)
        if missing_k := sorted({"mtp", "eagle3", "eagle", "draft_model"} - self.probe_default_k.keys()):
            raise ValueError(f"probe_default_k: no K for {', '.join(missing_k)}")
        fields = set(type(self).model_fields) - {"sources"}
        if missing := sorted(fields - self.sources.keys()):
            raise ValueError(f"sources: no entry for {', '.join(missing)}")
        if extra := sorted(self.sources.keys() - fields):
            raise ValueError(f"sources: {', '.join(extra)} is not a policy value")
        return self


@lru_cache(maxsize=1)
def load_policy() -> Policy:
    """The bundled policy table (a DataError naming the file when it is malformed)."""
    from pydantic import ValidationError

    from advisor.paths import data_path
    from advisor.yamlfast import safe_load

    path = data_path("rules") / "policy" / "decider.yaml"
    try:
        return Policy.model_validate(safe_load(path.read_text(encoding="utf-8")))
    except ValidationError as exc:
        err = exc.errors()[0]
        raise DataError(f"policy file {path}: {'.'.join(map(str, err['loc']))}: {err['msg']}") from None
    except Exception as exc:  # noqa: BLE001 - unreadable or not YAML: one message naming the file
        raise DataError(f"policy file {path}: cannot read: {exc}") from None
