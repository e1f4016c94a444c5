"""The start-up path of inspect/recommend stays light: heavy modules are not imported.

Timing is measured by scripts/bench_startup.py (medians; machines are noisy); this test pins the
cause of a slow start: a heavy import on the fast path.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

HEAVY = {"transformers", "sklearn", "scipy", "jinja2", "rich", "torch", "huggingface_hub", "httpx", "matplotlib", "PIL"}

PROBE = """
import json, sys
from advisor.cli.app import main
code = main(sys.argv[1:])
heavy = sorted({m.split('.')[0] for m in sys.modules} & set(json.loads(HEAVY)))
print(json.dumps({"code": code, "heavy": heavy}), file=sys.stderr)
"""


def _heavy_imports(*args: str, home: str | None = None) -> list[str]:
    env = {"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin", "HOME": home or os.environ["HOME"]}
    proc = subprocess.run([sys.executable, "-c", PROBE.replace("HEAVY", repr(json.dumps(sorted(HEAVY)))), *args],
                          capture_output=True, text=True, timeout=120, env=env)  # fmt: skip
    report = json.loads(proc.stderr.strip().splitlines()[-1])
    assert report["code"] == 0, proc.stderr
    return report["heavy"]


def test_inspect_imports_nothing_heavy():
    assert _heavy_imports("inspect", "meta-llama/Llama-3.1-70B", "--json") == []


@pytest.mark.parametrize("fmt", [[], ["--json"]])
def test_recommend_imports_nothing_heavy_once_calibrated(fmt, tmp_path):
    args = ("recommend", "meta-llama/Llama-3.1-70B", "--gpu", "B200", "--gpus", "8", *fmt)
    first = _heavy_imports(*args, home=str(tmp_path))  # a fresh data dir: fits once, caches JSON
    assert "sklearn" in first
    assert list((tmp_path / ".local" / "share" / "advisor" / "cache").glob("calibrated-*.json"))
    assert _heavy_imports(*args, home=str(tmp_path)) == []
