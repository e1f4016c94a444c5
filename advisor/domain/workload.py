"""The traffic a recommendation is for."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

class Workload(BaseModel):
    """What the server will see."""

    model_config = ConfigDict(extra="forbid")

    corpus: str | None = None
    """A known corpus name (advisor.domain.corpora.KNOWN_CORPORA), a trace file path, or None (unknown traffic)."""
    corpus_is_file: bool = False
    """True when ``corpus`` names a trace file the user gave."""
    concurrency: int = Field(default=32, ge=1)
    """Requests in flight."""
    k_bar: float | None = Field(default=None, gt=0)
    """Measured tokens per step with suffix decoding (from ``advisor kbar`` or probes), if known."""
    k_bar_source: str | None = None
    """Where ``k_bar`` came from."""
    notes: list[str] = Field(default_factory=list)
    """What was substituted or assumed while measuring the traffic (e.g. the tokenizer)."""
    k_bar_k: int | None = Field(default=None, ge=1)
    """num_speculative_tokens ``k_bar`` was measured at (None: at the K predicted for)."""
    k_bar_own_outputs: bool = False
    """True: ``k_bar`` (and ``k_bar_ngram``) replayed the model's own outputs (a generation file,
    e.g. ``advisor probe --save-responses``), not reference responses someone else wrote."""
    k_bar_ngram: float | None = Field(default=None, gt=0)
    """Tokens per step of n-gram (vLLM's prompt lookup) replayed offline on the same file, if measured."""
    k_bar_ngram_k: int | None = Field(default=None, ge=1)
    """K ``k_bar_ngram`` was measured at."""
    k_bar_ngram_source: str | None = None
    """Where ``k_bar_ngram`` came from (K, lookup window, requests)."""
