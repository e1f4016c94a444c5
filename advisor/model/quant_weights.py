"""Bytes a weight-quantized checkpoint holds per Linear layer, per quantization method (pure functions).

Each rule names the code that defines the stored tensors. vLLM paths are those of vLLM 0.26
(``vllm/model_executor/layers/quantization/``); the tensors vLLM allocates are the ones it loads
from the checkpoint, name for name.

Check (tests/test_quant_weights.py): hugging-quants/Meta-Llama-3.1-8B-Instruct-GPTQ-INT4 is
4.97 GB + 764 MB of safetensors and hugging-quants/Meta-Llama-3.1-8B-Instruct-AWQ-INT4
4.68 GB + 1.05 GB (Hugging Face file listings, decimal GB): ~5.73e9 bytes each, where the bits
alone (every Linear, LM head included, at 4 bits) give 4.80e9.
"""

from __future__ import annotations

import math

from advisor.model.schema import QuantInfo

GROUP_METHODS = ("gptq", "gptq_marlin", "awq", "awq_marlin")
"""Methods whose checkpoints hold packed int32 weights, per-group fp16 scales and packed zero points."""

SCALE_BYTES = 2
"""GPTQ/AWQ ``scales`` are float16 and compressed-tensors ``weight_scale`` is the model dtype (vLLM
allocates both in ``params_dtype``): 2 bytes."""

BNB_BLOCK = 64
"""bitsandbytes ``quantize_4bit`` default ``blocksize=64``: one absmax per 64 weights."""
BNB_NESTED_BLOCK = 256
"""bitsandbytes double quantization (``compress_statistics``): the absmax values are quantized with
``quantize_blockwise(..., blocksize=256)``: one fp32 ``nested_absmax`` per 256 absmax values."""


def lm_head_quantized(quant: QuantInfo) -> bool:
    """Whether the checkpoint stores the LM head quantized (before any ignore list is applied).

    - GPTQ/AWQ: only with ``lm_head: true`` in the config (vLLM ``auto_gptq.py``/``auto_awq.py``
      ``from_config``: ``lm_head_quantized = get_from_keys_or(config, ["lm_head"], default=False)``;
      ``get_quant_method`` quantizes a ``ParallelLMHead`` only when it is set). AutoGPTQ/AutoAWQ
      quantize the decoder blocks only, so ``lm_head.weight`` and ``embed_tokens`` stay fp16.
    - bitsandbytes: never (vLLM ``bitsandbytes.py`` ``get_quant_method`` quantizes ``LinearBase`` and
      experts only; ``ParallelLMHead`` is neither; transformers keeps the output embedding unconverted).
    - fp8 / mxfp4: never (vLLM's ParallelLMHead is unquantized for them).
    - compressed-tensors and the rest: decided by the checkpoint's ignore list (``ignore: [lm_head]``).
    """
    if quant.method in GROUP_METHODS:
        return quant.lm_head
    return quant.method not in ("bitsandbytes", "fp8", "mxfp4")


def _groups(fan_in: int, group_size: int | None) -> int:
    """Scale rows along the input dimension: ``input_size // group_size``, or 1 for ``group_size == -1``
    (vLLM ``auto_gptq.py`` ``create_weights``: "if group_size != -1 ... else group_size = input_size")."""
    if not group_size or group_size <= 0 or group_size >= fan_in:
        return 1
    return math.ceil(fan_in / group_size)


def gptq_linear_bytes(fan_in: int, fan_out: int, bits: int, group_size: int | None) -> int:
    """One GPTQ Linear (vLLM ``auto_gptq.py`` ``AutoGPTQLinearMethod.create_weights``):

    ``qweight`` int32 [in / (32/bits), out]; ``qzeros`` int32 [groups, out / (32/bits)];
    ``scales`` fp16 [groups, out]; ``g_idx`` int32 [in]. ``g_idx`` is registered and loaded whatever
    ``desc_act`` says (AutoGPTQ's QuantLinear saves it for every layer), so it is always counted.
    """
    groups = _groups(fan_in, group_size)
    qweight = math.ceil(fan_in * bits / 32) * fan_out * 4
    qzeros = groups * math.ceil(fan_out * bits / 32) * 4
    return qweight + qzeros + groups * fan_out * SCALE_BYTES + fan_in * 4


