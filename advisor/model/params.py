"""Parameter counts, stored weight bytes and KV bytes per token from a TextArch.

Modules are enumerated with Hugging Face names (``model.layers.3.self_attn.q_proj``) so that the
quantization ignore lists of real checkpoints (exact names, ``model.layers.*`` globs,
compressed-tensors ``re:`` patterns) can be matched module by module.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from functools import lru_cache

from advisor.model.arch import TextArch
from advisor.model.quant_weights import linear_bytes, lm_head_quantized
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
    shapes: tuple[tuple[int, int, int], ...] = ()
    """(fan_in, fan_out, copies) of the Linear weights in ``params`` (bias excluded): what a quantized
    checkpoint packs and scales per matrix (advisor.model.quant_weights)."""


def _lin(name: str, fan_in: int, fan_out: int, bias: bool = False, copies: int = 1) -> Module:
    """A Linear of ``copies`` x [fan_in, fan_out] weights (plus a bias of fan_out each)."""
    return Module(name, copies * (fan_in * fan_out + (fan_out if bias else 0)), shapes=((fan_in, fan_out, copies),))


def _attention(a: TextArch, p: str) -> list[Module]:
    h = a.hidden
    if a.mla:
        qk = a.qk_nope_head_dim + a.qk_rope_head_dim
        mods = []
        if a.q_lora_rank:
            mods += [_lin(f"{p}.q_a_proj", h, a.q_lora_rank), Module(f"{p}.q_a_layernorm", a.q_lora_rank, linear=False),
                     _lin(f"{p}.q_b_proj", a.q_lora_rank, a.heads * qk)]  # fmt: skip
        else:
            mods.append(_lin(f"{p}.q_proj", h, a.heads * qk))
        return mods + [
            _lin(f"{p}.kv_a_proj_with_mqa", h, a.kv_lora_rank + a.qk_rope_head_dim),
            Module(f"{p}.kv_a_layernorm", a.kv_lora_rank, linear=False),
            _lin(f"{p}.kv_b_proj", a.kv_lora_rank, a.heads * (a.qk_nope_head_dim + a.v_head_dim)),
            _lin(f"{p}.o_proj", a.heads * a.v_head_dim, h),
        ]
    q_out = a.heads * a.head_dim * (2 if a.gated_attention else 1)
    kv_out = a.kv_heads * a.head_dim
    bias = a.qkv_bias
    mods = [
        _lin(f"{p}.q_proj", h, q_out, bias),
        _lin(f"{p}.k_proj", h, kv_out, bias),
        _lin(f"{p}.v_proj", h, kv_out, bias),
        _lin(f"{p}.o_proj", a.heads * a.head_dim, h, a.o_bias),
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
        _lin(f"{p}.in_proj_qkvz", h, key_total * 2 + value_total * 2),
        _lin(f"{p}.in_proj_ba", h, lin["value_heads"] * 2),
        Module(f"{p}.conv1d", conv_dim * lin["conv_kernel"], linear=False),
        Module(f"{p}.dt_A", 2 * lin["value_heads"] + lin["value_dim"], linear=False),
        _lin(f"{p}.out_proj", value_total, h),
    ]


def _mlp(p: str, h: int, inter: int, bias: bool = False) -> list[Module]:
    return [
        _lin(f"{p}.gate_proj", h, inter, bias),
        _lin(f"{p}.up_proj", h, inter, bias),
        _lin(f"{p}.down_proj", inter, h, bias),
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
            mods.append(Module(f"{p}.mlp.experts", a.experts * per_expert, expert_fraction=a.top_k / a.experts, routed_expert=True,
                               shapes=((h, a.expert_inter, 2 * a.experts), (a.expert_inter, h, a.experts))))
            if a.shared_experts:
                mods += _mlp(f"{p}.mlp.shared_experts", h, a.shared_inter)
                if a.model_type in ("qwen2_moe", "qwen3_next"):
                    mods.append(Module(f"{p}.mlp.shared_expert_gate", h, linear=False))
        else:
            mods += _mlp(f"{p}.mlp", h, a.intermediate)
    mods.append(Module("model.norm", h, linear=False))
    if not a.tie_embeddings:
        mods.append(_lin("lm_head", h, a.vocab))
    return mods


def _matches(name: str, patterns: list[str]) -> bool:
    return _matches_cached(name, tuple(patterns))


@lru_cache(maxsize=1 << 16)
def _matches_cached(name: str, patterns: tuple[str, ...]) -> bool:
    """Pure, so cached: the same module names are matched against the same ignore list for every profile built."""
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
    if mod.name == "lm_head" and not lm_head_quantized(quant):
        return False  # advisor.model.quant_weights.lm_head_quantized: kept 16-bit by the method
    names = [mod.name]
    if mod.routed_expert:  # ignore lists name experts one by one
        names += [f"{mod.name}.0", f"{mod.name}.0.gate_proj"]
    if quant.method == "mxfp4" and not mod.routed_expert:
        return False  # gpt-oss MXFP4 covers the MoE experts only
    return not any(_matches(n, quant.ignored) for n in names)


def _quantized_bits(mod: Module, quant: QuantInfo, dense_bytes: int, scale_overhead: float) -> float:
    """Stored bits of a quantized module: per-matrix checkpoint layout where a rule exists
    (advisor.model.quant_weights.linear_bytes; biases stay in the dense dtype), else bits per weight."""
    sizes = [linear_bytes(i, o, quant) for i, o, _ in mod.shapes]
    if not mod.shapes or any(s is None for s in sizes):
        return mod.params * (quant.weight_bits + scale_overhead)
    weights = sum(i * o * n for i, o, n in mod.shapes)
    stored = sum(s * n for s, (_, _, n) in zip(sizes, mod.shapes))
    return stored * 8 + max(0, mod.params - weights) * dense_bytes * 8


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
            bits += _quantized_bits(mod, quant, dense_bytes, scale_overhead)
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
