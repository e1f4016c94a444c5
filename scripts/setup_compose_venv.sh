#!/usr/bin/env bash
# Create (idempotently) the venv with docker-compose 1.29.2, the Compose validator the tests run
# (`docker-compose config` and its Python loader) on rendered compose.yaml files.
#
#   scripts/setup_compose_venv.sh [DIR]      DIR defaults to ${ADVISOR_COMPOSE_VENV:-.cache/compose-venv}
#
# A venv of its own: docker-compose 1.29.2 needs PyYAML < 6, advisor needs >= 6. PyYAML 5.4.1 has
# no wheel for current Pythons and its sdist does not build with Cython 3, so it is built first
# with cython<3 and no build isolation. Needs only PyPI.
set -euo pipefail

DIR="${1:-${ADVISOR_COMPOSE_VENV:-.cache/compose-venv}}"
PY="${PYTHON:-python3}"
MARKER="$DIR/.advisor-compose-ready"
WANT="docker-compose==1.29.2"

if [[ -f "$MARKER" && "$(cat "$MARKER")" == "$WANT" && -x "$DIR/bin/docker-compose" ]]; then
  echo "[setup_compose_venv] $DIR is ready ($WANT); nothing to do"
  exit 0
fi
"$PY" -m venv "$DIR"
PIP=("$DIR/bin/python" -m pip install -q --disable-pip-version-check)
"${PIP[@]}" "cython<3" wheel "setuptools<70"
"${PIP[@]}" --no-build-isolation "pyyaml==5.4.1"
"${PIP[@]}" "$WANT"
"$DIR/bin/docker-compose" version >/dev/null
echo "$WANT" > "$MARKER"
echo "[setup_compose_venv] $DIR ready ($WANT)"
