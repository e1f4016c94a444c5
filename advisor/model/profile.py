"""ModelProfile from a resolved config (pure: takes dicts, returns the profile)."""

from __future__ import annotations

import re

from advisor.errors import ConfigError
from advisor.model.layout import normalise
from advisor.model.params import count, kv_bytes_per_token
from advisor.model.schema import MlaDims, ModelProfile, QuantInfo

_DTYPES = {"bfloat16": ("bf16", 2), "float16": ("fp16", 2), "half": ("fp16", 2), "float32": ("fp32", 4), "float": ("fp32", 4)}
_FP8_METHODS = {"fp8", "fbgemm_fp8", "modelopt", "ptpc_fp8"}


def _group(value: object, default: int) -> int:
    """A group size from a quantization config: a positive int, or -1 (one group per output channel)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not -(2**31) < value < 2**31:
        return default  # also NaN and infinities
    return int(value) if int(value) > 0 else -1


def parse_quant(raw: dict) -> QuantInfo:
    """Read ``quantization_config`` (top level or nested in text_config)."""
    qc = raw.get("quantization_config") or (raw.get("text_config") or {}).get("quantization_config")
    if not qc:
        return QuantInfo()
    if not isinstance(qc, dict):
        raise ConfigError(f"quantization_config must be an object, found {type(qc).__name__}")
    method = str(qc.get("quant_method") or "unknown")
    ignored = list(qc.get("ignore") or qc.get("modules_to_not_convert") or qc.get("ignored_layers") or [])
    info = QuantInfo(method=method, ignored=ignored, activation_scheme=qc.get("activation_scheme"))
    if method in _FP8_METHODS:
        info.weight_bits = 8
        info.fmt = qc.get("fmt") or "e4m3"
        info.block_size = qc.get("weight_block_size")
    elif method == "compressed-tensors":
        info.fmt = qc.get("format")
        groups = qc.get("config_groups") or {}
        weights = next((g.get("weights") for g in groups.values() if isinstance(g, dict) and g.get("weights")), None) or {}
        info.weight_bits = int(weights.get("num_bits") or 16)
        if weights.get("type") == "float" and info.weight_bits == 8:
            info.fmt = f"{info.fmt or 'float-quantized'} (fp8)"
        if weights.get("block_structure"):
            info.block_size = list(weights["block_structure"])
        if weights.get("type", "int") == "int" and info.weight_bits < 8:
            info.group_size = _group(weights.get("group_size"), -1) if weights.get("strategy") == "group" else -1
            info.symmetric = bool(weights.get("symmetric", True))
            info.desc_act = str(weights.get("actorder") or "").lower() == "group"
    elif method == "mxfp4":
        info.weight_bits = 4
        info.fmt = "mxfp4 (e2m1, e8m0 scales per 32)"
    elif method == "bitsandbytes":
        # transformers BitsAndBytesConfig: load_in_8bit / load_in_4bit, no "bits" key.
        info.weight_bits = 8 if qc.get("load_in_8bit") else int(qc.get("bits") or 4)
        info.double_quant = bool(qc.get("bnb_4bit_use_double_quant"))
        info.ignored += [m for m in (qc.get("llm_int8_skip_modules") or []) if m not in info.ignored]
    elif method in ("awq", "gptq", "awq_marlin", "gptq_marlin"):
        info.weight_bits = int(qc.get("bits") or qc.get("w_bit") or 4)
        info.group_size = _group(qc.get("group_size", qc.get("q_group_size")), 128)
        info.desc_act = bool(qc.get("desc_act"))
        info.symmetric = bool(qc.get("sym", True)) and not qc.get("zero_point")
        info.lm_head = bool(qc.get("lm_head"))
    return info


def weights_dtype(raw: dict, quant: QuantInfo) -> tuple[str, int]:
    """(name of the bulk weight dtype, bytes per unquantized weight)."""
    text = raw.get("text_config") or {}
    name = str(raw.get("torch_dtype") or raw.get("dtype") or text.get("torch_dtype") or text.get("dtype") or "bfloat16")
    key = "torch_dtype" if (raw.get("torch_dtype") or text.get("torch_dtype")) else "dtype"
    if name.replace("torch.", "") not in _DTYPES:
        raise ConfigError(f"config.json has {key}={name!r}, not a dtype vLLM loads weights in; expected bfloat16, "
                          "float16 or float32 (quantized checkpoints say so in quantization_config)")  # fmt: skip
    short, nbytes = _DTYPES[name.replace("torch.", "")]
    if short == "fp32":
        # vLLM's dtype=auto downcasts float32 checkpoints (vllm/config/model.py _resolve_auto_dtype, "Downcast
        # for float32 models"): to bfloat16 on Ampere and later, float16 before; 2 bytes either way.
        short, nbytes = "bf16", 2
    if quant.method in _FP8_METHODS or (quant.method == "compressed-tensors" and quant.weight_bits == 8 and "fp8" in (quant.fmt or "")):
        return "fp8", nbytes
    if quant.method == "mxfp4":
        return "mxfp4", nbytes
    if quant.method and quant.weight_bits < 16:
        return f"int{quant.weight_bits}", nbytes
    return short, nbytes


_REASONING = re.compile(r"(^|[-_/])(r1|qwq|reasoning|thinking|magistral|gpt-oss|o1)([-_.]|$)", re.I)
_INSTRUCT = re.compile(r"(instruct|chat|[-_]it$|[-_]it[-_]|sft|dpo)", re.I)
_BASE = re.compile(r"([-_]base$|[-_]base[-_]|[-_]pt$)", re.I)


def infer_family(model_id: str, card_family: str | None) -> tuple[str, str | None]:
    """(family, note). The catalog card wins; otherwise the id decides."""
    if card_family:
        return card_family, None
    name = model_id.rstrip("/").split("/")[-1] if "/" in model_id else model_id
    if "distill" in name.lower():
        return "reasoning-distill", None
    if _REASONING.search(name) or _REASONING.search(model_id):
        return "reasoning", None
    if _INSTRUCT.search(name):
        return "instruct", None
    if _BASE.search(name) or re.search(r"\d+(\.\d+)?[BbMm]$", name):
        return "base", None
    return "instruct", f"family not evident from {model_id!r}: assumed instruct"


def build_profile(model_id: str, raw: dict, *, source: str, card: dict | None = None) -> ModelProfile:
    """Compute the profile of ``raw`` (a parsed config.json)."""
    card = card or {}
    a = normalise(raw)
    quant = parse_quant(raw)
    dtype, dense_bytes = weights_dtype(raw, quant)
    stored = str(raw.get("torch_dtype") or raw.get("dtype") or (raw.get("text_config") or {}).get("torch_dtype") or "")
    c = count(a, quant, dense_bytes)
    kv_all, kv_full, sliding_layers = kv_bytes_per_token(a)
    family, family_note = infer_family(model_id, card.get("family"))
    heads, kv = a.heads, a.kv_heads
    attention = "mla" if a.mla else ("mha" if kv == heads else ("mqa" if kv == 1 else "gqa"))
    moe_ids = set(a.moe_layer_ids)
    notes = list(a.notes) + ([family_note] if family_note else [])
    if stored.replace("torch.", "") in ("float32", "float"):
        notes.append("checkpoint stored in float32: vLLM's dtype=auto loads it as bfloat16 (float16 before Ampere), "
                     "so weights are planned at 2 bytes per parameter (pass --dtype float32 to vLLM to keep 4)")
    if a.mtp_layers:
        notes.append(f"{a.mtp_layers} MTP layer(s) in the checkpoint are not counted")
    multimodal = isinstance(raw.get("text_config"), dict) or any(k in raw for k in ("vision_config", "audio_config"))
    if multimodal:
        notes.append("multimodal checkpoint: only the text decoder is profiled")
    return ModelProfile(
        id=model_id,
        source=source,
        model_type=a.model_type,
        architecture=a.architecture,
        arch_family=a.model_type.removesuffix("_text"),
        arch="moe" if a.experts else "dense",
        num_layers=a.layers,
        hidden_size=a.hidden,
        vocab_size=a.vocab,
        num_attention_heads=heads,
        num_kv_heads=1 if a.mla else kv,
        head_dim=a.head_dim,
        attention=attention,
        mla=MlaDims(q_lora_rank=a.q_lora_rank, kv_lora_rank=a.kv_lora_rank, qk_nope_head_dim=a.qk_nope_head_dim,
                    qk_rope_head_dim=a.qk_rope_head_dim, v_head_dim=a.v_head_dim) if a.mla else None,  # fmt: skip
        experts=a.experts,
        experts_per_token=a.top_k,
        shared_experts=a.shared_experts,
        moe_layers=len(moe_ids),
        dense_layers=[i for i in range(a.layers) if a.experts and i not in moe_ids],
        expert_intermediate_size=a.expert_inter,
        intermediate_size=a.intermediate if (not a.experts or len(moe_ids) < a.layers) else 0,
        shared_expert_intermediate_size=a.shared_inter if a.shared_experts else 0,
        linear_attention_layers=sum(1 for k in a.layer_kinds if k == "linear"),
        mtp_layers=a.mtp_layers,
        params_total_b=round(c.total / 1e9, 3),
        params_active_b=round(c.active / 1e9, 3),
        params_embedding_b=round(c.embedding / 1e9, 3),
        expert_params_b=round(c.expert / 1e9, 3),
        weights_dtype=dtype,
        quant_method=quant.method,
        quant=quant,
        weight_bytes=c.weight_bytes,
        kv_bytes_per_token=kv_all,
        kv_bytes_per_token_full=kv_full,
        sliding_window=a.window,
        sliding_window_layers=sliding_layers,
        max_context=a.max_context,
        family=family,
        tie_word_embeddings=a.tie_embeddings,
        multimodal=multimodal,
        notes=notes,
    )
