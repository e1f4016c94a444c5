"""Raw config.json -> TextArch (:func:`normalise`): defaults from advisor.model.arch, then the family-specific
reading of the text config."""

from __future__ import annotations

from advisor.errors import ConfigError
from advisor.model.arch import KNOWN, TextArch, _autoconfig_dict, _req, text_config


def _layer_kinds(mt: str, cfg: dict, layers: int) -> tuple[list[str], int | None]:
    types = cfg.get("layer_types")
    if isinstance(types, list) and len(types) == layers:
        kinds = []
        for t in types:
            if t in ("linear_attention", "mamba"):
                kinds.append("linear")
            elif t in ("sliding_attention", "chunked_attention"):
                kinds.append("sliding")
            else:
                kinds.append("full")
        window = cfg.get("sliding_window") or cfg.get("attention_chunk_size")
        return kinds, window if "sliding" in kinds else None
    if mt == "qwen3_next":
        interval = cfg.get("full_attention_interval", 4)
        return ["full" if (i + 1) % interval == 0 else "linear" for i in range(layers)], None
    if mt == "llama4_text" and cfg.get("attention_chunk_size"):
        # Llama4TextConfig.no_rope_layers: 1 = RoPE layer with chunked (local) attention, 0 = global NoPE layer.
        no_rope = cfg.get("no_rope_layers") or [int((i + 1) % 4 != 0) for i in range(layers)]
        return ["sliding" if no_rope[i] else "full" for i in range(layers)], cfg["attention_chunk_size"]
    if cfg.get("use_sliding_window") and cfg.get("sliding_window"):
        max_window_layers = cfg.get("max_window_layers", layers)
        return ["full" if i >= max_window_layers else "sliding" for i in range(layers)], cfg["sliding_window"]
    if mt == "mistral" and cfg.get("sliding_window"):
        return ["sliding"] * layers, cfg["sliding_window"]
    return ["full"] * layers, None


def _moe(mt: str, cfg: dict, a: TextArch) -> None:
    layers = a.layers
    if mt == "mixtral" or mt == "gpt_oss":
        a.experts = cfg.get("num_local_experts") or 0
        a.top_k = cfg.get("num_experts_per_tok") or cfg.get("experts_per_token") or 0
        a.expert_inter = a.intermediate
        a.moe_layer_ids = list(range(layers))
        if mt == "gpt_oss":
            a.expert_bias = a.router_bias = True
    elif mt in ("qwen2_moe", "qwen3_moe", "qwen3_next"):
        # transformers 5 maps num_experts to num_local_experts for these configs.
        a.experts = cfg.get("num_experts") or cfg.get("num_local_experts") or 0
        a.top_k = cfg.get("num_experts_per_tok") or 0
        a.expert_inter = cfg.get("moe_intermediate_size") or 0
        shared = cfg.get("shared_expert_intermediate_size") or 0
        a.shared_experts, a.shared_inter = (1, shared) if shared else (0, 0)
        step = cfg.get("decoder_sparse_step", 1) or 1
        mlp_only = set(cfg.get("mlp_only_layers") or [])
        a.moe_layer_ids = [i for i in range(layers) if i not in mlp_only and a.experts > 0 and (i + 1) % step == 0]
    elif mt in ("deepseek_v2", "deepseek_v3", "glm4_moe", "kimi_k2"):
        a.experts = cfg.get("n_routed_experts") or 0
        a.top_k = cfg.get("num_experts_per_tok") or 0
        a.expert_inter = cfg.get("moe_intermediate_size") or 0
        a.shared_experts = cfg.get("n_shared_experts") or 0
        a.shared_inter = a.expert_inter * a.shared_experts
        a.shared_experts = 1 if a.shared_experts else 0
        first_dense = cfg.get("first_k_dense_replace", 0) or 0
        freq = cfg.get("moe_layer_freq", 1) or 1
        a.moe_layer_ids = [i for i in range(layers) if a.experts and i >= first_dense and i % freq == 0]
        a.mtp_layers = cfg.get("num_nextn_predict_layers", 0) or 0
    elif mt == "llama4_text":
        a.experts = cfg.get("num_local_experts") or 0
        a.top_k = cfg.get("num_experts_per_tok") or 1
        a.expert_inter = cfg.get("intermediate_size") or 0
        a.shared_experts, a.shared_inter = 1, a.expert_inter  # Llama4TextMoe: shared_expert with intermediate_size
        a.intermediate = cfg.get("intermediate_size_mlp") or a.intermediate
        moe_layers = cfg.get("moe_layers")
        step = cfg.get("interleave_moe_layer_step", 1) or 1
        a.moe_layer_ids = list(moe_layers) if moe_layers else [i for i in range(step - 1, layers, step)]
    if a.experts and not a.top_k:
        raise ConfigError(f"config.json ({mt}) has {a.experts} experts but no num_experts_per_tok")


