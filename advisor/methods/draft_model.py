"""A draft model: a smaller model of the target's family and vocabulary drafting a chain of K tokens with all its
layers (vLLM ``method="draft_model"``, the draft model as ``model``). Priced as EAGLE-3 is
(advisor.methods.eagle3.DrafterMethod): its own acceptance, its forwards on the step-cost physics, its weights and
KV in the plan."""

from __future__ import annotations

from advisor.methods.eagle3 import DrafterMethod


class DraftModel(DrafterMethod):
    id = "draft_model"
    title = "draft model"
    order = 5
    kinds = ("draft_model",)


METHOD = DraftModel()
