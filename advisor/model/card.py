"""The catalog card (``catalog/models/ORG/NAME/card.yaml``) as a schema: where a config came from, what the
model card publishes, and, for drafters, which targets the drafter was trained for.

``advisor.model.source`` validates the ``drafter`` block of every card it reads (:class:`DrafterCard`); the whole
:class:`CatalogCard` is what the bundled catalog must satisfy (tests/test_catalog_data.py) -- user catalogs may
carry other keys.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

DrafterKind = Literal["eagle3", "eagle", "draft_model"]
"""How a drafter proposes tokens: an EAGLE-3 head (reads three target hidden states), an EAGLE-1/2 head (reads the
target's last hidden state), or an independent draft model (a causal LM of the target's vocabulary)."""

CardFamily = Literal["instruct", "reasoning", "reasoning-distill", "base", "drafter"]
"""``family`` of a card: the model families of ``advisor.model.schema.Family``, plus ``drafter`` for a head that
is no model to serve on its own (an EAGLE / EAGLE-3 head). A draft model that is also a model keeps its own family
and carries a ``drafter`` block."""


class DrafterCard(BaseModel):
    """The ``drafter:`` block of a card: what kind of drafter this is and which targets it was trained for."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: DrafterKind
    """eagle3 | eagle | draft_model."""
    target: tuple[str, ...] = Field(min_length=1)
    """Hugging Face ids of the target models this drafter was trained for (or, for a draft model, is paired with)."""
    source: str = Field(min_length=1)
    """Where the pairing is stated (the head's config, its model card, a vLLM test or recipe)."""


class PublishedFigures(BaseModel):
    """The ``published:`` block: the parameter count the model card (or the hub) states, with its quote."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    params_total_b: float = Field(gt=0)
    """Total parameters, billions, as published."""
    params_active_b: float | None = Field(default=None, gt=0)
    """Activated parameters, billions (MoE cards that state one), else null."""
    active_counting: Literal["excl_input_embedding", "incl_embeddings", "excl_embeddings_and_head"] | None = None
    """What the published active count includes (tests/test_profile.py reads it)."""
    rounding_b: float | None = Field(default=None, ge=0)
    """Rounding of the published figure, billions, when the card rounds coarsely."""
    source: str = Field(min_length=1)
    """Quote or citation for the figure."""


class CatalogCard(BaseModel):
    """One bundled ``card.yaml``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=3, pattern=r"^[^/\s]+/[^/\s]+$")
    """ORG/NAME; equals the directory path."""
    config_source: str = Field(pattern=r"^https://")
    """Where config.json was copied from."""
    card: str = Field(pattern=r"^https://")
    """The model card's address."""
    family: CardFamily
    """See :data:`CardFamily`."""
    published: PublishedFigures | None = None
    """Published parameter figures; required for every family but ``drafter`` (heads rarely publish one)."""
    drafter: DrafterCard | None = None
    """Present on drafters: EAGLE heads (family ``drafter``) and models that double as draft models."""
    notes: str = Field(min_length=1)
    """Provenance of the config copy: verbatim or not, from where, what is unverified."""

    @model_validator(mode="after")
    def _family_rules(self) -> CatalogCard:
        if self.family != "drafter" and self.published is None:
            raise ValueError(f"{self.id}: family {self.family} needs a published: block (params_total_b and its source)")
        if self.family == "drafter" and (self.drafter is None or self.drafter.kind == "draft_model"):
            raise ValueError(f"{self.id}: family drafter is for EAGLE heads and needs drafter: {{kind: eagle3|eagle, ...}}; "
                             "a draft model keeps its model family and adds a drafter: block")  # fmt: skip
        return self
