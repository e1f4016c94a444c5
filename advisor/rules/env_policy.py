"""What a rule's ``then.env`` may set: the names vLLM, CUDA, NCCL and PyTorch read to tune a server, never a name
that loads code, changes where data goes, carries a secret or widens what the server exposes.

Rules are declarative advice, read from the bundled ``rules/`` and any ``--rules-dir``/``ADVISOR_RULES_DIRS``; their
env lands in ``vllm.env`` and so in the server's (and, multi-node, Ray's) environment. A name outside this policy is
refused when the rule is loaded (DataError, exit 5, naming the file, the rule, the variable and the reason). An
operator who wants such a variable passes it explicitly: ``advisor render --env NAME=VALUE`` (docs/architecture.md,
"What a rules directory is trusted with").

Data, with sources (checked 2026-12 against vllm/envs.py of the supported lines, NCCL's environment-variable docs
https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html, CUDA's
https://docs.nvidia.com/cuda/cuda-c-programming-guide/#cuda-environment-variables and PyTorch's
https://pytorch.org/docs/stable/torch_environment_variables.html).
"""

from __future__ import annotations

import re

ALLOWED_PREFIXES: tuple[str, ...] = (
    "VLLM_",  # vllm/envs.py: the server's own tuning (attention backend, V1, compile and scheduler knobs)
    "NCCL_",  # NCCL collectives (NCCL_P2P_DISABLE, NCCL_IB_DISABLE, NCCL_SOCKET_IFNAME, ...)
    "CUDA_",  # CUDA runtime (CUDA_VISIBLE_DEVICES, CUDA_DEVICE_MAX_CONNECTIONS, CUDA_LAUNCH_BLOCKING)
    "TORCH_",  # PyTorch (TORCH_CUDA_ARCH_LIST, TORCH_NCCL_* ...)
    "PYTORCH_",  # PyTorch allocator (PYTORCH_CUDA_ALLOC_CONF: the baseline rule's expandable segments)
    "ARCTIC_INFERENCE_",  # arctic_inference/vllm/plugins.py: ARCTIC_INFERENCE_ENABLED (the baseline rule sets "0")
)
"""A rule may set a name with one of these prefixes, unless REFUSED_* below says otherwise."""

ALLOWED_NAMES: frozenset[str] = frozenset({
    "OMP_NUM_THREADS",  # vLLM's CPU/threads guidance; torch reads it
    "TOKENIZERS_PARALLELISM",  # Hugging Face tokenizers (fork warnings)
    "CUBLAS_WORKSPACE_CONFIG",  # cuBLAS workspace size (CUDA docs, "Results reproducibility")
})  # fmt: skip
"""Names outside the prefixes a rule may set."""

REFUSED_NAMES: dict[str, str] = {
    "VLLM_ALLOW_INSECURE_SERIALIZATION": "lets pickle cross vLLM's process boundaries (code execution from a message)",
    "VLLM_ALLOW_RUNTIME_LORA_UPDATING": "lets any client load LoRA adapters from paths or the hub at runtime",
    "VLLM_SERVER_DEV_MODE": "exposes vLLM's development endpoints (/reset_prefix_cache, /sleep, /collective_rpc ...)",
    "VLLM_CONFIGURE_LOGGING": "decides whether vLLM applies a logging config (dictConfig can instantiate any class)",
    "VLLM_USE_MODELSCOPE": "downloads the model from ModelScope instead of the Hugging Face hub",
    "VLLM_DEBUG_LOG_API_SERVER_RESPONSE": "writes every response (user data) to the server log",
    "CUDA_INJECTION64_PATH": "loads a shared library into every CUDA process",
}
"""Names within the prefixes that a rule may never set, each with the reason."""

REFUSED_SUFFIXES: dict[str, str] = {
    "_PATH": "names a file or library the server reads or loads (e.g. VLLM_NCCL_SO_PATH, VLLM_LOGGING_CONFIG_PATH)",
    "_FILE": "names a file the server reads or writes (e.g. NCCL_DEBUG_FILE, NCCL_TOPO_FILE)",
    "_DIR": "names a directory the server writes to or loads from (e.g. VLLM_TORCH_PROFILER_DIR)",
    "_ROOT": "names a directory the server writes to or loads from (e.g. VLLM_CACHE_ROOT)",
    "_PLUGIN": "loads a shared library into the server (e.g. NCCL_NET_PLUGIN, NCCL_TUNER_PLUGIN)",
    "_LIB": "loads a shared library into the server",
    "_URL": "sends requests or data to another address",
    "_ENDPOINT": "sends requests or data to another address",
    "_HOST": "changes the address the server binds to or connects to",
    "_HOST_IP": "changes the address the server binds to or connects to",
    "_PORT": "changes a port the server listens on",
}
"""Name endings within the prefixes that a rule may never set, each with the reason."""

SECRET_NAME = re.compile(r"(_TOKEN$|^TOKEN|SECRET|PASSWORD|PASSWD|API_KEY|_KEY$|CREDENTIAL|_AUTH)", re.IGNORECASE)
"""A secret is the operator's to pass (``render --env NAME``), never a rule's (it would be a value in a file)."""

EMPTY_ONLY: dict[str, str] = {
    "VLLM_PLUGINS": "a rule may only turn vLLM's plugins off (\"\"): which installed plugin code runs in the server is "
                    "the operator's choice (vllm/envs.py: unset loads every installed plugin, a list loads those)",
}  # fmt: skip
"""Names a rule may set only to the empty string, each with the reason."""


def refusal(name: str, value: str) -> str | None:
    """Why a rule may not set ``name=value`` (None when it may)."""
    upper = name.upper()
    if name != upper:
        return "not an upper-case name (vLLM, CUDA, NCCL and PyTorch read upper-case names only)"
    if name in EMPTY_ONLY:
        return None if value == "" else EMPTY_ONLY[name]
    if name in REFUSED_NAMES:
        return REFUSED_NAMES[name]
    if SECRET_NAME.search(name):
        return "looks like a secret: pass it at render time (--env NAME), never from a rule"
    if name in ALLOWED_NAMES:
        return None
    if not name.startswith(ALLOWED_PREFIXES):
        return ("not a vLLM, CUDA, NCCL or PyTorch variable: a rule may set only names starting with "
                f"{', '.join(ALLOWED_PREFIXES)} or {', '.join(sorted(ALLOWED_NAMES))} (e.g. LD_PRELOAD, BASH_ENV, "
                "PYTHONPATH, PATH or HF_ENDPOINT change what code runs or where data goes)")  # fmt: skip
    for suffix, why in REFUSED_SUFFIXES.items():
        if name.endswith(suffix):
            return why
    return None
