"""vLLM's Prometheus counters before and after a load, and what follows from their difference.

Names as vLLM 0.32 exports them (vllm/v1/metrics/loggers.py, vllm/v1/spec_decode/metrics.py):
``vllm:generation_tokens_total`` and ``vllm:spec_decode_num_{drafts,draft_tokens,accepted_tokens}_total``
plus ``vllm:spec_decode_num_accepted_tokens_per_pos_total{position="i"}``. Samples are summed over
their other labels (engine, model_name), so data-parallel engines add up.

Derived, over the window between two scrapes:
- throughput = Δgeneration_tokens / window seconds;
- mean acceptance length = 1 + Δaccepted / Δdrafts (vLLM's own figure; steps with an empty draft
  are not counted);
- tokens per step = Δgeneration_tokens / (Δgeneration_tokens − Δaccepted): each step of a sequence
  emits one verified token plus its accepted draft tokens, so this counts every step, empty drafts
  included; it is the K̄ that throughput sees;
- implied R = tokens_per_step / gain with gain = throughput / vanilla throughput of the same campaign.
"""

from __future__ import annotations

import math
from collections import defaultdict

from pydantic import BaseModel, ConfigDict, Field

from advisor.errors import ProbeError

GENERATION = "vllm:generation_tokens_total"
DRAFTS = "vllm:spec_decode_num_drafts_total"
DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens_total"
ACCEPTED = "vllm:spec_decode_num_accepted_tokens_total"
ACCEPTED_PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
COUNTERS = (GENERATION, DRAFTS, DRAFT_TOKENS, ACCEPTED)


class Snapshot(BaseModel):
    """The counters of one scrape (summed over engines)."""

    model_config = ConfigDict(extra="forbid")

    at: float = 0.0
    """time.monotonic() of the scrape."""
    counters: dict[str, float] = Field(default_factory=dict)
    accepted_per_pos: dict[int, float] = Field(default_factory=dict)


class Window(BaseModel):
    """Counter differences between two snapshots and the figures derived from them."""

    model_config = ConfigDict(extra="forbid")

    seconds: float
    generation_tokens: float
    drafts: float | None
    draft_tokens: float | None
    accepted_tokens: float | None
    accepted_per_pos: list[float] = Field(default_factory=list)

    @property
    def throughput(self) -> float | None:
        return self.generation_tokens / self.seconds if self.seconds > 0 else None

    @property
    def mean_acceptance_length(self) -> float | None:
        if not self.drafts:
            return None
        return 1.0 + (self.accepted_tokens or 0.0) / self.drafts

    @property
    def tokens_per_step(self) -> float | None:
        if self.generation_tokens <= 0:
            return None
        steps = self.generation_tokens - (self.accepted_tokens or 0.0)
        return self.generation_tokens / steps if steps > 0 else None

    @property
    def acceptance_per_position(self) -> list[float] | None:
        """Fraction of drafts whose token at position i was accepted."""
        if not self.drafts or not self.accepted_per_pos:
            return None
        return [round(a / self.drafts, 6) for a in self.accepted_per_pos]


def parse(text: str, at: float = 0.0) -> Snapshot:
    """Parse Prometheus exposition text (``/metrics``) into a :class:`Snapshot`."""
    from prometheus_client.parser import text_string_to_metric_families

    counters: dict[str, float] = defaultdict(float)
    per_pos: dict[int, float] = defaultdict(float)
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name in COUNTERS or sample.name == ACCEPTED_PER_POS:
                    if not math.isfinite(sample.value) or sample.value < 0:
                        raise ProbeError(f"/metrics: {sample.name} is {sample.value!r}, not a count; "
                                         "this configuration is recorded as unmeasurable")  # fmt: skip
                if sample.name in COUNTERS:
                    counters[sample.name] += sample.value
                elif sample.name == ACCEPTED_PER_POS and "position" in sample.labels:
                    per_pos[int(sample.labels["position"])] += sample.value
    except ValueError as exc:
        from advisor.errors import printable

        raise ProbeError(f"unreadable /metrics text: {printable(str(exc)[:300], keep_newlines=False)}") from None
    return Snapshot(at=at, counters=dict(counters), accepted_per_pos=dict(per_pos))


MAX_METRICS_BYTES = 16 * 2**20
"""A vLLM /metrics page is tens of kB (a few hundred kB with many LoRA/model labels); more is not vLLM's."""
SCRAPE_TIMEOUT_S = 20.0
"""The whole scrape, connect to last byte (httpx's own timeouts are per read: a trickle never ends)."""


def scrape(base_url: str, timeout_s: float | None = None, max_bytes: int | None = None) -> Snapshot:
    """GET ``base_url``/metrics and parse it: at most ``max_bytes`` (MAX_METRICS_BYTES), within
    ``timeout_s`` (SCRAPE_TIMEOUT_S) in all."""
    import time

    import httpx

    from advisor.errors import printable

    timeout_s = SCRAPE_TIMEOUT_S if timeout_s is None else timeout_s
    max_bytes = MAX_METRICS_BYTES if max_bytes is None else max_bytes
    end = time.monotonic() + timeout_s
    body = bytearray()
    try:
        with httpx.Client(timeout=timeout_s, trust_env=False) as client:
            with client.stream("GET", f"{base_url}/metrics") as resp:
                resp.raise_for_status()
                for piece in resp.iter_bytes():  # as each piece arrives (a chunk size would wait to fill it)
                    body += piece
                    if len(body) > max_bytes:
                        raise ProbeError(f"{base_url}/metrics is larger than {max_bytes // 2**20} MiB: not a vLLM metrics page")
                    if time.monotonic() > end:
                        raise ProbeError(f"{base_url}/metrics took over {timeout_s:g} s to read")
    except httpx.HTTPError as exc:
        raise ProbeError(f"cannot read {base_url}/metrics: {printable(exc, keep_newlines=False)}") from None
    return parse(body.decode("utf-8", "replace"), at=time.monotonic())


def window(before: Snapshot, after: Snapshot, seconds: float | None = None) -> Window:
    """Differences ``after - before``; ``seconds`` defaults to the time between the scrapes."""
    if GENERATION not in after.counters:
        raise ProbeError(f"/metrics has no {GENERATION}: is this a vLLM server?")

    def delta(name: str) -> float | None:
        if name not in after.counters:
            return None
        return after.counters[name] - before.counters.get(name, 0.0)

    positions = sorted(after.accepted_per_pos)
    return Window(
        seconds=after.at - before.at if seconds is None else seconds,
        generation_tokens=delta(GENERATION) or 0.0,
        drafts=delta(DRAFTS),
        draft_tokens=delta(DRAFT_TOKENS),
        accepted_tokens=delta(ACCEPTED),
        accepted_per_pos=[after.accepted_per_pos[p] - before.accepted_per_pos.get(p, 0.0) for p in positions],
    )


def implied_r(tokens_per_step: float | None, throughput: float | None, vanilla_throughput: float | None) -> float | None:
    """R = K̄ / gain: the cost of a speculative step in plain steps, as the measurement implies it."""
    if not tokens_per_step or not throughput or not vanilla_throughput:
        return None
    gain = throughput / vanilla_throughput
    return tokens_per_step / gain
