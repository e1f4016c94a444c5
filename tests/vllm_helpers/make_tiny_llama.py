"""Build a tiny random Llama and a locally trained BPE tokenizer into OUT_DIR (run with the vLLM venv).

    python make_tiny_llama.py OUT_DIR

hidden 128, 2 layers, 4 heads, 2 KV heads, head_dim 32 (vLLM's CPU attention rejects 16), vocab 2048,
float32 weights in safetensors. The tokenizer is byte-level BPE trained on the interpreter's own
standard-library sources, so it needs no download. Deterministic (seeded). Writes OUT_DIR/.done last.
"""

from __future__ import annotations

import sys
import sysconfig
from pathlib import Path

VOCAB = 2048
VERSION = "tiny-llama v2"


def train_tokenizer(out: Path) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    stdlib = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(str(p) for p in stdlib.glob("*.py"))[:120]
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB,
        special_tokens=["<unk>", "<s>", "</s>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train(files, trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="<unk>", bos_token="<s>", eos_token="</s>", model_max_length=1024
    )
    # A plain chat template, so /v1/chat/completions works as with a real instruct model.
    fast.chat_template = (
        "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
        "{% if add_generation_prompt %}assistant: {% endif %}"
    )
    fast.save_pretrained(out)


def build_model(out: Path) -> None:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=32,
        max_position_embeddings=1024,
        bos_token_id=1,
        eos_token_id=2,
        tie_word_embeddings=False,
        torch_dtype="float32",
    )
    model = LlamaForCausalLM(config).to(torch.float32)
    model.save_pretrained(out, safe_serialization=True)


def main(out_dir: str) -> int:
    import os
    import shutil
    import tempfile

    out = Path(out_dir)
    if (out / ".done").exists() and (out / ".done").read_text().strip() == VERSION:
        return 0
    out.parent.mkdir(parents=True, exist_ok=True)
    # Build beside the target and rename into place: concurrent builders never expose half a model.
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    train_tokenizer(tmp)
    build_model(tmp)
    (tmp / ".done").write_text(VERSION + "\n")
    if (out / ".done").exists() and (out / ".done").read_text().strip() == VERSION:
        shutil.rmtree(tmp)  # another builder finished first
        return 0
    if out.exists():
        shutil.rmtree(out)
    os.rename(tmp, out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1]))
