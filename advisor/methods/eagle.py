"""EAGLE (1/2): a one-layer head over the target's last hidden state (vLLM ``method="eagle"``). Priced as EAGLE-3
(advisor.methods.eagle3.DrafterMethod)."""

from __future__ import annotations

from advisor.methods.eagle3 import DrafterMethod


class Eagle(DrafterMethod):
    id = "eagle"
    title = "EAGLE"
    order = 6
    kinds = ("eagle",)


METHOD = Eagle()
