"""ModelProfile: what the advisor knows about a model, computed from its config.json.

Field names of the ``--json`` contract (``id``, ``arch``, ``params_total_b``, ``params_active_b``,
``weights_dtype``, ``quant_method``, ``kv_bytes_per_token``, ``num_layers``, ``experts``,
``experts_per_token``, ``family``) are stable: scripts read them.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Family = Literal["instruct", "reasoning", "reasoning-distill", "base"]


class QuantInfo(BaseModel):
    """How the checkpoint's weights are stored."""

    model_config = ConfigDict(extra="forbid")

    method: str | None = None
    """``quantization_config.quant_method`` (fp8, fbgemm_fp8, compressed-tensors, mxfp4…) or None."""
    fmt: str | None = None
    """Finer format when known: e.g. ``float-quantized`` (compressed-tensors), ``e4m3``."""
    weight_bits: int = 16
    """Bits per quantized weight (8 for FP8, 4 for MXFP4, 16 unquantized)."""
    block_size: list[int] | None = None
    """Block-wise scaling shape (``weight_block_size``), e.g. [128, 128]."""
    ignored: list[str] = Field(default_factory=list)
    """Modules left unquantized (``ignore`` / ``modules_to_not_convert`` / ``ignored_layers``)."""
    activation_scheme: str | None = None
    """``dynamic`` or ``static`` where the config says."""
    group_size: int | None = None
    """Weights sharing one scale (and zero point) along the input dimension; -1 = one per output channel
    (GPTQ/AWQ ``group_size``/``q_group_size``, compressed-tensors ``group_size``/``strategy: channel``)."""
    desc_act: bool = False
    """Activation-order GPTQ (``desc_act``; compressed-tensors ``actorder: group``): a ``g_idx`` per layer."""
    symmetric: bool = True
    """No zero points stored where the format allows it (compressed-tensors ``symmetric``)."""
    lm_head: bool = False
    """GPTQ/AWQ ``lm_head``: the LM head is quantized too (default False: it stays 16-bit)."""
    double_quant: bool = False
    """bitsandbytes ``bnb_4bit_use_double_quant``: the per-block absmax is itself quantized to 8 bits."""


class MlaDims(BaseModel):
    """Multi-head latent attention widths (DeepSeek-V2/V3 style), from config.json."""

    model_config = ConfigDict(extra="forbid")

    q_lora_rank: int | None = None
    """Rank of the query down-projection (None: queries are projected directly)."""
    kv_lora_rank: int = Field(ge=1)
    """Width of the compressed KV latent that the cache stores per token and layer."""
    qk_nope_head_dim: int = Field(ge=0)
    """Per-head query/key width without rotary position (up-projected from the latent)."""
    qk_rope_head_dim: int = Field(ge=0)
    """Per-head query/key width with rotary position (the rope key is cached beside the latent)."""
    v_head_dim: int = Field(ge=1)
    """Per-head value width (up-projected from the latent)."""


class ModelProfile(BaseModel):
    """Everything the rules, the memory planner and the predictor need about one model."""

    model_config = ConfigDict(extra="forbid")

    id: str
    """The model as the user named it (HF id or path)."""
    source: str
    """Where config.json was found (bundled catalog, local path, HF cache, hub)."""
    model_type: str
    """``model_type`` of the (text) config, e.g. ``llama``, ``deepseek_v3``."""
    architecture: str
    """First entry of ``architectures``, e.g. ``LlamaForCausalLM``."""
    arch_family: str
    """Architecture family: llama, qwen2, qwen3_moe, deepseek_v3, mixtral, gpt_oss, llama4, glm4_moe, qwen3_next…"""
    arch: Literal["dense", "moe"]
    """Dense or mixture-of-experts."""
    num_layers: int
    """Decoder layers (excludes MTP / next-n prediction layers)."""
    hidden_size: int
    vocab_size: int
    num_attention_heads: int
    num_kv_heads: int
    """KV heads (== attention heads for MHA; 1 latent for MLA)."""
    head_dim: int
    attention: Literal["mha", "gqa", "mqa", "mla"]
    mla: MlaDims | None = None
    """MLA widths when ``attention == "mla"``."""
    experts: int = 0
    """Routed experts per MoE layer (0 for dense)."""
    experts_per_token: int = 0
    """Routed experts each token activates (top-k)."""
    shared_experts: int = 0
    """Always-on shared experts per MoE layer."""
    moe_layers: int = 0
    """Layers with an MoE block."""
    dense_layers: list[int] = Field(default_factory=list)
    """Indices of layers with a dense MLP in an MoE model (e.g. DeepSeek-V3's first three)."""
    expert_intermediate_size: int = 0
    """Intermediate size of one routed expert."""
    intermediate_size: int = 0
    """Width of the dense MLP (``intermediate_size``; 0 when every layer is MoE)."""
    shared_expert_intermediate_size: int = 0
    """Total width of the shared expert(s) of an MoE layer (0 without)."""
    linear_attention_layers: int = 0
    """Layers with linear attention / state-space mixing (hybrid models such as Qwen3-Next)."""
    mtp_layers: int = 0
    """Multi-token-prediction layers shipped in the checkpoint (not counted in parameters)."""
    params_total_b: float
    """Total parameters, billions (main model; excludes MTP layers and vision towers)."""
    params_active_b: float
    """Parameters used per token, billions, excluding the input embedding table."""
    params_embedding_b: float
    """Input embedding table, billions."""
    expert_params_b: float = 0.0
    """Parameters in routed experts, billions (all experts, all layers)."""
    weights_dtype: str
    """Storage dtype of the bulk of the weights: bf16, fp16, fp32, fp8, mxfp4."""
    quant_method: str | None = None
    """Same as ``quant.method`` (kept flat for scripts)."""
    quant: QuantInfo = Field(default_factory=QuantInfo)
    weight_bytes: int
    """Bytes of all weights as stored (quantized parts at their width, ignored modules at 16 bit)."""
    kv_bytes_per_token: int
    """KV-cache bytes one token adds over all layers at 16-bit KV (MLA: latent + rope key)."""
    kv_bytes_per_token_full: int
    """Part of ``kv_bytes_per_token`` from full-attention layers (grows with context)."""
    sliding_window: int | None = None
    """Window of sliding-window layers, if any."""
    sliding_window_layers: int = 0
    """Layers using the sliding window (their KV stops growing at ``sliding_window`` tokens)."""
    max_context: int
    """``max_position_embeddings`` (or the rope-scaled context when stated)."""
    family: Family
    """instruct / reasoning / reasoning-distill / base, from the id and config."""
    tie_word_embeddings: bool = False
    multimodal: bool = False
    """The checkpoint carries a vision/audio tower (only the text model is profiled)."""
    notes: list[str] = Field(default_factory=list)
    """What was assumed or defaulted while profiling."""

    def inspect_json(self) -> dict:
        """The stable ``--json`` object of ``advisor inspect`` (also ``recommend``'s ``model``)."""
        return self.model_dump(mode="json")
