"""Decision -> ``vllm serve`` arguments, per vLLM version. Pure; returns argv lists (never shell strings).

Flag names checked against vLLM's own parser in tests (tests/test_vllm_contract.py) with
``vllm.entrypoints.openai.cli_args.make_arg_parser`` and ``vllm.engine.arg_utils.EngineArgs``.
"""

from __future__ import annotations

import json

from advisor.domain.decision import Decision

# Env vars each targeted vLLM line reads (vllm/envs.py), plus torch's allocator setting and the
# Arctic Inference plugin switch. Anything else a rule sets is build-specific (e.g. the write-up's
# VLLM_LHC_DSA) and is rendered only when the rule says the build reads it.
UPSTREAM_ENV = frozenset(
    {
        "VLLM_PLUGINS",  # vllm/envs.py: comma-separated plugin allow-list ("" loads none)
        "PYTORCH_CUDA_ALLOC_CONF",  # torch allocator (read by torch, not vLLM)
        "ARCTIC_INFERENCE_ENABLED",  # arctic_inference plugin switch (arctic_inference/vllm/plugins.py)
        "VLLM_USE_V1",
        "VLLM_ATTENTION_BACKEND",
        "CUDA_VISIBLE_DEVICES",
    }
)

SUPPORTED_VERSIONS = ("0.32",)


def _check_version(version: str) -> str:
    major_minor = ".".join(version.split(".")[:2])
    if major_minor not in SUPPORTED_VERSIONS:
        from advisor.errors import UsageError

        raise UsageError(
            f"vLLM {version} has no flag mapping; supported: {', '.join(SUPPORTED_VERSIONS)} "
            "(set ADVISOR_VLLM_VERSION or --vllm-version)"
        )
    return major_minor


def serve_flags(decision: Decision, version: str = "0.32") -> list[str]:
    """Engine flags for ``decision`` (without the program and model)."""
    _check_version(version)
    d = decision
    flags = [
        "--tensor-parallel-size", str(d.tensor_parallel_size),
        "--gpu-memory-utilization", f"{d.gpu_memory_utilization:g}",
        "--max-model-len", str(d.max_model_len),
    ]  # fmt: skip
    if d.data_parallel_size > 1:
        flags += ["--data-parallel-size", str(d.data_parallel_size)]
    if d.enable_expert_parallel:
        flags += ["--enable-expert-parallel"]
    if d.max_num_seqs is not None:
        flags += ["--max-num-seqs", str(d.max_num_seqs)]
    compilation = {"cudagraph_mode": d.cudagraph_mode}
    flags += ["--compilation-config", json.dumps(compilation, separators=(",", ":"))]
    spec = d.speculative_config()
    if spec is not None:
        flags += ["--speculative-config", json.dumps(spec, separators=(",", ":"))]
    return flags


def serve_argv(model: str, decision: Decision, version: str = "0.32", *, program: tuple[str, ...] = ("vllm", "serve")) -> list[str]:
    """Full command: ``vllm serve MODEL FLAGS…``."""
    return [*program, model, *serve_flags(decision, version)]
