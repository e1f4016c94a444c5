"""The floors of the package (docs/architecture.md): every import, module-level or inside a function,
goes to the same floor or a lower one, and no two modules import each other, directly or round a circle."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "advisor"

FLOORS: dict[str, int] = {
    # 1: leaves every layer may use: the package face (``__version__``), domain errors, vLLM facts per
    # version, the fast YAML loader.
    "__init__": 1, "errors": 1, "vllm_facts": 1, "yamlfast": 1,
    # 2: the shared value types (pydantic, no I/O) and the small utilities for settings, paths, atomic writes.
    "domain": 2, "paths": 2, "settings": 2, "atomic": 2,
    # 3: facts about the inputs: the model, the hardware (spec table, host reading), the rules, K̄ replay.
    "model": 3, "hardware": 3, "rules": 3, "kbar": 3,
    # 4: the K > R predictor and the step-cost physics over model and hardware.
    "predict": 4,
    # 4: the speculative methods, one module each behind one protocol, priced with predict (which never imports them).
    "methods": 4,
    # 5: planning: orchestrates rules, prediction and memory into a Recommendation (pure).
    "plan": 5,
    # 6: rendering a Decision as vLLM argv and deployment files.
    "render": 6,
    # 7: probes of real vLLM (they launch with render's argv) and the probe store.
    "probe": 7,
    # 8: the lab: every fit and evaluation of the runtime model (seed sweep, committed campaigns, the probe store);
    # nothing below it imports it, so predict/ and plan/ hold only what ``recommend`` runs.
    "calibrate": 8,
    # 8: the HTML report over recommendations, evidence (the lab's evaluations) and the store.
    "report": 8,
    # 9: the command line and its composition edge (advisor.cli.wiring); 10: ``python -m advisor``.
    "cli": 9, "__main__": 10,
}


def _module(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _graph() -> dict[str, set[str]]:
    files = {_module(p): p for p in ROOT.rglob("*.py")}
    graph: dict[str, set[str]] = {m: set() for m in files}
    for mod, path in files.items():
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    where = ".".join(base + ([node.module] if node.module else []))
                else:
                    where = node.module or ""
                targets = [f"{where}.{a.name}" if f"{where}.{a.name}" in files else where for a in node.names]
            for t in targets:
                while t and t not in files:  # ``import advisor.x.y`` of a name inside a module
                    t = t.rpartition(".")[0]
                if t and t != mod and t.startswith("advisor"):
                    graph[mod].add(t)
    return graph


def _floor(mod: str) -> int:
    top = mod.split(".")[1] if "." in mod else "__init__"
    assert top in FLOORS, f"{mod}: give its package {top!r} a floor in FLOORS (and in docs/architecture.md)"
    return FLOORS[top]


def test_every_module_is_read():
    graph = _graph()
    assert "advisor.plan.recommend" in graph and "advisor.domain.decision" in graph
    assert "advisor.domain.decision" in graph["advisor.plan.recommend"]


def test_no_import_runs_up_a_floor():
    graph = _graph()
    up = sorted(f"{m} (floor {_floor(m)}) -> {t} (floor {_floor(t)})"
                for m, ts in graph.items() for t in ts if _floor(t) > _floor(m))  # fmt: skip
    assert not up, "imports that run back up a floor:\n" + "\n".join(up)


def test_domain_imports_only_itself_and_the_ground_floor():
    """The value types may read the ground floor (errors, the vLLM facts table: Decision's suffix
    defaults are vLLM's) and nothing else outside the domain."""
    graph = _graph()
    bad = sorted(f"{m} -> {t}" for m, ts in graph.items() if m.startswith("advisor.domain") for t in ts
                 if not t.startswith("advisor.domain") and _floor(t) > 1)  # fmt: skip
    assert not bad, bad


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_circle_between_modules():
    circles = _circles(_graph())
    assert not circles, "modules that import each other:\n" + "\n".join(" <-> ".join(c) for c in circles)


def test_the_circle_finder_finds_a_circle():
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_the_floors_are_drawn_in_the_docs():
    doc = (ROOT.parent / "docs" / "architecture.md").read_text()
    tops = {_module(p).split(".")[1] if "." in _module(p) else "__init__" for p in ROOT.rglob("*.py")}
    assert tops <= FLOORS.keys(), f"packages without a floor: {sorted(tops - FLOORS.keys())}"
    missing = sorted(name for name in FLOORS if f"`{name}" not in doc)
    assert not missing, f"docs/architecture.md does not name {missing} in its floors table"


def _doc_table() -> dict[str, tuple[int, str]]:
    """docs/architecture.md's floors table: package -> (floor, 'may import' cell)."""
    import re

    doc = (ROOT.parent / "docs" / "architecture.md").read_text()
    out: dict[str, tuple[int, str]] = {}
    for line in doc.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0].isdigit():
            for name in re.findall(r"`([\w]+)/?`", cells[1]):
                out[name] = (int(cells[0]), cells[3])
    return out


def test_the_docs_floor_table_is_the_tests_floor_table():
    """Each package sits on the floor the table says, and the 'may import' column says what is checked."""
    table = _doc_table()
    assert table.keys() == FLOORS.keys(), sorted(table.keys() ^ FLOORS.keys())
    wrong = {n: (f, FLOORS[n]) for n, (f, _) in table.items() if f != FLOORS[n]}
    assert not wrong, f"docs floor vs FLOORS: {wrong}"
    for name, (floor, may) in table.items():
        if name == "domain":
            assert "floor 1" in may, may  # test_domain_imports_only_itself_and_the_ground_floor
        elif floor > 1 and name != "__main__":
            assert f"floors 1–{floor - 1}" in may or (floor == 2 and "floor 1" in may), (name, may)


def test_the_runtime_never_imports_the_lab():
    """predict/, plan/, methods/ and render/ hold what ``recommend`` runs: none of them reaches advisor.calibrate (the
    fits and evaluations), at module level or inside a function."""
    graph = _graph()
    runtime = ("advisor.predict", "advisor.plan", "advisor.methods", "advisor.render", "advisor.model", "advisor.kbar")
    bad = sorted(f"{m} -> {t}" for m, ts in graph.items() if m.startswith(runtime) for t in ts
                 if t.startswith("advisor.calibrate"))  # fmt: skip
    assert not bad, bad
    assert any(m.startswith("advisor.calibrate.") for m in graph), "the lab package is read"
