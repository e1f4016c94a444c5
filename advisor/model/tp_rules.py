"""Which tensor-parallel sizes vLLM accepts for a model: its own divisibility rules.

Read from vLLM 0.32.0 (the version this advisor targets; check with ``grep -n`` in an installed vLLM):

- ``vllm/config/model.py`` ``ModelConfig.verify_with_parallel_config``: "Total number of attention
  heads (…) must be divisible by tensor parallel size (…)" (``total_num_attention_heads % tp``).
- ``vllm/model_executor/layers/linear.py`` ``QKVParallelLinear.__init__``: ``divide(total_num_heads,
  tp)``; when ``tp >= total_num_kv_heads`` each rank holds one KV head replicated
  ``divide(tp, total_num_kv_heads)`` times, else ``divide(total_num_kv_heads, tp)``. So GQA needs
  ``kv % tp == 0`` or ``tp % kv == 0`` (TP above the KV heads is fine when it is a multiple).
- ``linear.py`` ``ColumnParallelLinear`` / ``MergedColumnParallelLinear`` (gate_up_proj:
  ``divide(output_size, tp)`` per output) and ``RowParallelLinear`` (down_proj:
  ``divide(input_size, tp)``): the dense MLP width must divide by TP.
- ``vllm/model_executor/layers/fused_moe/config.py`` ``FusedMoEConfig.__post_init__``: ``assert
  intermediate_size % tp_size == 0`` (experts sharded by TP, no expert parallelism: the expert
  count itself need not divide). Shared experts are MergedColumn/RowParallelLinear: same rule.
- ``vllm/model_executor/layers/vocab_parallel_embedding.py``: the vocabulary is padded to a multiple
  of 64 (``pad_vocab_size``, ``DEFAULT_VOCAB_PADDING_SIZE``) and split with ``divide(padded, tp)``.

``divide`` is ``vllm/distributed/utils.py`` ``ensure_divisibility``: an assert, so vLLM fails at
model load with "… is not divisible by …".
"""

from __future__ import annotations

from advisor.model.schema import ModelProfile

VOCAB_PADDING = 64
"""vllm/model_executor/layers/vocab_parallel_embedding.py DEFAULT_VOCAB_PADDING_SIZE."""


def tp_refusal(profile: ModelProfile, tp: int) -> str | None:
    """Why vLLM refuses ``tensor_parallel_size=tp`` for ``profile`` (one sentence), or None."""
    if tp < 1:
        return f"tensor_parallel_size must be >= 1, got {tp}"
    heads = profile.num_attention_heads
    if heads % tp:
        return f"{heads} attention heads are not divisible by {tp}"
    kv = profile.num_kv_heads
    if profile.attention != "mla" and (kv % tp if tp < kv else tp % kv):
        return (f"{kv} KV heads neither split evenly over {tp} ranks nor replicate evenly "
                f"(needs {kv} % {tp} == 0, or {tp} % {kv} == 0 when TP exceeds the KV heads)")  # fmt: skip
    if profile.intermediate_size and profile.intermediate_size % tp:
        return f"the MLP width (intermediate_size {profile.intermediate_size}) is not divisible by {tp}"
    if profile.expert_intermediate_size and profile.expert_intermediate_size % tp:
        return f"the expert width (moe_intermediate_size {profile.expert_intermediate_size}) is not divisible by {tp}"
    if profile.shared_expert_intermediate_size and profile.shared_expert_intermediate_size % tp:
        return (f"the shared-expert width ({profile.shared_expert_intermediate_size}) is not divisible by {tp}")
    padded = -(-profile.vocab_size // VOCAB_PADDING) * VOCAB_PADDING
    if padded % tp:
        return f"the vocabulary padded to a multiple of {VOCAB_PADDING} ({padded}) is not divisible by {tp}"
    return None
