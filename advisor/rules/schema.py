"""Rule schema. Every rule is validated with ``extra="forbid"``; a bad file fails loudly at load."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

OPERATORS = ("eq", "ne", "in", "not_in", "gt", "gte", "lt", "lte", "matches", "exists")
FACT_PREFIXES = ("model.", "host.", "workload.")

SpeculationPolicy = Literal["required", "forbidden", "default_on", "default_off", "open"]
"""How firmly a rule sets suffix decoding. ``required``/``forbidden`` are final; ``default_on`` /
``default_off`` let a confident prediction flip them; ``open`` leaves the choice to the predictor."""


class Condition(BaseModel):
    """One test on one fact. Exactly one operator is set, or a range: one lower bound (gt/gte)
    and one upper bound (lt/lte)."""

    model_config = ConfigDict(extra="forbid")

    eq: Any = None
    ne: Any = None
    in_: list[Any] | None = Field(default=None, alias="in")
    not_in: list[Any] | None = None
    gt: float | None = None
    gte: float | None = None
    lt: float | None = None
    lte: float | None = None
    matches: str | None = None
    exists: bool | None = None

    @field_validator("matches")
    @classmethod
    def _regex(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:  # not a ValueError: pydantic would let it escape
                raise ValueError(f"invalid regular expression {value!r}: {exc}") from None
        return value

    @model_validator(mode="after")
    def _one_operator(self) -> "Condition":
        ops = sorted("in" if f == "in_" else f for f in self.model_fields_set)
        if not ops:
            raise ValueError(f"a condition needs an operator (one of {', '.join(OPERATORS)}); "
                             "an empty one would match everything")  # fmt: skip
        lower, upper = {"gt", "gte"} & set(ops), {"lt", "lte"} & set(ops)
        is_range = len(ops) == 2 and len(lower) == 1 and len(upper) == 1
        if len(ops) > 1 and not is_range:
            raise ValueError(f"a condition has exactly one operator (or a gt/gte + lt/lte range), found {', '.join(ops)}; "
                             "split it into separate rules or facts")  # fmt: skip
        return self

    def test(self, value: Any) -> bool:
        """True when ``value`` satisfies every operator given."""
        checks = []
        if self.exists is not None:
            checks.append((value is not None) == self.exists)
        if "eq" in self.model_fields_set:
            checks.append(value == self.eq)
        if "ne" in self.model_fields_set:
            checks.append(value != self.ne)
        if self.in_ is not None:
            checks.append(value in self.in_)
        if self.not_in is not None:
            checks.append(value not in self.not_in)
        for op, bound in (("gt", self.gt), ("gte", self.gte), ("lt", self.lt), ("lte", self.lte)):
            if bound is None:
                continue
            if not isinstance(value, (int, float)) or isinstance(value, bool):
                checks.append(False)
                continue
            checks.append({"gt": value > bound, "gte": value >= bound, "lt": value < bound, "lte": value <= bound}[op])
        if self.matches is not None:
            checks.append(isinstance(value, str) and _search(self.matches, value))
        return all(checks)


MATCH_TIMEOUT_S = 0.25
"""How long one ``matches`` test may run: a pattern such as ``^(a+)+$`` backtracks exponentially on
a near-miss, and Python's ``re`` cannot be interrupted, so the test runs in the ``regex`` module
(the same syntax) with its timeout."""


def _search(pattern: str, value: str) -> bool:
    import regex

    from advisor.errors import DataError

    try:
        return regex.search(pattern, value, timeout=MATCH_TIMEOUT_S) is not None
    except TimeoutError:
        raise DataError(f"rule pattern matches: {pattern!r} ran over {MATCH_TIMEOUT_S:g} s on {value[:80]!r} (catastrophic "
                        "backtracking, e.g. a nested quantifier like (a+)+): simplify the pattern") from None  # fmt: skip
    except regex.error as exc:
        raise DataError(f"rule pattern matches: {pattern!r}: {exc}") from None


class Then(BaseModel):
    """What a rule sets. Every field is optional; only what is given is applied."""

    model_config = ConfigDict(extra="forbid")

    speculation: SpeculationPolicy | None = None
    """Suffix decoding policy (see SpeculationPolicy)."""
    num_speculative_tokens: int | None = Field(default=None, ge=1, le=64)
    gpu_memory_utilization: float | None = Field(default=None, gt=0, le=0.99)
    cudagraph_mode: Literal["NONE", "PIECEWISE", "FULL", "FULL_DECODE_ONLY", "FULL_AND_PIECEWISE"] | None = None
    max_model_len: int | None = Field(default=None, ge=16)
    max_num_seqs: int | None = Field(default=None, ge=1)
    dsa_env: bool | None = None
    """Turn the write-up build's DSA env block on or off."""
    env: dict[str, str] | None = None
    """Environment variables to add (merged; later rules win per key)."""
    host_dsa_queues: Literal["enabled", "disabled", "either"] | None = None
    """Host DSA work-queue state the evidence was measured at (advice, not a vLLM setting)."""
    warning: str | None = None
    """A warning to show with the recommendation."""

    @field_validator("env")
    @classmethod
    def _env_names(cls, env: dict[str, str] | None) -> dict[str, str] | None:
        """Only the names advisor.rules.env_policy allows (vLLM/CUDA/NCCL/PyTorch tuning); the rest is refused with why."""
        from advisor.rules.env_policy import refusal

        for name, value in (env or {}).items():
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
                raise ValueError(f"env name {name!r} is not a valid variable name")
            why = refusal(name, value)
            if why:
                raise ValueError(f"env {name} may not be set by a rule: {why}")
        return env


class Rule(BaseModel):
    """One rule: when every condition holds, apply ``then``."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9_.-]*$")
    """Unique id; a user rule with the same id replaces the bundled one."""
    when: dict[str, Condition | Any] = Field(default_factory=dict)
    """Fact path -> condition (a scalar means equality). Facts: model.*, host.*, workload.*."""
    then: Then
    severity: Literal["decision", "warning", "info"] = "decision"
    rationale: str = Field(min_length=1)
    """Why, in one or two sentences a user can read."""
    source: str = Field(min_length=1)
    """The evidence: a finding of the seed write-up, a vLLM source file, a datasheet."""
    priority: int = 50
    """Application order, low first; later rules override earlier fields."""
    enabled: bool = True

    @model_validator(mode="after")
    def _normalise_when(self) -> "Rule":
        clean: dict[str, Condition] = {}
        for path, cond in self.when.items():
            if not path.startswith(FACT_PREFIXES):
                raise ValueError(f"fact {path!r} must start with one of {FACT_PREFIXES}")
            clean[path] = cond if isinstance(cond, Condition) else (
                Condition(**cond) if isinstance(cond, dict) else Condition(eq=cond)
            )  # fmt: skip
        self.when = clean
        return self

    def matches(self, facts: dict[str, Any]) -> bool:
        return self.enabled and all(cond.test(facts.get(path)) for path, cond in self.when.items())


class RuleFile(BaseModel):
    """A ``rules/*.yaml`` file."""

    model_config = ConfigDict(extra="forbid")

    rules: list[Rule]
