"""No logic branches on the text of a reason or message (issue 42): decisions read typed kinds.

Reasons, notes and warnings are prose for people; code that decides reads a typed field beside them
(``Candidate.why_kind``, ``Recommendation.limits_missed``, ``ProbePlan.why_kind``, ``GainEstimate.k_bar_note``...).
The scan reads every ``advisor/**/*.py`` with ``ast`` and fails on ``.startswith`` / ``.endswith`` / ``in`` /
``not in`` / ``==`` / ``!=`` whose operand is text of that kind: a name or attribute called reason(s), why,
message(s), msg, note(s), warning(s), detail(s) or explanation (or ending ``_reason``, ``_msg``, ``_source``...), an
item of such a collection (a loop or comprehension variable over it), or ``str(exc)``; and on a prefix, suffix or
substring test of a bare ``source`` (``source.startswith(...)``, ``'...' in source``: where a figure came from is
prose beside a typed kind, ``Prediction.k_bar_kind``; compared whole, a bare ``source`` is a row's or publication's
id, ``PublishedKbar.source``); inside an ``if`` / ``while`` /
conditional expression, a comprehension's condition, a boolean expression, or the argument of ``any`` / ``all`` /
``next`` / ``filter`` / ``sum``. What is left is parsing text that is not ours, listed in :data:`ALLOWED` with why."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TEXT_NAMES = frozenset({"reason", "reasons", "why", "message", "messages", "msg", "note", "notes", "warning", "warnings",
                        "detail", "details", "explanation"})
"""Names of prose (and their ``*_reason``-style compounds); typed kinds are named otherwise (``why_kind``)."""
SOURCE_NAMES = frozenset({"source", "sources"})
"""Where a figure came from. Their compounds (``k_bar_source``, ``suffix_k_bar_source``) are prose like TEXT_NAMES (the
typed kind beside them is ``k_bar_kind``); a bare ``source`` is prose too (``KbarChoice.source``) but also the id of a
row, campaign or publication (``Observation.source``, ``PublishedKbar.source``), which code compares whole: only a
prefix, suffix or substring test reads its words."""
EXC_NAMES = frozenset({"exc", "e", "err", "error", "ex"})
"""``str()`` of one of these is an exception's message."""
PREDICATES = frozenset({"any", "all", "next", "filter", "sum"})
"""Calls whose arguments decide (their generator's condition or element is a test)."""

_UNPARSEABLE_JSON_END = "the message of Python's json.JSONDecodeError (not ours; it has no typed code for a string cut off by the end of the buffer)"
_CLI_WHY = ("text view only: which of the prediction's explanation lines `recommend` repeats under 'Why', by the documented "
            "MEASURED / FITTED / ASSUMED labels; it decides nothing and the JSON carries every line")
ALLOWED: dict[tuple[str, str, str], str] = {
    ("advisor/kbar/formats.py", "_cut_or_malformed", "error.msg.startswith('Unterminated string')"): _UNPARSEABLE_JSON_END,
    # a record of the user's prompt file (OpenAI-style "messages" JSON): the dict is checked for its "content" key
    ("advisor/probe/corpus.py", "_from_record", "'content' in m"): "a chat message record's key, not text",
    ("advisor/cli/recommend.py", "_print", "'NOT FITTED' in line"): _CLI_WHY,
    ("advisor/cli/recommend.py", "_print", "'ASSUMED' in line"): _CLI_WHY,
    ("advisor/cli/recommend.py", "_print", "'it is fitted' in line"): _CLI_WHY,
    ("advisor/cli/recommend.py", "_print", "line.startswith('left to calibration')"): _CLI_WHY,
}
"""(file, enclosing function, the test as ``ast.unparse`` writes it) -> why it is not a branch on our own prose."""


def _name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Subscript):
        if isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
            return node.slice.value  # d["reason"]
        return _name(node.value)  # reasons[0]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        if node.func.attr == "get" and node.args and isinstance(node.args[0], ast.Constant):
            return node.args[0].value if isinstance(node.args[0].value, str) else None  # d.get("why")
        if node.func.attr in ("lower", "strip", "casefold", "upper"):
            return _name(node.func.value)
    return None


def _is_text(node: ast.AST, items: set[str]) -> bool:
    """Whether ``node`` is prose of a reason / message kind (``items``: variables bound to such prose)."""
    if isinstance(node, ast.IfExp):
        return _is_text(node.body, items) or _is_text(node.orelse, items)
    if isinstance(node, ast.BoolOp):
        return any(_is_text(v, items) for v in node.values)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "str" and node.args:
        return _name(node.args[0]) in EXC_NAMES
    name = _name(node)
    return isinstance(name, str) and (name in items or name in TEXT_NAMES
                                      or any(name.endswith("_" + t) for t in TEXT_NAMES | SOURCE_NAMES))


def _is_source(node: ast.AST) -> bool:
    """Whether ``node`` is a bare ``source`` (SOURCE_NAMES): prose or an id, so only its words' tests count."""
    return _name(node) in SOURCE_NAMES


