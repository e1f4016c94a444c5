"""Plain-language reasons for a Prediction: which mechanism moves R, where K̄ came from, and
what the calibrated model adds that no mechanism explains."""

from __future__ import annotations

import math

from advisor.hardware.gpus import GpuSpec
from advisor.model.schema import ModelProfile
from advisor.predict import mechanisms as mech
from advisor.predict.stepcost import experts_touched
from advisor.vllm_facts import facts as _vllm

_TERM_WORDS = {
    "host_on": "host state ON (the seed's DSA-queue state; a label of the host, not a mechanism)",
    "host_on_x_overhead": "host state ON × host-bound share of the plain step (vanilla sped up +33–54 % for small models when the seed host was ON)",
    "reasoning_x_logsize": "reasoning family × model size (in the seed, reasoning models' K̄ falls with size: distills 7B > 32B > 70B)",
    "instruct_x_llama": "Llama-family instruct model (the seed's Llama instruct models gain more than Qwen's at every size)",
    "log_r": "correction of the physics R's weight",
    "model_effect": "this model's own measured effect",
    "intercept": "average offset of the calibration rows",
    "seed_host_kbar": "the seed host's gain-implied K̄ / R over the traffic's (the seed host only)",
}


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.2f} ms"


def _terms(name: str, c) -> str:
    """A step and the terms that add up to it (the roofline is max(weights + KV, compute) + the GEMM floor, so its
    two sides are shown beside it, not as addends; a host floor replaces the sum where it is larger)."""
    parts = [("roofline", c.t_roofline - c.t_mla_prefill), ("MLA prefill path", c.t_mla_prefill), ("all-reduce", c.t_allreduce),
             (f"launch ({c.graph_mode} graph)", c.t_launch), ("host", c.t_fixed), ("drafting", c.t_draft),
             ("speculative step", c.t_spec_fixed)]  # fmt: skip
    shown = [(k, v) for k, v in parts if v > 0 or k in ("roofline", "host")]
    summed = sum(v for _, v in parts)
    line = (f"{name} {_ms(summed)} = " + " + ".join(f"{k} {_ms(v)}" for k, v in shown)
            + f" (roofline = max(weights+KV {_ms(c.t_memory)}, compute {_ms(c.t_compute)}) + GEMM floor"
            + (f" + routed experts {_ms(c.t_moe_kernel)} at the fused-MoE kernel's cost MEASURED on {c.moe_kernel_gpu} "
               f"(calibration/moe_kernel_costs.csv)" if c.t_moe_kernel > 0 else "") + ")")
    if c.total > summed + 1e-9:
        line += f"; the host profile's floor makes it {_ms(c.total)} (async scheduling overlaps host and GPU work)"
    return line


def explain(profile: ModelProfile, gpu: GpuSpec, tp: int, rows: list, host_state: str | None) -> list[str]:
    """Lines for Prediction.explanation (``rows``: one RowPrediction per host state considered)."""
    row = rows[0]
    r, plain, spec = row.r, row.r.plain, row.r.spec
    seqs = round(plain.tokens)
    out = [
        f"K > R: K̄ = {row.k_bar:.2f} tokens/step ({row.k_bar_source}); R = {r.r:.2f} = verification step "
        f"{_ms(spec.total)} ({seqs} seqs × {1 + r.draft_tokens:.1f} tokens) / plain step {_ms(plain.total)} "
        f"on {tp}× {gpu.name}, context ≈ {row.context:.0f} tokens",
        _terms("plain step", plain),
        _terms("verification step", spec),
    ]
    if profile.arch == "moe" and profile.experts:
        a = experts_touched(profile.experts, profile.experts_per_token, plain.tokens)
        b = experts_touched(profile.experts, profile.experts_per_token, spec.tokens)
        out.append(f"MoE: {a:.0f} of {profile.experts} experts per layer are read at {plain.tokens:.0f} tokens, {b:.0f} at "
                   f"{spec.tokens:.0f} (uniform routing E·(1−(1−k/E)^t)): weight reads ×{spec.weight_bytes / plain.weight_bytes:.2f}")  # fmt: skip
    if profile.attention == "mla":
        backend, support = mech.mla_backend(gpu.name)
        if spec.t_mla_prefill > 0:
            out.append(f"MLA: {backend} decodes only {support.replace('_', '-')} query lengths; suffix drafts differ per sequence, so "
                       f"vLLM sends drafting sequences down MLA's prefill path, which re-expands each cached context through "
                       f"kv_b_proj: +{_ms(spec.t_mla_prefill)} per verification step "
                       f"(vllm/v1/attention/backends/utils.py:split_decodes_and_prefills, require_uniform)")  # fmt: skip
        else:
            out.append(f"MLA: {backend} takes variable-length queries on {gpu.name}: no prefill-path fallback")
    if spec.graph_mode == "none":
        out.append(f"CUDA graphs: a {spec.tokens:.0f}-token verification step exceeds vLLM's largest capture size "
                   f"({_vllm().graph_cap}): "
                   "it runs without graphs (vllm/config/vllm.py:_set_cudagraph_sizes)")  # fmt: skip
    else:
        out.append("CUDA graphs: verification batches are not uniform (drafts differ in length), so they replay PIECEWISE "
                   "graphs with eager attention (gpu_model_runner uniform_decode check)")  # fmt: skip
    shift = sum(x.delta for x in rows) / len(rows)
    big = sorted(((k, sum(x.terms.get(k, 0.0) for x in rows) / len(rows)) for k in row.terms), key=lambda kv: -abs(kv[1]))
    shown = [(k, v) for k, v in big if abs(v) >= 0.05]
    rest = shift - sum(v for _, v in shown)  # the smaller terms and the intercept: the parts multiply to the total
    parts = ", ".join([f"{_TERM_WORDS.get(k, k)} ×{math.exp(v):.2f}" for k, v in shown]
                      + ([f"the rest ×{math.exp(rest):.2f}"] if shown and abs(rest) >= 0.005 else []))  # fmt: skip
    out.append(f"left to calibration: ×{math.exp(shift):.2f} on K̄/R" + (f" ({parts})" if parts else ""))
    if abs(shift) >= 0.3:
        out.append("no mechanism in the step-cost model explains that part; it is fitted from measurements")
    if not row.model_seen:
        out.append("this model was not measured: interval includes the spread between models")
    if host_state is None:
        out.append("host state unknown: OFF and ON predictions averaged, interval widened by their difference")
    if gpu.name != "B200":
        out.append(f"calibration rows come from B200 hosts (plus any probes); on {gpu.name} only the physics is specific to the GPU")
    return out
