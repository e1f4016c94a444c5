"""Parameter counts, stored weight bytes and KV bytes per token from a TextArch.

Modules are enumerated with Hugging Face names (``model.layers.3.self_attn.q_proj``) so that the
quantization ignore lists of real checkpoints (exact names, ``model.layers.*`` globs,
compressed-tensors ``re:`` patterns) can be matched module by module.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass

from advisor.model.arch import TextArch
from advisor.model.schema import QuantInfo


@dataclass
class Module:
    name: str
    params: int
    linear: bool = True
    """A Linear layer a quantization method may quantize (embeddings, norms and routers are not)."""
    expert_fraction: float = 1.0
    """Share of these parameters a token uses (top_k / experts for routed experts)."""
    routed_expert: bool = False
    embedding: bool = False


def _attention(a: TextArch, p: str) -> list[Module]:
    h = a.hidden
    if a.mla:
        qk = a.qk_nope_head_dim + a.qk_rope_head_dim
        mods = []
        if a.q_lora_rank:
            mods += [Module(f"{p}.q_a_proj", h * a.q_lora_rank), Module(f"{p}.q_a_layernorm", a.q_lora_rank, linear=False),
                     Module(f"{p}.q_b_proj", a.q_lora_rank * a.heads * qk)]  # fmt: skip
        else:
            mods.append(Module(f"{p}.q_proj", h * a.heads * qk))
        return mods + [
            Module(f"{p}.kv_a_proj_with_mqa", h * (a.kv_lora_rank + a.qk_rope_head_dim)),
            Module(f"{p}.kv_a_layernorm", a.kv_lora_rank, linear=False),
            Module(f"{p}.kv_b_proj", a.kv_lora_rank * a.heads * (a.qk_nope_head_dim + a.v_head_dim)),
            Module(f"{p}.o_proj", a.heads * a.v_head_dim * h),
        ]
    q_out = a.heads * a.head_dim * (2 if a.gated_attention else 1)
    kv_out = a.kv_heads * a.head_dim
    bias = a.qkv_bias
    mods = [
        Module(f"{p}.q_proj", h * q_out + (q_out if bias else 0)),
        Module(f"{p}.k_proj", h * kv_out + (kv_out if bias else 0)),
        Module(f"{p}.v_proj", h * kv_out + (kv_out if bias else 0)),
        Module(f"{p}.o_proj", a.heads * a.head_dim * h + (h if a.o_bias else 0)),
    ]
    if a.qk_norm:
        mods.append(Module(f"{p}.qk_norm", 2 * a.head_dim, linear=False))
    if a.sinks:
        mods.append(Module(f"{p}.sinks", a.heads, linear=False))
    return mods


def _linear_attention(a: TextArch, p: str) -> list[Module]:
    # Qwen3-Next Gated DeltaNet (transformers modeling_qwen3_next.Qwen3NextGatedDeltaNet).
    lin, h = a.linear, a.hidden
    key_total = lin["key_heads"] * lin["key_dim"]
    value_total = lin["value_heads"] * lin["value_dim"]
    conv_dim = key_total * 2 + value_total
    return [
        Module(f"{p}.in_proj_qkvz", h * (key_total * 2 + value_total * 2)),
        Module(f"{p}.in_proj_ba", h * lin["value_heads"] * 2),
        Module(f"{p}.conv1d", conv_dim * lin["conv_kernel"], linear=False),
        Module(f"{p}.dt_A", 2 * lin["value_heads"] + lin["value_dim"], linear=False),
        Module(f"{p}.out_proj", value_total * h),
    ]


def _mlp(p: str, h: int, inter: int, bias: bool = False) -> list[Module]:
    return [
        Module(f"{p}.gate_proj", h * inter + (inter if bias else 0)),
        Module(f"{p}.up_proj", h * inter + (inter if bias else 0)),
        Module(f"{p}.down_proj", inter * h + (h if bias else 0)),
    ]


def enumerate_modules(a: TextArch) -> list[Module]:
    """Every weight of the text decoder (MTP layers excluded), with HF-style names."""
    h = a.hidden
    mods = [Module("model.embed_tokens", a.vocab * h, linear=False, embedding=True)]
    moe_ids = set(a.moe_layer_ids)
    for i in range(a.layers):
        p = f"model.layers.{i}"
        mods.append(Module(f"{p}.norms", 2 * h, linear=False))
        kind = a.layer_kinds[i] if a.layer_kinds else "full"
        mods += _linear_attention(a, f"{p}.linear_attn") if kind == "linear" else _attention(a, f"{p}.self_attn")
        if i in moe_ids:
            router = "mlp.router" if a.model_type == "gpt_oss" else "mlp.gate"
            mods.append(Module(f"{p}.{router}", h * a.experts + (a.experts if a.router_bias else 0), linear=False))
            per_expert = 3 * h * a.expert_inter + ((2 * a.expert_inter + h) if a.expert_bias else 0)
            mods.append(Module(f"{p}.mlp.experts", a.experts * per_expert, expert_fraction=a.top_k / a.experts, routed_expert=True))
            if a.shared_experts:
                mods += _mlp(f"{p}.mlp.shared_experts", h, a.shared_inter)
                if a.model_type in ("qwen2_moe", "qwen3_next"):
                    mods.append(Module(f"{p}.mlp.shared_expert_gate", h, linear=False))
        else:
            mods += _mlp(f"{p}.mlp", h, a.intermediate)
    mods.append(Module("model.norm", h, linear=False))
    if not a.tie_embeddings:
        mods.append(Module("lm_head", a.vocab * h))
    return mods


def _matches(name: str, patterns: list[str]) -> bool:
    for pat in patterns:
        if pat.startswith("re:"):
            if re.fullmatch(pat[3:], name) or re.match(pat[3:], name):
                return True
        elif name == pat or name.startswith(pat + ".") or fnmatch.fnmatchcase(name, pat) or fnmatch.fnmatchcase(name, pat + ".*"):
            return True
    return False


def _quantized(mod: Module, quant: QuantInfo) -> bool:
    if quant.method is None or not mod.linear:
        return False
    if mod.name == "lm_head" and quant.method in ("fp8", "mxfp4"):
        return False  # vLLM's ParallelLMHead stays unquantized for these methods
    names = [mod.name]
    if mod.routed_expert:  # ignore lists name experts one by one
        names += [f"{mod.name}.0", f"{mod.name}.0.gate_proj"]
    if quant.method == "mxfp4" and not mod.routed_expert:
        return False  # gpt-oss MXFP4 covers the MoE experts only
    return not any(_matches(n, quant.ignored) for n in names)


@dataclass
class Counts:
    total: int
    active: int
    embedding: int
    expert: int
    weight_bytes: int


def count(a: TextArch, quant: QuantInfo, dense_bytes: int) -> Counts:
    """Parameter counts and stored bytes (quantized modules at ``quant.weight_bits`` + scale overhead)."""
    total = active = embedding = expert = 0
    bits = 0.0
    scale_overhead = 8 / 32 if quant.method == "mxfp4" else 0.0  # one E8M0 scale per 32 weights
    for mod in enumerate_modules(a):
        total += mod.params
        if mod.embedding:
            embedding += mod.params
        else:
            active += round(mod.params * mod.expert_fraction)
        if mod.routed_expert:
            expert += mod.params
        if _quantized(mod, quant):
            bits += mod.params * (quant.weight_bits + scale_overhead)
        else:
            bits += mod.params * dense_bytes * 8
    if a.tie_embeddings:
        active += embedding  # the tied table is the LM head: used by every token
    return Counts(total=total, active=active, embedding=embedding, expert=expert, weight_bytes=int(bits // 8))


def kv_bytes_per_token(a: TextArch, kv_dtype_bytes: int = 2) -> tuple[int, int, int]:
    """(all attention layers, full-attention layers only, sliding layers) bytes per token.

    MLA caches the compressed latent plus the rope key once per layer (vLLM MLA backends:
    kv_lora_rank + qk_rope_head_dim per token); GQA/MHA cache K and V for every KV head.
    Linear-attention layers keep a fixed-size state instead of a per-token cache.
    """
    per_layer = (a.kv_lora_rank + a.qk_rope_head_dim) if a.mla else 2 * a.kv_heads * a.head_dim
    per_layer *= kv_dtype_bytes
    kinds = a.layer_kinds or ["full"] * a.layers
    full = sum(1 for k in kinds if k == "full")
    sliding = sum(1 for k in kinds if k == "sliding")
    return per_layer * (full + sliding), per_layer * full, sliding
