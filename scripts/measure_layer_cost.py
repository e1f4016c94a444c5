#!/usr/bin/env python3
"""Time one tensor-parallel share of a dense decoder layer on a real GPU, plain vs verification step.

Two modes:

    python scripts/measure_layer_cost.py --emit-shapes calibration/layer_cost/shapes_tp8.json  # here: shapes from advisor profiles
    python scripts/measure_layer_cost.py --shapes shapes.json --out r.json  # on the GPU machine: torch only

What is timed, per model and per query tokens per sequence T (1 = plain decode, 1 + drafted tokens =
a verification step), for ``--seqs`` sequences with ``--context`` cached tokens each, bf16, random
weights, the whole layer captured in one CUDA graph and replayed (no launch cost in the figure):
QKV GEMM, attention over the cache (GQA packed as decode kernels do: each KV head's query group is
one block of rows, so the cache is read once per KV head), O GEMM, gate/up GEMM, SiLU·mul, down GEMM;
and, separately, the LM-head GEMM of one GPU's vocabulary share.

The output feeds ``scripts/compare_layer_cost.py``, which sets these timings beside the step-cost
model's roofline (advisor/predict/stepcost.py) and derives the bandwidth and FLOP efficiencies.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

TOKENS = (1, 2, 3, 5, 9, 17, 33)
"""Query tokens per sequence: plain decode, then 1 + 1…32 drafted tokens (K = 32)."""
MODELS = ("meta-llama/Llama-3.1-8B-Instruct", "Qwen/Qwen2.5-32B-Instruct", "meta-llama/Llama-3.1-70B-Instruct")
MOE_MODELS = ("deepseek-ai/DeepSeek-V3", "Qwen/Qwen3-30B-A3B", "mistralai/Mixtral-8x7B-Instruct-v0.1")
"""MoE blocks timed with grouped GEMMs (routed experts only, uniform random top-k routing)."""
FP8_MODELS = ("meta-llama/Llama-3.1-405B-Instruct-FP8",)
"""Dense layers timed with FP8 GEMMs (torch._scaled_mm, per-tensor scales)."""


def emit_shapes(path: str, tp: int) -> None:
    """Layer shapes of MODELS at tensor parallel ``tp`` (needs the advisor package and its catalog)."""
    from advisor.model.load import load_profile
    from advisor.model.source import resolve_config

    out = []
    for model in MODELS + FP8_MODELS:
        p = load_profile(model)
        cfg = resolve_config(model).config
        out.append({
            "model": model, "kind": "fp8" if model in FP8_MODELS else "dense", "tp": tp, "hidden": p.hidden_size,
            "heads": p.num_attention_heads // tp, "kv_heads": max(p.num_kv_heads // tp, 1), "head_dim": p.head_dim,
            "intermediate": cfg["intermediate_size"] // tp, "vocab": p.vocab_size // tp, "layers": p.num_layers,
        })  # fmt: skip
    for model in MOE_MODELS:
        p = load_profile(model)
        out.append({
            "model": model, "kind": "moe", "tp": tp, "hidden": p.hidden_size, "experts": p.experts,
            "top_k": p.experts_per_token, "expert_intermediate": p.expert_intermediate_size // tp,
            "moe_layers": p.moe_layers, "layers": p.num_layers,
        })  # fmt: skip
    with open(path, "w") as fh:
        json.dump(out, fh, indent=1)
    print(f"wrote {path}: {len(out)} models at TP {tp}")


def time_graph(fn, reps: int, rounds: int) -> float:
    """Median seconds per call of ``fn`` captured in a CUDA graph."""
    import torch

    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    for _ in range(5):
        graph.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(rounds):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(reps):
            graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3 / reps)
    return statistics.median(times)


def measure(shape: dict, seqs: int, context: int, reps: int, rounds: int) -> list[dict]:
    import torch
    import torch.nn.functional as F

    dev, dt = "cuda", torch.bfloat16
    h, nh, nkv, d, inter = shape["hidden"], shape["heads"], shape["kv_heads"], shape["head_dim"], shape["intermediate"]
    group = nh // nkv
    w_qkv = torch.randn(h, (nh + 2 * nkv) * d, device=dev, dtype=dt) * 0.02
    w_o = torch.randn(nh * d, h, device=dev, dtype=dt) * 0.02
    w_gu = torch.randn(h, 2 * inter, device=dev, dtype=dt) * 0.02
    w_down = torch.randn(inter, h, device=dev, dtype=dt) * 0.02
    w_lm = torch.randn(h, shape["vocab"], device=dev, dtype=dt) * 0.02
    rows = []
    for t in TOKENS:
        n = seqs * t
        x = torch.randn(n, h, device=dev, dtype=dt)
        k_cache = torch.randn(seqs, nkv, context + t, d, device=dev, dtype=dt)
        v_cache = torch.randn(seqs, nkv, context + t, d, device=dev, dtype=dt)

        def layer(x=x, k_cache=k_cache, v_cache=v_cache, t=t, n=n):
            qkv = x @ w_qkv
            q = qkv[:, : nh * d].view(seqs, t, nkv, group, d).permute(0, 2, 1, 3, 4).reshape(seqs, nkv, t * group, d)
            attn = F.scaled_dot_product_attention(q, k_cache, v_cache)
            attn = attn.view(seqs, nkv, t, group, d).permute(0, 2, 1, 3, 4).reshape(n, nh * d)
            y = x + attn @ w_o
            gu = y @ w_gu
            return y + (F.silu(gu[:, :inter]) * gu[:, inter:]) @ w_down

        def gemms(x=x, n=n):
            qkv = x @ w_qkv
            y = x + qkv[:, : nh * d] @ w_o
            gu = y @ w_gu
            return y + (F.silu(gu[:, :inter]) * gu[:, inter:]) @ w_down

        def attention(x=x, k_cache=k_cache, v_cache=v_cache, t=t):
            q = x[:, : nh * d].reshape(seqs, t, nkv, group, d).permute(0, 2, 1, 3, 4).reshape(seqs, nkv, t * group, d)
            return F.scaled_dot_product_attention(q, k_cache, v_cache)

        def lm_head(x=x):
            return x @ w_lm

        row = {"model": shape["model"], "tokens_per_seq": t, "seqs": seqs, "context": context}
        for name, fn in (("layer", layer), ("gemms", gemms), ("attention", attention), ("lm_head", lm_head)):
            row[f"t_{name}_s"] = time_graph(fn, reps, rounds)
        rows.append(row)
        del x, k_cache, v_cache
        torch.cuda.empty_cache()
    return rows


def measure_moe(shape: dict, seqs: int, reps: int, rounds: int) -> list[dict]:
    """Routed experts of one MoE layer share (TP splits each expert's intermediate width, vLLM's
    default without expert parallelism): gate/up and down as grouped GEMMs over the experts the
    step's tokens touch, tokens routed uniformly at random, top-k."""
    import torch
    import torch.nn.functional as F

    dev, dt = "cuda", torch.bfloat16
    h, e, k, inter = shape["hidden"], shape["experts"], shape["top_k"], shape["expert_intermediate"]
    w_gu = torch.randn(e, h, 2 * inter, device=dev, dtype=dt) * 0.02
    w_down = torch.randn(e, inter, h, device=dev, dtype=dt) * 0.02
    gen = torch.Generator(device="cpu").manual_seed(0)
    rows = []
    for t in TOKENS:
        n = seqs * t
        choice = torch.stack([torch.randperm(e, generator=gen)[:k] for _ in range(n)])  # [n, k] experts per token
        counts = torch.bincount(choice.flatten(), minlength=e)
        offs = torch.cumsum(counts, 0).to(torch.int32).to(dev)
        x = torch.randn(n * k, h, device=dev, dtype=dt)  # token copies sorted by expert

        def block(x=x, offs=offs):
            gu = torch._grouped_mm(x, w_gu, offs=offs)
            return torch._grouped_mm(F.silu(gu[:, :inter]) * gu[:, inter:], w_down, offs=offs)

        rows.append({"model": shape["model"], "tokens_per_seq": t, "seqs": seqs, "experts_touched": int((counts > 0).sum()),
                     "t_moe_s": time_graph(block, reps, rounds)})  # fmt: skip
    return rows


