"""Decision -> ``vllm serve`` arguments, per vLLM version. Pure; returns argv lists (never shell strings).

Flag names checked in tests (tests/test_vllm_contract.py) against each supported release's own
``make_arg_parser`` (advisor.vllm_facts parser_module) and ``vllm.engine.arg_utils.EngineArgs``.
"""

from __future__ import annotations

import json

from advisor.domain.decision import Decision
from advisor.methods import UnknownMethod, speculative_config
from advisor.vllm_facts import DEFAULT_VERSION, facts, versions

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

SUPPORTED_VERSIONS = tuple(versions())
"""vLLM lines with a facts table (advisor.vllm_facts); the flags below are accepted by each one's parser."""


def _check_version(version: str) -> str:
    """``version`` as major.minor; UsageError (exit 2) naming the supported ones otherwise."""
    from advisor.vllm_facts import is_supported, major_minor

    if not is_supported(version):
        from advisor.errors import UsageError

        raise UsageError(
            f"vLLM {version} is not supported; supported: {', '.join(SUPPORTED_VERSIONS)} "
            "(pass --vllm-version or set ADVISOR_VLLM_VERSION to one of them)"
        )
    return major_minor(version)


def serve_flags(decision: Decision, version: str = DEFAULT_VERSION) -> list[str]:
    """Engine flags for ``decision`` (without the program and model)."""
    _check_version(version)
    d = decision
    flags = [
        "--tensor-parallel-size", str(d.tensor_parallel_size),
        "--gpu-memory-utilization", f"{d.gpu_memory_utilization:g}",
        "--max-model-len", str(d.max_model_len),
    ]  # fmt: skip
    if d.pipeline_parallel_size > 1:
        flags += ["--pipeline-parallel-size", str(d.pipeline_parallel_size)]
    if d.distributed_executor_backend is not None:
        flags += ["--distributed-executor-backend", d.distributed_executor_backend]
    if d.data_parallel_size > 1:
        flags += ["--data-parallel-size", str(d.data_parallel_size)]
    if d.enable_expert_parallel:
        flags += ["--enable-expert-parallel"]
    if d.max_num_seqs is not None:
        flags += ["--max-num-seqs", str(d.max_num_seqs)]
    if d.kv_cache_dtype != "auto":
        flags += ["--kv-cache-dtype", d.kv_cache_dtype]
    if d.max_num_batched_tokens is not None:
        flags += ["--max-num-batched-tokens", str(d.max_num_batched_tokens)]
    compilation = {"cudagraph_mode": d.cudagraph_mode}
    flags += ["--compilation-config", json.dumps(compilation, separators=(",", ":"))]
    try:
        spec = speculative_config(d, facts(version))  # each method names itself as this vLLM line does
    except UnknownMethod as exc:
        from advisor.errors import UsageError

        raise UsageError(str(exc)) from None
    if spec is not None:
        flags += ["--speculative-config", json.dumps(spec, separators=(",", ":"))]
    return flags


def dropped_suffix_knobs(decision: Decision, version: str = DEFAULT_VERSION) -> dict[str, object]:
    """``suffix_decoding_*`` values ``decision`` sets (those differing from vLLM's defaults) that vLLM ``version``'s suffix proposer does not read
    (advisor.vllm_facts ``suffix_tuning_knobs``): serve_flags leaves them out."""
    from advisor.domain.decision import SuffixParams

    if decision.speculative_method != "suffix":
        return {}
    read, defaults = facts(version).suffix_tuning_knobs, SuffixParams()
    given = {f"suffix_decoding_{n}": getattr(decision.suffix, n) for n in SuffixParams.model_fields
             if getattr(decision.suffix, n) != getattr(defaults, n)}  # fmt: skip
    return {k: v for k, v in given.items() if k not in read}


def flag_warnings(decision: Decision, version: str = DEFAULT_VERSION) -> list[str]:
    """What serve_flags left out of what the decision asks for, for the command's warnings."""
    dropped = dropped_suffix_knobs(decision, version)
    if not dropped:
        return []
    f = facts(_check_version(version))
    given = ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in dropped.items())
    how = "; it drafts all num_speculative_tokens every step" if f.suffix_drafts_full_k else ""
    return [f"{given} not rendered: vLLM {f.version}'s suffix decoding does not read {'it' if len(dropped) == 1 else 'them'} "
            f"({f.sources.get('suffix_tuning_knobs', '')}{how})"]


def serve_argv(model: str, decision: Decision, version: str = DEFAULT_VERSION, *, program: tuple[str, ...] = ("vllm", "serve")) -> list[str]:
    """Full command: ``vllm serve MODEL FLAGS…``."""
    return [*program, model, *serve_flags(decision, version)]
