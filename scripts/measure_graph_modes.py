#!/usr/bin/env python3
"""Per-layer cost of running a decode step in FULL, PIECEWISE or no CUDA graphs (a PyTorch proxy).

    python scripts/measure_graph_modes.py --out graph_modes.json     # on a CUDA machine, torch only

A stack of ``--layers`` decoder-layer shares (Llama-3.1-8B at TP 8 by default: the small model
whose verification step is most launch-bound) runs one step three ways:

- ``full``: the whole stack captured in one CUDA graph and replayed;
- ``piecewise``: per layer, the pre-attention GEMMs and the post-attention GEMMs are two captured
  graphs and attention runs eagerly between them, the structure vLLM's PIECEWISE mode has
  (vllm/config/compilation.py: graphs split at the attention ops);
- ``none``: every kernel launched eagerly from Python.

The step time is wall-clock (synchronised), so CPU-side launch and dispatch cost counts, as it does
in a server. ``(t_mode − t_full) / layers`` is the per-layer cost of the mode. This is a proxy:
vLLM's piecewise runtime does more Python per attention call (metadata, the custom op), so its
cost is at least this. The step-cost model's ``LAYER_LAUNCH_S`` is compared in
``docs/predictor.md``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="Where to write the timings (JSON).")
    ap.add_argument("--layers", type=int, default=32)
    ap.add_argument("--hidden", type=int, default=4096)
    ap.add_argument("--heads", type=int, default=4, help="Query heads of the share.")
    ap.add_argument("--kv-heads", type=int, default=1)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--intermediate", type=int, default=1792)
    ap.add_argument("--seqs", type=int, default=32)
    ap.add_argument("--context", type=int, default=2048)
    ap.add_argument("--steps", type=int, default=50, help="Steps per timing.")
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    import torch
    import torch.nn.functional as F

    dev, dt = "cuda", torch.bfloat16
    h, nh, nkv, d, inter = args.hidden, args.heads, args.kv_heads, args.head_dim, args.intermediate
    group = nh // nkv
    torch.manual_seed(0)
    w_qkv = [torch.randn(h, (nh + 2 * nkv) * d, device=dev, dtype=dt) * 0.02 for _ in range(args.layers)]
    w_o = [torch.randn(nh * d, h, device=dev, dtype=dt) * 0.02 for _ in range(args.layers)]
    w_gu = [torch.randn(h, 2 * inter, device=dev, dtype=dt) * 0.02 for _ in range(args.layers)]
    w_down = [torch.randn(inter, h, device=dev, dtype=dt) * 0.02 for _ in range(args.layers)]
    rows = []
    for t in (1, 9):
        n = args.seqs * t
        x0 = torch.randn(n, h, device=dev, dtype=dt)
        kc = [torch.randn(args.seqs, nkv, args.context + t, d, device=dev, dtype=dt) for _ in range(args.layers)]
        vc = [torch.randn(args.seqs, nkv, args.context + t, d, device=dev, dtype=dt) for _ in range(args.layers)]
        q_buf = [torch.empty(args.seqs, nkv, t * group, d, device=dev, dtype=dt) for _ in range(args.layers)]
        a_buf = [torch.empty(args.seqs, nkv, t * group, d, device=dev, dtype=dt) for _ in range(args.layers)]
        x_buf = [torch.empty(n, h, device=dev, dtype=dt) for _ in range(args.layers + 1)]
        x_buf[0].copy_(x0)

        def pre(i, t=t):
            qkv = x_buf[i] @ w_qkv[i]
            q_buf[i].copy_(qkv[:, : nh * d].view(args.seqs, t, nkv, group, d).permute(0, 2, 1, 3, 4).reshape(args.seqs, nkv, t * group, d))

        def attn(i):
            a_buf[i].copy_(F.scaled_dot_product_attention(q_buf[i], kc[i], vc[i]))

        def post(i, t=t, n=n):
            a = a_buf[i].view(args.seqs, nkv, t, group, d).permute(0, 2, 1, 3, 4).reshape(n, nh * d)
            y = x_buf[i] + a @ w_o[i]
            gu = y @ w_gu[i]
            x_buf[i + 1].copy_(y + (F.silu(gu[:, :inter]) * gu[:, inter:]) @ w_down[i])

        def eager_step():
            for i in range(args.layers):
                pre(i)
                attn(i)
                post(i)

        def capture(fn):
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                fn()
            torch.cuda.current_stream().wait_stream(s)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                fn()
            return g

        full = capture(eager_step)
        pieces = [(capture(lambda i=i: pre(i)), capture(lambda i=i: post(i))) for i in range(args.layers)]

        def full_step():
            full.replay()

        def piecewise_step():
            for i, (g_pre, g_post) in enumerate(pieces):
                g_pre.replay()
                attn(i)
                g_post.replay()

        row = {"tokens_per_seq": t, "seqs": args.seqs, "layers": args.layers}
        for name, fn in (("full", full_step), ("piecewise", piecewise_step), ("none", eager_step)):
            for _ in range(5):
                fn()
            torch.cuda.synchronize()
            times = []
            for _ in range(args.rounds):
                t0 = time.perf_counter()
                for _ in range(args.steps):
                    fn()
                torch.cuda.synchronize()
                times.append((time.perf_counter() - t0) / args.steps)
            row[f"t_{name}_s"] = statistics.median(times)
        row["per_layer_piecewise_us"] = round((row["t_piecewise_s"] - row["t_full_s"]) / args.layers * 1e6, 2)
        row["per_layer_none_us"] = round((row["t_none_s"] - row["t_full_s"]) / args.layers * 1e6, 2)
        rows.append(row)
        print(json.dumps(row), flush=True)
    props = torch.cuda.get_device_properties(0)
    with open(args.out, "w") as fh:
        json.dump({"device": props.name, "torch": torch.__version__, "args": vars(args), "rows": rows,
                   "command": " ".join(sys.argv)}, fh, indent=1)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
