"""Issue 43 item 2: a rule's ``then.env`` may set only vLLM/CUDA/NCCL/PyTorch tuning names (advisor.rules.env_policy);
the audit's injections are refused at load (exit 5) with the variable and the reason, and never reach vllm.env."""

from __future__ import annotations

import json

import pytest

from advisor.rules.env_policy import refusal

M = "meta-llama/Llama-3.1-8B-Instruct"
HOST = ("--gpu", "H100", "--gpus", "1")


def _rules(tmp_path, env: dict[str, str]):
    rules = tmp_path / "rules"
    rules.mkdir(exist_ok=True)
    body = "".join(f"        {k}: {json.dumps(v)}\n" for k, v in env.items())
    (rules / "user.yaml").write_text("rules:\n  - id: user-env\n    priority: 100\n    then:\n      env:\n" + body
                                     + "    rationale: r\n    source: s\n")  # fmt: skip
    return rules


@pytest.mark.parametrize("name, value, why", [
    ("LD_PRELOAD", "/tmp/evil.so", "not a vLLM, CUDA, NCCL or PyTorch variable"),
    ("BASH_ENV", "/tmp/evil.sh", "not a vLLM, CUDA, NCCL or PyTorch variable"),
    ("PYTHONPATH", "/tmp/evil", "not a vLLM, CUDA, NCCL or PyTorch variable"),
    ("PATH", "/tmp/evil:/usr/bin", "not a vLLM, CUDA, NCCL or PyTorch variable"),
    ("HF_ENDPOINT", "https://attacker.example", "not a vLLM, CUDA, NCCL or PyTorch variable"),
    ("LD_LIBRARY_PATH", "/tmp/evil", "not a vLLM, CUDA, NCCL or PyTorch variable"),
    ("VLLM_PLUGINS", "evil_plugin", "may only turn vLLM's plugins off"),
    ("VLLM_NCCL_SO_PATH", "/tmp/evil.so", "names a file or library"),
    ("CUDA_INJECTION64_PATH", "/tmp/evil.so", "loads a shared library"),
    ("NCCL_NET_PLUGIN", "evil", "loads a shared library"),
    ("VLLM_API_KEY", "known", "looks like a secret"),
    ("VLLM_ALLOW_INSECURE_SERIALIZATION", "1", "pickle"),
    ("VLLM_LOGGING_CONFIG_PATH", "/tmp/log.json", "names a file or library"),
    ("vllm_attention_backend", "x", "upper-case"),
])
def test_a_rule_may_not_inject_environment(run_cli, tmp_path, name, value, why):
    assert why in (refusal(name, value) or "")
    out = tmp_path / "out"
    code, _, err = run_cli("--rules-dir", str(_rules(tmp_path, {name: value})), "render", M, *HOST, "--out", str(out))
    assert code == 5, err
    assert f"env {name} may not be set by a rule" in err and why in err and "user.yaml" in err and "user-env" in err
    assert not out.exists()


def test_tuning_names_pass_and_reach_vllm_env(run_cli, tmp_path):
    env = {"VLLM_ATTENTION_BACKEND": "FLASHINFER", "NCCL_P2P_DISABLE": "1", "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
           "VLLM_PLUGINS": "", "OMP_NUM_THREADS": "8", "CUDA_DEVICE_MAX_CONNECTIONS": "1"}  # fmt: skip
    assert all(refusal(k, v) is None for k, v in env.items())
    out = tmp_path / "out"
    code, _, err = run_cli("--rules-dir", str(_rules(tmp_path, env)), "render", M, *HOST, "--out", str(out))
    assert code == 0, err
    text = (out / "vllm.env").read_text()
    assert "VLLM_ATTENTION_BACKEND=" in text and "NCCL_P2P_DISABLE=" in text and "OMP_NUM_THREADS=" in text


def test_the_bundled_rules_pass_the_policy(run_cli):
    code, _, err = run_cli("recommend", M, *HOST)
    assert code == 0, err