_COUNTS_POSITIVE = ("num_key_value_heads", "head_dim", "max_position_embeddings", "kv_lora_rank", "q_lora_rank",
                    "sliding_window", "v_head_dim")
"""Optional config fields that, when set, must be a positive integer."""
_COUNTS_NON_NEGATIVE = ("intermediate_size", "moe_intermediate_size", "intermediate_size_mlp", "num_local_experts",
                        "num_experts", "n_routed_experts", "num_experts_per_tok", "experts_per_token", "n_shared_experts",
                        "shared_expert_intermediate_size", "first_k_dense_replace", "num_nextn_predict_layers",
                        "qk_nope_head_dim", "qk_rope_head_dim")
"""Optional config fields that, when set, must be an integer >= 0."""


def _check_counts(cfg: dict, mt: str) -> None:
    """Impossible values are a ConfigError naming the field (never read as a default)."""
    for key in _COUNTS_POSITIVE + _COUNTS_NON_NEGATIVE:
        value = cfg.get(key)
        if value is None:
            continue
        low = 1 if key in _COUNTS_POSITIVE else 0
        if not isinstance(value, int) or isinstance(value, bool) or value < low:
            want = "a positive integer" if low else "an integer >= 0"
            raise ConfigError(f"config.json ({mt}) has {key}={value!r}; expected {want} (or leave the field out)")


def _check_layout(mt: str, a: TextArch) -> None:
    if not a.mla:
        if a.kv_heads > a.heads:
            raise ConfigError(f"config.json ({mt}) has num_key_value_heads={a.kv_heads} > num_attention_heads={a.heads}; "
                              "a KV head serves one or more query heads, so it must be <= num_attention_heads")  # fmt: skip
        if a.heads % a.kv_heads:
            raise ConfigError(f"config.json ({mt}) has num_attention_heads={a.heads} not divisible by "
                              f"num_key_value_heads={a.kv_heads}; grouped-query attention needs equal groups")  # fmt: skip
    if a.top_k and not a.experts:
        raise ConfigError(f"config.json ({mt}) routes each token to num_experts_per_tok={a.top_k} experts but sets "
                          "no experts (num_local_experts / num_experts / n_routed_experts is 0 or null)")  # fmt: skip
    if a.experts and a.top_k > a.experts:
        raise ConfigError(f"config.json ({mt}) routes each token to num_experts_per_tok={a.top_k} experts but has only "
                          f"{a.experts}; num_experts_per_tok must be <= the expert count")  # fmt: skip