def measure_fp8(shape: dict, seqs: int, reps: int, rounds: int) -> list[dict]:
    """The four GEMMs of a dense layer share in FP8 (e4m3 weights and activations, per-tensor scales,
    bf16 out), as vLLM runs FP8 checkpoints on Hopper."""
    import torch

    dev = "cuda"
    h, nh, nkv, d, inter = shape["hidden"], shape["heads"], shape["kv_heads"], shape["head_dim"], shape["intermediate"]
    f8 = torch.float8_e4m3fn
    one = torch.ones((), device=dev)

    def weight(kdim: int, ndim: int):
        return (torch.randn(ndim, kdim, device=dev) * 0.02).to(f8).t()  # column-major [K, N], as _scaled_mm wants

    w_qkv, w_o = weight(h, (nh + 2 * nkv) * d), weight(nh * d, h)
    w_gu, w_down = weight(h, 2 * inter), weight(inter, h)
    rows = []
    for t in TOKENS:
        n = seqs * t
        x = torch.randn(n, h, device=dev).to(f8)
        a = torch.randn(n, nh * d, device=dev).to(f8)
        m = torch.randn(n, inter, device=dev).to(f8)

        def gemms(x=x, a=a, m=m):
            torch._scaled_mm(x, w_qkv, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
            torch._scaled_mm(a, w_o, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
            torch._scaled_mm(x, w_gu, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
            return torch._scaled_mm(m, w_down, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)

        rows.append({"model": shape["model"], "tokens_per_seq": t, "seqs": seqs, "t_gemms_s": time_graph(gemms, reps, rounds)})
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--emit-shapes", metavar="FILE", help="Write layer shapes of the catalog models (run where advisor is installed).")
    ap.add_argument("--tp", type=int, default=8, help="Tensor parallel size of the share (default 8).")
    ap.add_argument("--shapes", metavar="FILE", help="Shapes file to measure (on the GPU machine).")
    ap.add_argument("--out", metavar="FILE", help="Where to write the timings (JSON).")
    ap.add_argument("--seqs", type=int, default=32, help="Sequences in the step (default 32, the seed's concurrency).")
    ap.add_argument("--context", type=int, default=2048, help="Cached tokens per sequence (default 2048).")
    ap.add_argument("--reps", type=int, default=50, help="Graph replays per timing (default 50).")
    ap.add_argument("--only", help="Comma-separated kinds to time: dense, moe, fp8 (default all).")
    ap.add_argument("--rounds", type=int, default=7, help="Timings per point, median reported (default 7).")
    args = ap.parse_args()
    if args.emit_shapes:
        emit_shapes(args.emit_shapes, args.tp)
        return 0
    if not (args.shapes and args.out):
        ap.error("give --emit-shapes FILE, or --shapes FILE --out FILE")
    import torch

    if not torch.cuda.is_available():
        print("error: no CUDA device", file=sys.stderr)
        return 1
    with open(args.shapes) as fh:
        shapes = json.load(fh)
    if args.only:
        shapes = [sh for sh in shapes if sh.get("kind", "dense") in args.only.split(",")]
    started = time.time()
    rows, moe_rows, fp8_rows, failures = [], [], [], []
    for shape in shapes:
        kind = shape.get("kind", "dense")
        try:
            if kind == "moe":
                moe_rows += measure_moe(shape, args.seqs, args.reps, args.rounds)
            elif kind == "fp8":
                fp8_rows += measure_fp8(shape, args.seqs, args.reps, args.rounds)
            else:
                rows += measure(shape, args.seqs, args.context, args.reps, args.rounds)
        except Exception as exc:  # noqa: BLE001 - one unsupported op must not lose the other models' timings
            failures.append(f"{shape['model']} ({kind}): {type(exc).__name__}: {exc}")
            print(f"{shape['model']}: FAILED {failures[-1]}", flush=True)
            continue
        print(f"{shape['model']}: done ({time.time() - started:.0f} s)", flush=True)
    props = torch.cuda.get_device_properties(0)
    result = {"device": props.name, "torch": torch.__version__, "cuda": torch.version.cuda, "seqs": args.seqs,
              "context": args.context, "shapes": shapes, "rows": rows, "moe_rows": moe_rows, "fp8_rows": fp8_rows,
              "failures": failures,
              "command": " ".join(sys.argv)}  # fmt: skip
    with open(args.out, "w") as fh:
        json.dump(result, fh, indent=1)
    for r in moe_rows:
        print(f"{r['model'][-24:]:>24} T={r['tokens_per_seq']:>2} moe {r['t_moe_s'] * 1e6:8.1f} us  experts touched {r['experts_touched']}")
    for r in fp8_rows:
        print(f"{r['model'][-24:]:>24} T={r['tokens_per_seq']:>2} fp8 gemms {r['t_gemms_s'] * 1e6:8.1f} us")
    for r in rows:
        print(f"{r['model'][-24:]:>24} T={r['tokens_per_seq']:>2} layer {r['t_layer_s'] * 1e6:8.1f} us  gemms {r['t_gemms_s'] * 1e6:8.1f}"
              f"  attn {r['t_attention_s'] * 1e6:8.1f}  lm_head {r['t_lm_head_s'] * 1e6:8.1f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
