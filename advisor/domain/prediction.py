"""What the K > R predictor says about one deployment (advisor.predict.api.predict returns it)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

HostState = Literal["OFF", "ON"]
"""Host DSA work-queue state a prediction is for."""


class Prediction(BaseModel):
    """What suffix decoding (K) is predicted to do against plain decoding for one deployment."""

    model_config = ConfigDict(extra="forbid")

    gain: float
    """Predicted suffix throughput / vanilla throughput (median)."""
    gain_low: float
    """Lower end of the 90 % interval."""
    gain_high: float
    """Upper end of the 90 % interval."""
    p_win: float = Field(ge=0, le=1)
    """Probability that suffix beats vanilla."""
    k_bar: float
    """Tokens emitted per verification step used (measured or prior)."""
    k_bar_source: str
    """``measured (…)`` or which prior row."""
    r: float
    """Step-cost ratio: verification step / plain decode step, from the physics model."""
    host_state: HostState | None
    """Host state predicted for; None = unknown (both states averaged, interval widened)."""
    draft_tokens: float
    """Mean drafted tokens per sequence per step assumed for R."""
    context_tokens: float
    """Mean KV context per sequence assumed for R."""
    spec_graph_mode: str
    """CUDA-graph mode vLLM runs the verification step in (piecewise / none)."""
    mla_prefill_ms: float
    """Milliseconds of the verification step spent on MLA's prefill-path fallback (0 if none)."""
    calibration_shift: float
    """Multiplicative correction the calibrated model applies to K̄ / R (exp δ)."""
    model_seen: bool
    """The model was measured in the calibration data (its own effect is used)."""
    r_seed_build: float | None = None
    """R with the seed build's ASSUMED suffix-step costs (the release R uses the MEASURED ones)."""
    build_spread: float = 0.0
    """Half the log-gain gap between the two builds' suffix-step costs, added to the interval: the
    measured costs (vLLM 0.26 on the H200 machine's CPU; async scheduling off with suffix) and the
    seed build's disagree, and which one a host sees depends on its vLLM and CPU."""
    explanation: list[str]
    """Which mechanisms drive R, where K̄ came from, and what is left to calibration."""