def build_arch(mt: str, cfg: dict, raw: dict, notes: list[str]) -> TextArch:
    """Fill a TextArch for model_type ``mt`` from the (defaults-filled) text config ``cfg``."""
    _check_counts(cfg, mt)
    hidden = _req(cfg, "hidden_size", mt)
    layers = _req(cfg, "num_hidden_layers", mt)
    vocab = _req(cfg, "vocab_size", mt)
    heads = _req(cfg, "num_attention_heads", mt)
    kv_heads = cfg.get("num_key_value_heads") or heads
    head_dim = cfg.get("head_dim") or hidden // heads
    intermediate = cfg.get("intermediate_size") or 0
    archs = raw.get("architectures") or cfg.get("architectures") or [mt]
    family = KNOWN.get(mt, {})
    a = TextArch(
        model_type=mt,
        architecture=str(archs[0]),
        hidden=hidden,
        layers=layers,
        vocab=vocab,
        heads=heads,
        kv_heads=kv_heads,
        head_dim=head_dim,
        intermediate=intermediate,
        tie_embeddings=bool(raw.get("tie_word_embeddings", cfg.get("tie_word_embeddings", False))),
        qkv_bias=bool(family.get("qkv_bias") or cfg.get("attention_bias") or cfg.get("qkv_bias")),
        o_bias=bool(cfg.get("attention_bias")) and mt not in ("qwen2", "glm4_moe"),
        qk_norm=bool(family.get("qk_norm") or cfg.get("use_qk_norm")),
        gated_attention=bool(family.get("gated_attention")),
        notes=notes,
    )
    if cfg.get("kv_lora_rank"):
        a.mla = True
        a.q_lora_rank = cfg.get("q_lora_rank")
        a.kv_lora_rank = cfg["kv_lora_rank"]
        a.qk_nope_head_dim = cfg.get("qk_nope_head_dim") or 128
        a.qk_rope_head_dim = cfg.get("qk_rope_head_dim") or 64
        a.v_head_dim = cfg.get("v_head_dim") or 128
        a.head_dim = a.qk_nope_head_dim + a.qk_rope_head_dim
    if mt == "gpt_oss":
        a.sinks = True
    _moe(mt, cfg, a)
    _check_layout(mt, a)
    a.layer_kinds, a.window = _layer_kinds(mt, cfg, layers)
    if "linear" in a.layer_kinds:
        a.linear = {
            "key_heads": cfg.get("linear_num_key_heads", 16),
            "value_heads": cfg.get("linear_num_value_heads", 32),
            "key_dim": cfg.get("linear_key_head_dim", 128),
            "value_dim": cfg.get("linear_value_head_dim", 128),
            "conv_kernel": cfg.get("linear_conv_kernel_dim", 4),
        }
    if not a.experts and not intermediate:
        raise ConfigError(f"config.json ({mt}) is missing 'intermediate_size' for its MLP")
    rope = cfg.get("rope_scaling") or {}
    a.max_context = int(cfg.get("max_position_embeddings") or 0)
    if not a.max_context and isinstance(rope, dict) and rope.get("original_max_position_embeddings"):
        a.max_context = int(rope["original_max_position_embeddings"] * rope.get("factor", 1))
    if not a.max_context:
        a.max_context = 4096
        notes.append("no max_position_embeddings: assumed 4096")
    return a


def normalise(raw: dict) -> TextArch:
    """Raw config.json -> TextArch. Raises ConfigError with the fix on anything unusable."""
    cfg, _ = text_config(raw)
    model_type = cfg.get("model_type") or raw.get("model_type")
    if not model_type or not isinstance(model_type, str):
        raise ConfigError("config.json has no 'model_type'; is this a Hugging Face transformers config?")
    notes: list[str] = []
    if model_type in KNOWN:
        cfg = {**KNOWN[model_type]["defaults"], **cfg}
    else:
        full = _autoconfig_dict(model_type, cfg)
        if full is not None:
            cfg = full
            notes.append(f"model_type {model_type!r} parsed with transformers AutoConfig")
        elif all(k in cfg for k in ("hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size")):
            notes.append(f"model_type {model_type!r} is unknown to transformers and advisor: profiled from raw JSON as a plain decoder")
        else:
            raise ConfigError(
                f"unknown model_type {model_type!r} (not known to transformers or advisor) and the config lacks "
                "hidden_size/num_hidden_layers/num_attention_heads/vocab_size; upgrade transformers or pass a standard config"
            )
    return build_arch(model_type, cfg, raw, notes)
