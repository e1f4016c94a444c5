"""Apply rules to facts (pure)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from advisor.rules.schema import Rule, SpeculationPolicy

_FIELDS = ("num_speculative_tokens", "gpu_memory_utilization", "cudagraph_mode", "max_model_len", "max_num_seqs", "dsa_env", "host_dsa_queues")


class Firing(BaseModel):
    """A rule that fired, with what it set."""

    model_config = ConfigDict(extra="forbid")

    id: str
    severity: str
    rationale: str
    source: str
    set: dict[str, Any] = Field(default_factory=dict)
    warning: str | None = None


class RulesOutcome(BaseModel):
    """The rules' verdict before memory planning and prediction."""

    model_config = ConfigDict(extra="forbid")

    speculation: SpeculationPolicy = "open"
    speculation_rule: str | None = None
    """Id of the rule that set the final speculation policy."""
    fields: dict[str, Any] = Field(default_factory=dict)
    """Decision fields set by rules (num_speculative_tokens, gmu, cudagraph_mode, …)."""
    env: dict[str, str] = Field(default_factory=dict)
    warnings: list[str] = Field(default_factory=list)
    fired: list[Firing] = Field(default_factory=list)


def apply_rules(rules: list[Rule], facts: dict[str, Any]) -> RulesOutcome:
    """Apply matching rules in priority order. ``forbidden``/``required`` are sticky: a later
    ``default_*``/``open`` cannot undo them; a later hard policy can (it has higher priority)."""
    out = RulesOutcome()
    for rule in rules:
        if not rule.matches(facts):
            continue
        t = rule.then
        changed: dict[str, Any] = {}
        if t.speculation is not None:
            hard = out.speculation in ("required", "forbidden")
            if not hard or t.speculation in ("required", "forbidden"):
                out.speculation, out.speculation_rule = t.speculation, rule.id
                changed["speculation"] = t.speculation
        for name in _FIELDS:
            value = getattr(t, name)
            if value is not None:
                out.fields[name] = value
                changed[name] = value
        if t.env:
            out.env.update(t.env)
            changed["env"] = dict(t.env)
        if t.warning:
            out.warnings.append(t.warning)
        out.fired.append(Firing(id=rule.id, severity=rule.severity, rationale=rule.rationale, source=rule.source, set=changed, warning=t.warning))
    return out