def awq_linear_bytes(fan_in: int, fan_out: int, bits: int, group_size: int | None) -> int:
    """One AWQ Linear (vLLM ``auto_awq.py`` ``BaseAWQLinearMethod.create_weights``):

    ``qweight`` int32 [in, out / (32/bits)]; ``qzeros`` int32 [in / group, out / (32/bits)];
    ``scales`` fp16 [in / group, out]. No ``g_idx``.
    """
    groups = _groups(fan_in, group_size)
    packed_out = math.ceil(fan_out * bits / 32) * 4
    return fan_in * packed_out + groups * packed_out + groups * fan_out * SCALE_BYTES


def compressed_wna16_bytes(fan_in: int, fan_out: int, bits: int, group_size: int | None, *,
                           symmetric: bool = True, g_idx: bool = False) -> int:
    """One compressed-tensors pack-quantized Linear (vLLM ``compressed_tensors/schemes/
    compressed_tensors_wNa16.py`` ``create_weights``):

    ``weight_packed`` int32 [out, ceil(in * bits / 32)]; ``weight_scale`` [out, groups] in the model
    dtype; ``weight_shape`` int64 [2]; ``weight_zero_point`` int32 [ceil(out * bits / 32), groups] only
    when not symmetric; ``weight_g_idx`` int32 [in] only with ``actorder: group``.
    """
    groups = _groups(fan_in, group_size)
    size = fan_out * math.ceil(fan_in * bits / 32) * 4 + fan_out * groups * SCALE_BYTES + 2 * 8
    if not symmetric:
        size += math.ceil(fan_out * bits / 32) * groups * 4
    return size + (fan_in * 4 if g_idx else 0)


def bnb_linear_bytes(fan_in: int, fan_out: int, bits: int, *, double_quant: bool = False) -> int:
    """One bitsandbytes Linear as a pre-quantized checkpoint stores it (the tensors vLLM
    ``model_loader/bitsandbytes_loader.py`` reads back: ``absmax``, ``quant_map``, ``nested_absmax``,
    ``nested_quant_map``):

    4-bit (NF4/FP4): the weight packed two per byte; one absmax per 64 weights, fp32, or with double
    quantization uint8 plus one fp32 ``nested_absmax`` per 256 blocks and a 256-entry fp32
    ``nested_quant_map``; a 16-entry fp32 ``quant_map``. 8-bit (LLM.int8): int8 weight and one fp32
    ``SCB`` per output row.
    """
    n = fan_in * fan_out
    if bits >= 8:
        return n + fan_out * 4
    blocks = math.ceil(n / BNB_BLOCK)
    absmax = blocks + math.ceil(blocks / BNB_NESTED_BLOCK) * 4 + 256 * 4 if double_quant else blocks * 4
    return math.ceil(n / 2) + absmax + 16 * 4


def linear_bytes(fan_in: int, fan_out: int, quant: QuantInfo) -> int | None:
    """Stored bytes of one quantized ``fan_in`` x ``fan_out`` Linear weight, or None where no rule
    above covers ``quant`` (FP8, MXFP4, ...: the caller keeps its bits-per-weight arithmetic)."""
    bits = quant.weight_bits
    if quant.method in ("gptq", "gptq_marlin"):
        return gptq_linear_bytes(fan_in, fan_out, bits, quant.group_size)
    if quant.method in ("awq", "awq_marlin"):
        return awq_linear_bytes(fan_in, fan_out, bits, quant.group_size)
    if quant.method == "bitsandbytes":
        return bnb_linear_bytes(fan_in, fan_out, bits, double_quant=quant.double_quant)
    if quant.method == "compressed-tensors" and bits < 8 and quant.group_size is not None:
        return compressed_wna16_bytes(fan_in, fan_out, bits, quant.group_size, symmetric=quant.symmetric,
                                      g_idx=quant.desc_act)
    return None


def group_overhead_bits(bits: int, group_size: int = 128, scale_bits: int = 16) -> float:
    """Extra bits per weight of a group-quantized checkpoint: one fp16 scale and one ``bits``-wide
    zero point per ``group_size`` weights (the GPTQ/AWQ layouts above, g_idx left out)."""
    return (scale_bits + bits) / group_size
