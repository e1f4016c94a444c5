"""Base for host-fingerprint models whose computed fields go out in JSON and are ignored coming back."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, model_validator


class DerivedModel(BaseModel):
    """Strict (``extra="forbid"``) model that accepts its own dumps.

    ``@computed_field`` values are written by ``model_dump``; reading such a dump back would trip
    ``extra="forbid"``, so they are dropped before validation and recomputed from the fields.
    """

    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _drop_computed(cls, data: Any) -> Any:
        if isinstance(data, dict):
            derived = set(cls.model_computed_fields)
            if derived & data.keys():
                return {k: v for k, v in data.items() if k not in derived}
        return data
