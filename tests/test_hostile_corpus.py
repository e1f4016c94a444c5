"""A corpus of hostile inputs: every one ends in a clean one-line error or a normal answer — never
exit 70 ("internal error") and never a traceback."""

from __future__ import annotations

import json

import pytest

LLAMA = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 4096, "num_hidden_layers": 32,
         "vocab_size": 128256, "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336,
         "max_position_embeddings": 8192, "torch_dtype": "bfloat16", "head_dim": 128}  # fmt: skip
MIXTRAL = {**LLAMA, "model_type": "mixtral", "architectures": ["MixtralForCausalLM"], "num_local_experts": 8,
           "num_experts_per_tok": 2}  # fmt: skip
VALUES = [0, -1, 1.5, "x", None, True, 10**30, [], {}, float("nan")]
FIELDS = ["hidden_size", "num_hidden_layers", "vocab_size", "num_attention_heads", "num_key_value_heads",
          "intermediate_size", "max_position_embeddings", "head_dim", "torch_dtype", "model_type"]  # fmt: skip
MOE_FIELDS = ["num_local_experts", "num_experts_per_tok"]


def _cases():
    for field in FIELDS:
        for value in VALUES:
            yield "llama", field, value
    for field in MOE_FIELDS:
        for value in VALUES:
            yield "mixtral", field, value


@pytest.mark.parametrize("base, field, value", list(_cases()))
def test_config_field_values(run_cli, tmp_path, base, field, value):
    cfg = dict(LLAMA if base == "llama" else MIXTRAL)
    cfg[field] = value
    d = tmp_path / "m"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(cfg))  # NaN is written as JSON's NaN extension
    for cmd in (("inspect", str(d)), ("recommend", str(d), "--gpu", "H100", "--gpus", "1")):
        code, _, err = run_cli(*cmd)
        assert code in (0, 3, 4, 8), (cmd, code, err)  # 8: recommend says nothing boots (a model too large)
        assert "internal error" not in err and "Traceback" not in err


@pytest.mark.parametrize("args", [
    ["inspect", "a--b"], ["inspect", "org/..x"], ["inspect", "/dev/null"], ["inspect", ""], ["inspect", "org/name/extra/parts"],
    ["recommend", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100", "--gpus", "8", "--tp", "3"],
    ["recommend", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100", "--gpus", "1", "--gmu", "0.05"],
    ["recommend", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100", "--gpus", "1", "--max-model-len", "999999999"],
    ["recommend", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100", "--gpus", "1", "--corpus", "/nonexistent"],
    ["recommend", "Qwen/Qwen2.5-7B-Instruct", "--gpu", "H100", "--gpus", "8", "--tp", "7"],
    ["probe", "meta-llama/Llama-3.1-8B-Instruct", "--campaign", "../../etc"],
    ["host", "diff", "/nonexistent", "/nonexistent"],
])  # fmt: skip
def test_command_lines(run_cli, args):
    code, _, err = run_cli(*args)
    assert code != 70 and "internal error" not in err and "Traceback" not in err, (args, code, err)