def _text_test(node: ast.AST, items: set[str]) -> bool:
    """A comparison or prefix test on prose; a prefix, suffix or substring test on a bare ``source``."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("startswith", "endswith"):
        return _is_text(node.func.value, items) or _is_source(node.func.value)
    if isinstance(node, ast.Compare) and any(isinstance(op, (ast.In, ast.NotIn, ast.Eq, ast.NotEq)) for op in node.ops):
        if any(_is_text(x, items) for x in (node.left, *node.comparators)):
            return True
        return any(isinstance(op, (ast.In, ast.NotIn)) and _is_source(right) for op, right in zip(node.ops, node.comparators))
    return False


def _tests_in(scope: ast.AST):
    """(test expression, the prose variables bound where it runs) of every decision in ``scope``."""
    items: set[str] = set()
    for node in ast.walk(scope):  # loop and comprehension variables over prose are prose
        if isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)) and isinstance(node.target, ast.Name) \
                and _is_text(node.iter, set()):
            items.add(node.target.id)
    for node in ast.walk(scope):
        if isinstance(node, (ast.If, ast.While, ast.IfExp)):
            yield node.test, items
        elif isinstance(node, ast.comprehension):
            for cond in node.ifs:
                yield cond, items
        elif isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp)):
            yield node.elt, items
        elif isinstance(node, ast.BoolOp):
            yield node, items
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in PREDICATES:
            yield from ((a, items) for a in node.args)


def scan(source: str) -> list[tuple[str, str]]:
    """(enclosing function, test) of every branch on prose in ``source``."""
    tree = ast.parse(source)
    scopes: list[tuple[str, ast.AST]] = [("<module>", tree)]
    scopes += [(n.name, n) for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    found: dict[tuple[int, int], tuple[str, str]] = {}
    for name, scope in reversed(scopes):  # the innermost function names a hit
        for test, items in _tests_in(scope):
            for node in ast.walk(test):
                if _text_test(node, items):
                    found.setdefault((node.lineno, node.col_offset), (name, ast.unparse(node)))
    return [found[k] for k in sorted(found)]


def _hits() -> dict[tuple[str, str, str], None]:
    out: dict[tuple[str, str, str], None] = {}
    for path in sorted((ROOT / "advisor").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        for func, test in scan(path.read_text(encoding="utf-8")):
            out[(rel, func, test)] = None
    return out


def test_no_branch_on_message_text():
    bad = [f"{rel} ({func}): {test}" for rel, func, test in _hits() if (rel, func, test) not in ALLOWED]
    assert not bad, ("logic reads the text of a reason or message; give it a typed field (a Literal kind) beside the "
                     "prose, or, for text that is not ours, an ALLOWED entry with why:\n" + "\n".join(bad))


def test_every_allowed_entry_is_still_needed():
    hits = _hits()
    assert not [k for k in ALLOWED if k not in hits], "stale ALLOWED entries: drop them"


@pytest.mark.parametrize("code", [
    "def f(c):\n    if c.why.startswith('candidate'):\n        pass",
    "def f(reasons):\n    return any(r.startswith('does not boot') for r in reasons)",
    "def f(exc):\n    if 'out of memory' in str(exc):\n        pass",
    "def f(notes):\n    return [n for n in notes if 'ASSUMED' in n]",
    "def f(msg):\n    return msg == 'x' or False",
    "def f(rec):\n    while rec['reason'].endswith('.'):\n        pass",
    "def f(d):\n    return 'x' if d.get('why') == 'nodes' else 'y'",
    "def f(rec):\n    for w in rec.warnings:\n        if 'K' in w:\n            pass",
    # where K̄ came from: its prose, never its kind (Prediction.k_bar_kind)
    "def f(sp):\n    if sp.k_bar_source.startswith('own-output'):\n        pass",
    "def f(p):\n    return 'x' if p.k_bar_source == 'measured' else 'y'",
    "def f(source):\n    if source.startswith('prior'):\n        pass",
    "def f(source):\n    return 'published acceptance [' in source or None",
    "def f(choice):\n    return 'DERIVED' not in choice.source and choice.k > 1",
    "def f(t):\n    return any('DERIVED' in s for s in t['suffix_k_bar_sources'])",
])
def test_the_scan_sees_a_branch_on_prose(code):
    assert scan(code), code


@pytest.mark.parametrize("code", [
    "def f(c):\n    if c.why_kind == 'rule':\n        pass",
    "def f(c):\n    return c.why_kind in ('rule', 'measured')",
    "def f(rec):\n    print(rec.reason)\n    return rec.limits_missed is None",
    "def f(reasons):\n    return [r.upper() for r in reasons]",
    "def f(p):\n    if p.k_bar_kind == 'own_output':\n        pass",
    "def f(p):\n    return p.k_bar_published_source_id == 'x' or None",
    # a bare source compared whole is an id (a publication, an observation's campaign)
    "def f(rows, source):\n    return next((r for r in rows if source in (None, r.source)), None)",
    "def f(obs):\n    return [o for o in obs if o.source == 'seed']",
])
def test_the_scan_leaves_typed_kinds(code):
    assert not scan(code), code
