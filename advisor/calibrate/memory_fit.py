"""Calibration of the one fitted speculative-decoding constant against the seed boot outcomes (pure).

``SPEC_BYTES_PER_LAYER_HIDDEN`` (memory_terms) multiplies ``max_num_seqs x K x layers x hidden``.
A model that booted bounds it from above (its KV cache must keep one max-length request); a model
that did not boot bounds it from below (no block left). :func:`bracket` returns the interval the
seed facts allow; ``python -m advisor.calibrate.memory_cli --calibration`` prints it.
"""

from __future__ import annotations

from dataclasses import dataclass

from advisor.hardware.gpus import GpuSpec
from advisor.model.schema import ModelProfile
from advisor.plan import memory_terms as t
from advisor.domain.decision import Decision


@dataclass(frozen=True)
class Bound:
    """What one observed outcome says about the fitted constant (bytes)."""

    model: str
    booted: bool
    room_gib: float
    """Memory left per GPU before the fitted term (after one max-length request for a model that booted)."""
    unit_gib: float
    """The fitted term per byte of the constant: max_num_seqs x K x layers x hidden, GiB."""
    bound: float
    """Upper bound (booted) or lower bound (did not boot) on the constant, bytes."""


HYPOTHESES = {
    "layers_x_hidden": "max_num_seqs x K x layers x hidden (the fitted term used)",
    "logits_vocab": "max_num_seqs x (K+1) x vocab (verification logits; rejected: contradicts the seed)",
}
"""Shapes of a K-dependent start-up term that the calibration can test against the seed outcomes."""


def _unit(profile: ModelProfile, decision: Decision, seqs: int, hypothesis: str) -> float:
    k = decision.num_speculative_tokens or 0
    if hypothesis == "logits_vocab":
        return seqs * (k + 1) * t.padded_vocab(profile)
    return seqs * k * profile.num_layers * profile.hidden_size


def bound(profile: ModelProfile, gpu: GpuSpec, decision: Decision, booted: bool, hypothesis: str = "layers_x_hidden") -> Bound:
    """The bound one outcome puts on the bytes-per-unit constant of ``hypothesis``."""
    from advisor.plan.memory import _core  # the same arithmetic plan_memory uses

    c = _core(profile, gpu, decision, t.DEFAULT_BLOCK_SIZE, t.SEED_BUILD)
    unit = _unit(profile, decision, c["seqs"], hypothesis)
    before = c["avail"] + c["spec_fit"]
    room = before - c["block_bytes"] - (c["need"] if booted else 0)
    return Bound(model=profile.id, booted=booted, room_gib=round(room / t.GiB, 2), unit_gib=round(unit / t.GiB, 2),
                 bound=round(room / unit, 3) if unit else float("inf"))


def bracket(bounds: list[Bound]) -> tuple[float, float]:
    """(lowest value that fails every non-booting case, highest that keeps every booting case)."""
    lo = max((b.bound for b in bounds if not b.booted), default=0.0)
    hi = min((b.bound for b in bounds if b.booted), default=float("inf"))
    return lo, hi
