"""The docker-compose 1.29 venv (scripts/setup_compose_venv.sh) that validates rendered Compose files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_VENV = Path(os.environ.get("ADVISOR_COMPOSE_VENV", ROOT / ".cache" / "compose-venv"))  # read at import, before conftest clears ADVISOR_*


def compose_python() -> Path:
    """The venv's python, or skip the test when the venv is not set up."""
    python = COMPOSE_VENV / "bin" / "python"
    if not (COMPOSE_VENV / ".advisor-compose-ready").exists() or not python.exists():
        pytest.skip(f"no docker-compose venv at {COMPOSE_VENV}: run scripts/setup_compose_venv.sh")
    return python
