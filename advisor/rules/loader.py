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
        message = " ".join(str(exc).split())[:300]
        raise DataError(f"rules file {path}: cannot read: {message}") from None
    except RecursionError:
        raise DataError(f"rules file {path}: nests too deeply to be a rules file") from None
    except UnicodeDecodeError as exc:
        raise DataError(f"rules file {path}: not UTF-8 text (byte {exc.object[exc.start]:#04x} at offset "
                        f"{exc.start}); save it as UTF-8 YAML") from None  # fmt: skip
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


def _check_facts(path: Path, rule: Rule, facts: frozenset[str]) -> None:
    import difflib

    for name in rule.when:
        if name not in facts:
            close = difflib.get_close_matches(name, sorted(facts), n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"known facts: {', '.join(sorted(facts))}"
            raise DataError(f"rules file {path}: rule {rule.id}: unknown fact {name!r} (the rule could never test it); {hint}")


def load_rules(extra_dirs: list[Path] = (), *, facts: frozenset[str] | None = None) -> list[Rule]:
    """Bundled rules, then each user dir in order; a later rule with the same id replaces the earlier.
    With ``facts`` (the names the engine builds: advisor.plan.recommend.fact_names), a ``when`` on
    any other name is a DataError naming the file, the rule and the closest known fact."""
    from advisor.paths import data_path

    by_id: dict[str, Rule] = {}
    for directory in [data_path("rules"), *extra_dirs]:
        if not directory.is_dir():
            raise DataError(f"rules directory {directory} does not exist (check --rules-dir / ADVISOR_RULES_DIRS)")
        seen_here: set[str] = set()
        for path in sorted(directory.glob("*.y*ml")):
            if not path.is_file():  # a FIFO would block the read, a device never end; a directory is not a file
                raise DataError(f"rules file {path} is not a regular file (a FIFO, device or directory); remove it from {directory}")
            for rule in _load_file(path):
                if facts is not None:
                    _check_facts(path, rule, facts)
                if rule.id in seen_here:
                    raise DataError(f"rules file {path}: duplicate rule id {rule.id!r} in {directory}")
                seen_here.add(rule.id)
                by_id[rule.id] = rule
    return sorted(by_id.values(), key=lambda r: r.priority)
