"""The known ``model_type`` table and ``TextArch``: the few numbers the profile needs (``normalise`` in
:mod:`advisor.model.layout` reads a raw config.json into it).

Known ``model_type``s are read straight from the JSON with transformers' defaults written
here (each from the transformers configuration class named in the comment), so the hot path
does not import transformers. A ``model_type`` not listed here but known to transformers is
parsed with ``AutoConfig`` (its defaults apply); one unknown to both falls back to the raw JSON
when it carries the standard decoder fields. tests/test_profile_autoconfig.py checks that this
table agrees with AutoConfig on every bundled config.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from advisor.errors import ConfigError

# model_type -> family-level facts. "defaults" are transformers' defaults for fields a config may omit.
KNOWN: dict[str, dict] = {
    "llama": {"defaults": {"attention_bias": False, "tie_word_embeddings": False}},  # LlamaConfig
    "mistral": {"defaults": {"tie_word_embeddings": False}},  # MistralConfig
    "qwen2": {"defaults": {"tie_word_embeddings": False}, "qkv_bias": True},  # Qwen2Config; Qwen2Attention has bias=True on q/k/v
    "qwen3": {"defaults": {"attention_bias": False, "tie_word_embeddings": False}, "qk_norm": True},  # Qwen3Config
    "mixtral": {"defaults": {"num_local_experts": 8, "num_experts_per_tok": 2, "tie_word_embeddings": False}},  # MixtralConfig
    "qwen2_moe": {"defaults": {"decoder_sparse_step": 1, "mlp_only_layers": [], "tie_word_embeddings": False}, "qkv_bias": True},
    "qwen3_moe": {"defaults": {"decoder_sparse_step": 1, "mlp_only_layers": [], "attention_bias": False, "tie_word_embeddings": False}, "qk_norm": True},
    "deepseek_v2": {"defaults": {"first_k_dense_replace": 0, "moe_layer_freq": 1, "n_shared_experts": None, "tie_word_embeddings": False}},
    "deepseek_v3": {"defaults": {"first_k_dense_replace": 3, "moe_layer_freq": 1, "n_shared_experts": 1, "num_nextn_predict_layers": 1, "tie_word_embeddings": False}},
    "gpt_oss": {"defaults": {"num_local_experts": 128, "num_experts_per_tok": 4, "attention_bias": True, "tie_word_embeddings": False, "sliding_window": 128}},
    "llama4_text": {"defaults": {"interleave_moe_layer_step": 1, "num_local_experts": 16, "num_experts_per_tok": 1, "tie_word_embeddings": False, "attention_bias": False}},
    "glm4_moe": {"defaults": {"first_k_dense_replace": 1, "n_shared_experts": 1, "num_nextn_predict_layers": 0, "attention_bias": False, "tie_word_embeddings": False}},
    "qwen3_next": {"defaults": {"decoder_sparse_step": 1, "mlp_only_layers": [], "full_attention_interval": 4, "tie_word_embeddings": False, "linear_conv_kernel_dim": 4}, "gated_attention": True},
}


@dataclass
class TextArch:
    """Architecture numbers of the text decoder."""

    model_type: str
    architecture: str
    hidden: int
    layers: int
    vocab: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    """Dense MLP intermediate size."""
    tie_embeddings: bool = False
    qkv_bias: bool = False
    o_bias: bool = False
    qk_norm: bool = False
    gated_attention: bool = False
    """Qwen3-Next: q_proj also produces an output gate (2× q width)."""
    # MLA
    mla: bool = False
    q_lora_rank: int | None = None
    kv_lora_rank: int = 0
    qk_nope_head_dim: int = 0
    qk_rope_head_dim: int = 0
    v_head_dim: int = 0
    # MoE
    experts: int = 0
    top_k: int = 0
    shared_experts: int = 0
    expert_inter: int = 0
    shared_inter: int = 0
    moe_layer_ids: list[int] = field(default_factory=list)
    expert_bias: bool = False
    router_bias: bool = False
    # attention layout
    layer_kinds: list[str] = field(default_factory=list)
    """Per layer: ``full``, ``sliding`` (KV capped at ``window``) or ``linear`` (no KV cache)."""
    window: int | None = None
    linear: dict = field(default_factory=dict)
    """Linear-attention (Gated DeltaNet) sizes for hybrid models."""
    sinks: bool = False
    mtp_layers: int = 0
    max_context: int = 0
    notes: list[str] = field(default_factory=list)


ATTENTION_FREE = ("mamba", "mamba2", "rwkv", "rwkv5", "rwkv6", "xlstm", "falcon_mamba")
"""model_types with no attention layers: the KV-cache, memory and step-cost models do not apply."""


MAX_LAYERS = 10_000
"""More decoder layers than this is a corrupt config (the largest served models have a few hundred)."""


def _req(cfg: dict, key: str, model_type: str) -> int:
    value = cfg.get(key)
    if value is None and key == "num_attention_heads" and model_type in ATTENTION_FREE:
        raise ConfigError(f"config.json ({model_type}) describes an attention-free model; the advisor's KV-cache, "
                          "memory and step-cost models assume attention layers, so it cannot plan this model")  # fmt: skip
    if value is None:
        raise ConfigError(f"config.json ({model_type}) is missing {key!r}, which the profile needs; is this a complete Hugging Face config?")
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ConfigError(f"config.json ({model_type}) has {key}={value!r}; expected a positive integer")
    if key == "num_hidden_layers" and value > MAX_LAYERS:
        raise ConfigError(f"config.json ({model_type}) has num_hidden_layers={value}; no served model has more than "
                          f"{MAX_LAYERS} layers (the profile lists each one)")  # fmt: skip
    return value


def text_config(raw: dict) -> tuple[dict, bool]:
    """The text decoder's config and whether the checkpoint is multimodal (nested ``text_config``)."""
    if isinstance(raw.get("text_config"), dict):
        return raw["text_config"], True
    return raw, False


def _autoconfig_dict(model_type: str, cfg: dict) -> dict | None:
    """Full config with transformers' defaults, or None when transformers does not know the type."""
    import os

    # transformers prints an advisory about PyTorch at import; the profile needs configs only.
    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    from transformers import CONFIG_MAPPING

    if model_type not in CONFIG_MAPPING:
        return None
    try:
        from huggingface_hub.errors import StrictDataclassFieldValidationError as strict_error
    except ImportError:  # older huggingface_hub: no strict config dataclasses
        strict_error = ValueError
    try:
        conf = CONFIG_MAPPING[model_type](**{k: v for k, v in cfg.items() if k != "model_type"})
    except (TypeError, ValueError, strict_error):
        # Strict config classes reject some real hub files (e.g. Llama-4's int attn_temperature_tuning
        # under transformers 5): the raw JSON is then the better source.
        return None
    full = conf.to_dict()
    if hasattr(conf, "head_dim") and conf.head_dim is not None:
        full["head_dim"] = conf.head_dim
    return full
