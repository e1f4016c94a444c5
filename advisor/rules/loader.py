"""Load rules from the bundled ``rules/`` folder and user directories (I/O edge of the engine)."""

from __future__ import annotations

from pathlib import Path

from advisor.errors import DataError
from advisor.rules.schema import Rule, RuleFile


def _load_file(path: Path) -> list[Rule]:
    import yaml
    from pydantic import ValidationError

    from advisor.yamlfast import safe_load

    try:
        raw = safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise DataError(f"rules file {path}: cannot read: {exc}") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("rules"), list):
        raise DataError(f"rules file {path}: expected a mapping with a 'rules' list")
    rules = []
    for i, entry in enumerate(raw["rules"]):
        rid = entry.get("id", f"#{i}") if isinstance(entry, dict) else f"#{i}"
        try:
            rules.append(Rule.model_validate(entry))
        except ValidationError as exc:
            err = exc.errors()[0]
            loc = ".".join(str(p) for p in err["loc"])
            raise DataError(f"rules file {path}: rule {rid}: {loc}: {err['msg']}") from None
    RuleFile(rules=rules)
    return rules


def load_rules(extra_dirs: list[Path] = ()) -> list[Rule]:
    """Bundled rules, then each user dir in order; a later rule with the same id replaces the earlier."""
    from advisor.paths import data_path

    by_id: dict[str, Rule] = {}
    for directory in [data_path("rules"), *extra_dirs]:
        if not directory.is_dir():
            raise DataError(f"rules directory {directory} does not exist (check --rules-dir / ADVISOR_RULES_DIRS)")
        seen_here: set[str] = set()
        for path in sorted(directory.glob("*.y*ml")):
            for rule in _load_file(path):
                if rule.id in seen_here:
                    raise DataError(f"rules file {path}: duplicate rule id {rule.id!r} in {directory}")
                seen_here.add(rule.id)
                by_id[rule.id] = rule
    return sorted(by_id.values(), key=lambda r: r.priority)
