#!/usr/bin/env bash
# Install Arctic Inference (the suffix-decoding cache `advisor kbar` replays traffic through) into
# the current Python environment, on a CPU-only machine. Idempotent: exits at once when
# `from arctic_inference.suffix_decoding import SuffixDecodingCache` already works.
#
#   scripts/install_arctic.sh            # uses $PYTHON, else `python`, else `python3`
#   PYTHON=/path/to/venv/bin/python scripts/install_arctic.sh
#
# arctic-inference is source-only on PyPI and its build imports torch. To keep torch (~700 MB) out
# of the target environment, the wheel is built in a throw-away build venv made from the same
# interpreter (torch==2.13.0 from pip's local CPU wheel, nanobind 2.9.2, cmake, grpcio-tools, numpy;
# `--no-build-isolation --no-deps` with the build venv's bin first on PATH so the build finds cmake),
# then installed with --no-deps; the suffix cache needs only numpy at run time. The built wheel is
# kept under ${ADVISOR_WHEEL_CACHE:-${XDG_CACHE_HOME:-~/.cache}/advisor/wheels} for the next run.
set -euo pipefail

ARCTIC_VERSION=0.3.0
TORCH_VERSION=2.13.0
NANOBIND_VERSION=2.9.2

if [[ -n "${PYTHON:-}" ]]; then PY="$PYTHON"
elif command -v python >/dev/null 2>&1; then PY=python
else PY=python3
fi
PY="$("$PY" -c 'import sys; print(sys.executable)')"  # the real interpreter, not a pyenv shim

check() {
  "$PY" - <<'PY' 2>/dev/null
from arctic_inference.suffix_decoding import SuffixDecodingCache
cache = SuffixDecodingCache(max_tree_depth=24, max_cached_requests=4)
cache.start_request("probe", [1, 2, 3, 1, 2])
cache.add_active_response("probe", [3])
cache.speculate("probe", [1, 2, 3], max_spec_tokens=4, max_spec_factor=1.0, min_token_prob=0.1)
cache.stop_request("probe")
PY
}

if check; then
  echo "[install_arctic] arctic_inference.suffix_decoding already importable in $PY; nothing to do"
  exit 0
fi

T0=$(date +%s)
quiet() { "$@" 2> >(grep -v -e 'is ignored: it is neither a file nor a directory' -e 'Running pip as the .root. user' >&2); }
PYTAG=$("$PY" -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')
WHEELS="${ADVISOR_WHEEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/advisor/wheels}"
mkdir -p "$WHEELS"
find_wheel() { find "$WHEELS" -maxdepth 1 -name "arctic_inference-$ARCTIC_VERSION-$PYTAG-*.whl" -print -quit; }

WHEEL="$(find_wheel || true)"
if [[ -z "$WHEEL" ]]; then
  BUILD="$(mktemp -d "${TMPDIR:-/tmp}/arctic-build.XXXXXX")"
  trap 'rm -rf "$BUILD"' EXIT
  echo "[install_arctic] building arctic-inference $ARCTIC_VERSION in a build venv ($BUILD)"
  "$PY" -m venv "$BUILD/venv"
  BPIP=(quiet "$BUILD/venv/bin/python" -m pip install -q --disable-pip-version-check)
  "${BPIP[@]}" "torch==$TORCH_VERSION" wheel "nanobind==$NANOBIND_VERSION" cmake grpcio-tools numpy
  # CMake's FindPython (csrc/suffix_decoding/CMakeLists.txt: find_package(Python ...)) looks at
  # $VIRTUAL_ENV before PATH, so from an activated venv it would pick that venv's python, which has
  # no nanobind ("No module named nanobind"). Point both at the build venv; arctic's setup.py
  # appends $CMAKE_ARGS to its cmake command line.
  BPY="$BUILD/venv/bin/python"
  PATH="$BUILD/venv/bin:$PATH" VIRTUAL_ENV="$BUILD/venv" MAX_JOBS="${MAX_JOBS:-2}" \
    CMAKE_ARGS="-DPython_EXECUTABLE=$BPY -DPython3_EXECUTABLE=$BPY${CMAKE_ARGS:+ $CMAKE_ARGS}" \
    quiet "$BUILD/venv/bin/python" -m pip wheel -q --disable-pip-version-check \
      --no-build-isolation --no-deps -w "$BUILD/dist" "arctic-inference==$ARCTIC_VERSION"
  cp "$BUILD"/dist/arctic_inference-"$ARCTIC_VERSION"-*.whl "$WHEELS"/
  WHEEL="$(find_wheel)"
fi

echo "[install_arctic] installing $(basename "$WHEEL") into $PY"
quiet "$PY" -m pip install -q --disable-pip-version-check --no-deps --force-reinstall "$WHEEL"
# The suffix cache's only run-time dependency.
"$PY" -c 'import numpy' 2>/dev/null || quiet "$PY" -m pip install -q --disable-pip-version-check numpy

if ! check; then
  echo "[install_arctic] error: arctic_inference.suffix_decoding still fails to import in $PY" >&2
  "$PY" -c 'from arctic_inference.suffix_decoding import SuffixDecodingCache' >&2 || true
  exit 1
fi
echo "[install_arctic] ready: arctic-inference $ARCTIC_VERSION in $PY ($(( $(date +%s) - T0 ))s)"
