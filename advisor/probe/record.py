"""ProbeRecord: one measured configuration on one host. The store keeps these; calibration reads them."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from advisor.model.source import MAX_MODEL_CHARS


MAX_TOK_S = 1e8
"""Output tokens per second no server reaches (a fleet of B200s does ~1e6): larger is a corrupt value."""
MAX_TOKENS_PER_STEP = 65.0
"""1 + the largest K (64): no step emits more."""
_CONFIG_LABEL = re.compile(r"(?:vanilla|(?P<method>suffix|ngram|ngram_gpu|mtp|eagle3|eagle|draft_model):(?P<k>[1-9][0-9]?))"
                           r"(?:@[a-z_]{1,40}=[^@,\x00-\x1f\x7f]{0,400})*")
"""The labels advisor.probe.configs writes (``ProbeConfig.label``): ``vanilla`` or ``METHOD:K`` (K 1..64), then
``@KEY=VALUE`` overrides. Every reader of ``config`` (the fit, host profiles, evaluations) parses K from it."""
MAX_CONCURRENCY = 1_000_000
"""Requests in flight no load runs (advisor.probe.load.LoadSpec shares it); a larger value is a corrupt row."""
_SLACK = 1e-6
"""Relative slack for the physical bounds below (float counters)."""


def config_k(label: str) -> int | None:
    """K of a configuration label that :data:`_CONFIG_LABEL` accepts; None for ``vanilla``."""
    m = _CONFIG_LABEL.fullmatch(label)
    return int(m["k"]) if m and m["k"] else None


class ProbeRecord(BaseModel):
    """One probe of one configuration. Fields are the store's columns and the calibration's inputs."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    campaign_id: str
    """Groups the configurations probed together (same host, model, corpus, concurrency)."""
    model: str
    """Model id or path as probed."""
    config: str
    """``vanilla``, ``suffix:K`` or ``ngram:K``, optionally with per-configuration overrides sorted by key,
    e.g. ``suffix:32@gmu=0.8`` (advisor.probe.configs); read K from ``num_speculative_tokens``."""
    outcome: Literal["ok", "boot_failed", "crashed", "timeout", "error"]
    """What happened; only ``ok`` rows carry throughput."""
    failure: str | None = None
    """Recognised failure (e.g. ``no_kv_blocks``, ``max_seq_len_too_long``, ``cuda_oom``) and its log line."""
    gpu: str | None = None
    """Short GPU name (B200, H200, …) or None on CPU."""
    gpus: int = Field(default=0, ge=0, le=4096)
    tensor_parallel_size: int = Field(default=1, ge=1, le=4096)
    corpus: str
    """Corpus name or file path the load came from."""
    concurrency: int = Field(ge=1, le=MAX_CONCURRENCY)
    duration_s: float = Field(default=0.0, ge=0)
    requests: int = Field(default=0, ge=0)
    output_tokens: int = Field(default=0, ge=0)
    throughput_tok_s: float | None = Field(default=None, ge=0, le=MAX_TOK_S)
    """Output tokens per second over the measured window."""
    mean_acceptance_length: float | None = Field(default=None, ge=1, le=MAX_TOKENS_PER_STEP)
    """1 + accepted/drafts, as vLLM reports it (spec configs only)."""
    tokens_per_step: float | None = Field(default=None, gt=0, le=MAX_TOKENS_PER_STEP)
    """Output tokens per engine step over all steps (K̄ for the predictor)."""
    implied_r: float | None = Field(default=None, gt=0, le=1e3)
    """tokens_per_step / gain against the campaign's vanilla run."""
    ttft_ms_p50: float | None = Field(default=None, ge=0)
    ttft_ms_p99: float | None = Field(default=None, ge=0)
    itl_ms_p50: float | None = Field(default=None, ge=0)
    itl_ms_p99: float | None = Field(default=None, ge=0)
    mean_in_flight: float | None = Field(default=None, ge=0, le=1e6)
    """Requests in flight on average over the load (``advisor.probe.load.mean_in_flight``, Little's law);
    below ``concurrency`` by the last wave's ramp-down. None in records older than it."""
    engine_cpu_busy: float | None = Field(default=None, ge=0, le=4096)
    """CPU seconds of the server's busiest process over the load's seconds (``advisor.probe.hostcpu``; 1.0 is one
    core). At 0.9 or more on a GPU host the steps are bound by the host CPU. None off Linux and in older records."""
    client_cpu_busy: float | None = Field(default=None, ge=0, le=4096)
    """The same for the load client (this process): at 0.8 or more it may limit the throughput it measures."""
    host_loop_ms: float | None = Field(default=None, gt=0, le=1e6)
    """Median time of a fixed loop (``hostcpu.LOOP_N`` additions) timed by a separate process during the load: the
    host's single-thread speed at the time (the H200 VM's moved x1.5-2 within seconds, campaign 5)."""
    host_loop_cpu_ms: float | None = Field(default=None, gt=0, le=1e6)
    """The CPU time of the same loops: ``host_loop_ms`` above it means the loop waited for a core."""
    command: list[str] = Field(default_factory=list)
    """The exact argv of the server."""
    vllm_version: str | None = None
    host_fingerprint: str | None = None
    """HostFingerprint.fingerprint of the host the probe ran on."""
    host: dict | None = None
    """The full host fingerprint object (for diffs)."""
    boot_s: float | None = Field(default=None, ge=0)
    started_at: str
    """ISO-8601 UTC."""
    # --- added by the probe campaign (advisor.probe.campaign); all optional -------------------
    speculative_method: str | None = None
    """``suffix``, ``ngram`` or None for vanilla."""
    num_speculative_tokens: int | None = Field(default=None, ge=1, le=64)
    """K of the configuration."""
    gpu_memory_utilization: float | None = Field(default=None, gt=0, le=1)
    max_model_len: int | None = Field(default=None, ge=1)
    max_tokens: int | None = Field(default=None, ge=1)
    """``max_tokens`` of each load request."""
    requests_failed: int = Field(default=0, ge=0)
    spec_drafts: int | None = Field(default=None, ge=0)
    """Δ ``vllm:spec_decode_num_drafts_total`` over the window."""
    spec_draft_tokens: int | None = Field(default=None, ge=0)
    spec_accepted_tokens: int | None = Field(default=None, ge=0)
    acceptance_per_position: list[float] | None = None
    """Accepted tokens at draft position i / drafts."""
    log_path: str | None = None
    """The server's log for this probe."""
    corpus_exhausted: bool = False
    """Every prompt of the corpus was sent before the time budget ran out: the window is one pass
    over the corpus, shorter than ``--duration`` (ship more prompts for a full window)."""
    weights: Literal["real", "dummy"] = "real"
    """``dummy``: the server ran with ``--load-format dummy`` (random weights, e.g. on a GPU machine
    without the checkpoint). Such a run measures step cost, memory and boot time, not the K̄ of real
    traffic (dummy outputs repeat, so suffix accepts almost every draft): the predictor never
    learns K̄ or gain from it (advisor.predict.dataset.probe_observations skips it)."""


    @field_validator("config")
    @classmethod
    def _label(cls, value: str) -> str:
        """A label the fit can parse (``suffix:x``, ``suffix:0``, ``mtp:-5`` are refused: every reader takes K from it)."""
        if not _CONFIG_LABEL.fullmatch(value) or not 1 <= (config_k(value) or 1) <= 64:
            raise ValueError("not a probe configuration label (vanilla, or suffix|ngram|ngram_gpu|mtp:K with K 1..64, "
                             "then @key=value overrides)")
        return value

    @field_validator("model")
    @classmethod
    def _model(cls, value: str) -> str:
        """A model id or path the fit can look up: not empty, at most MAX_MODEL_CHARS, no control characters."""
        if not value.strip() or len(value) > MAX_MODEL_CHARS or re.search(r"[\x00-\x1f\x7f]", value):
            raise ValueError(f"not a model id or path (empty, over {MAX_MODEL_CHARS} characters, or with control characters)")
        return value

    @model_validator(mode="after")
    def _physical(self) -> "ProbeRecord":
        """What no server can have measured (a lying or corrupted ``/metrics``, an edited row): refused, so the probe
        records it as an error (advisor.probe.campaign.measured_record) and readers skip the row with this reason.
        Each step of a sequence emits one verified token plus at most K accepted draft tokens, so K̄ lies in [1, 1+K]
        (vanilla: 1); a draft holds at most K tokens and no more are accepted than were drafted; the server cannot
        have generated more tokens than its requests asked for (finished, failed, and one wave cut at the deadline)."""
        k = config_k(self.config)
        top = 1.0 + (k or 0)
        if k is not None and self.num_speculative_tokens is not None and self.num_speculative_tokens != k:
            raise ValueError(f"num_speculative_tokens {self.num_speculative_tokens} differs from the K of {self.config}")
        if self.tokens_per_step is not None and not 1.0 - _SLACK <= self.tokens_per_step <= top * (1 + _SLACK):
            raise ValueError(f"tokens_per_step {self.tokens_per_step:g} outside [1, {top:g}] (1 + K) for {self.config}")
        if self.mean_acceptance_length is not None and self.mean_acceptance_length > top * (1 + _SLACK):
            raise ValueError(f"mean_acceptance_length {self.mean_acceptance_length:g} above 1 + K = {top:g} for {self.config}")
        if self.spec_accepted_tokens is not None and self.spec_draft_tokens is not None \
                and self.spec_accepted_tokens > self.spec_draft_tokens:
            raise ValueError(f"spec_accepted_tokens {self.spec_accepted_tokens} exceed spec_draft_tokens {self.spec_draft_tokens}")
        if k is not None and self.spec_draft_tokens is not None and self.spec_drafts is not None \
                and self.spec_draft_tokens > k * self.spec_drafts:
            raise ValueError(f"spec_draft_tokens {self.spec_draft_tokens} exceed K x spec_drafts = {k} x {self.spec_drafts}")
        per_pos = self.acceptance_per_position or []
        if any(not 0.0 <= a <= 1.0 + _SLACK for a in per_pos):  # a position's token is accepted at most once per draft
            raise ValueError(f"acceptance_per_position must hold fractions in [0, 1] for {self.config}")
        if self.max_tokens and self.output_tokens > (self.requests + self.requests_failed + self.concurrency) * self.max_tokens:
            raise ValueError(f"output_tokens {self.output_tokens} exceed what {self.requests + self.requests_failed} "
                             f"requests and one wave of {self.concurrency} at max_tokens {self.max_tokens} can generate")
        # throughput = tokens / seconds of the window; duration_s is that window rounded to the millisecond
        if self.throughput_tok_s and self.duration_s and self.output_tokens and abs(
                self.throughput_tok_s * self.duration_s - self.output_tokens) > 0.1 * self.output_tokens + \
                self.throughput_tok_s * 0.0005 + 1:  # fmt: skip
            raise ValueError(f"throughput_tok_s {self.throughput_tok_s:g} disagrees with output_tokens / duration_s "
                             f"= {self.output_tokens} / {self.duration_s:g}")
        return self

    @field_validator("failure", "vllm_version")
    @classmethod
    def _inert(cls, value: str | None) -> str | None:
        """Text a server wrote (its log, /metrics, /version): stored and shown without terminal
        escapes or bidi controls (advisor.errors.printable)."""
        from advisor.errors import printable

        return None if value is None else printable(value, keep_newlines=False)

    @property
    def in_flight(self) -> float:
        """The batch the load's steps ran at: ``mean_in_flight`` where recorded, else the nominal ``concurrency``."""
        return self.mean_in_flight or float(self.concurrency)
