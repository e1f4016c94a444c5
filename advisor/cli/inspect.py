"""``advisor inspect MODEL``: the model profile."""

from __future__ import annotations

from advisor.cli._app import app
from advisor.cli.common import JsonOpt, emit_json, model_arg, settings, table


def _fmt_bytes(n: int) -> str:
    return f"{n / 2**30:,.1f} GiB"


@app.command("inspect")
def inspect_cmd(model: str = model_arg(), json_out: bool = JsonOpt) -> None:
    """Profile MODEL from its config.json: dense/MoE, parameters, dtype, quantization, KV bytes per token."""
    from advisor.model.load import load_profile

    p = load_profile(model, settings())
    if json_out:
        emit_json(p.inspect_json())
        return
    moe = (
        f"{p.experts} experts, top-{p.experts_per_token}, {p.shared_experts} shared, "
        f"{p.moe_layers} MoE layers" + (f", dense layers {p.dense_layers}" if p.dense_layers else "")
        if p.arch == "moe" else "-"
    )  # fmt: skip
    quant = "-"
    if p.quant.method:
        quant = f"{p.quant.method} ({p.quant.weight_bits}-bit"
        quant += f", blocks {p.quant.block_size}" if p.quant.block_size else ""
        quant += f", {len(p.quant.ignored)} ignored modules" if p.quant.ignored else ""
        quant += ")"
    kv = f"{p.kv_bytes_per_token:,} B ({p.attention.upper()}"
    if p.sliding_window_layers:
        kv += f"; {p.sliding_window_layers} layers windowed at {p.sliding_window}"
    if p.linear_attention_layers:
        kv += f"; {p.linear_attention_layers} linear-attention layers hold no KV"
    kv += ")"
    rows = [
        ("model", p.id),
        ("config from", p.source),
        ("architecture", f"{p.architecture} ({p.model_type})"),
        ("arch", p.arch),
        ("family", p.family),
        ("layers", p.num_layers),
        ("hidden / vocab", f"{p.hidden_size} / {p.vocab_size:,}"),
        ("attention", f"{p.attention}: {p.num_attention_heads} heads, {p.num_kv_heads} KV heads, head dim {p.head_dim}"),
        ("MoE", moe),
        ("params total", f"{p.params_total_b:,.2f} B"),
        ("params active", f"{p.params_active_b:,.2f} B (excl. input embedding {p.params_embedding_b:.2f} B)"),
        ("weights", f"{p.weights_dtype}, {_fmt_bytes(p.weight_bytes)} stored"),
        ("quantization", quant),
        ("KV per token", kv),
        ("max context", f"{p.max_context:,}"),
    ]
    print(table(rows))
    for note in p.notes:
        print(f"  note: {note}")
