"""The probe campaign that would settle an unsure recommendation (advisor.plan.probe_plan builds it)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict


class ProbePlan(BaseModel):
    """One probe campaign that would settle an unsure recommendation."""

    model_config = ConfigDict(extra="forbid")

    reason: str
    why_kind: Literal["p_win_band", "fitted_terms"] = "p_win_band"
    """What makes the prediction unsure (typed: logic reads this, never ``reason``): P(win) inside the policy's band,
    or a gain the fitted terms move beyond the policy's limit."""
    model: str
    corpus: str
    """A prompt file or a built-in probe corpus."""
    corpus_note: str | None = None
    """Set when the probe cannot run on the user's own traffic."""
    configs: str
    """``--configs`` value: vanilla and suffix at the recommended K."""
    tensor_parallel_size: int
    gpu_memory_utilization: float
    max_model_len: int
    concurrency: int
    passes: int = 1
    """Fresh boots of each configuration (``--repeat``): 3 where this host class's measured run-to-run spread of
    R is larger than the predicted margin |ln gain|, so that one boot's noise does not decide it; else 1."""
    argv: list[str]
    """``advisor probe …`` as an argument vector."""
    command: str
    """The same, shell-quoted for copy and paste."""
