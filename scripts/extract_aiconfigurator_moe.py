#!/usr/bin/env python3
"""Extract the fused-MoE kernel timings NVIDIA's aiconfigurator measured on vLLM 0.24.0 (H100 SXM, H200 SXM) into
``calibration/moe_kernels/aiconfigurator_vllm0.24.0_moe.csv``, the committed input of the ``moe_kernel_costs`` table
(advisor/calibrate/tables/moe_kernel_costs.py). Run once; the CSV is what the project ships and rebuilds from.

Source: the PyPI wheel ``aiconfigurator-core==0.12.0`` (Apache-2.0; ``aiconfigurator_core/systems/data/
{h100_sxm,h200_sxm}/moe/vllm/0.24.0/moe_perf.parquet``: one row per timed ``moe`` op, columns kernel_source,
moe_dtype, num_tokens, hidden_size, inter_size, topk, num_experts, moe_tp_size, moe_ep_size, distribution, latency in
ms). Kept: the Triton kernels vLLM runs for the checkpoints the catalog has (unquantised bf16, block FP8, gpt-oss
MXFP4; the ``dtype`` column names it, see KERNELS), at most 1,024 tokens (decode and verification steps), routing ``balanced`` and ``power_law_1.2``.

    pip download --no-deps aiconfigurator-core==0.12.0 -d DIR   # 82 MB; needs pyarrow + pandas to read
    python scripts/extract_aiconfigurator_moe.py --wheel DIR/aiconfigurator_core-0.12.0-*.whl
"""

from __future__ import annotations

import argparse
import hashlib
import io
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "calibration/moe_kernels/aiconfigurator_vllm0.24.0_moe.csv"
WHEEL_SHA256 = "aadc4aad0a00bf8a61c477c62bef43de479849c3aa0b1c3078068e08309eccc4"
GPUS = {"h100_sxm": "H100", "h200_sxm": "H200"}
KERNELS = {
    "bf16": "vllm_unquantizedfusedmoe_triton_tritonexperts",
    "fp8": "vllm_fp8moe_triton_tritonexperts",
    "mxfp4": "vllm_gptossmxfp4moe_triton_oaitritonmxfp4expertsmonolithic",
}
"""advisor's weights dtype -> the kernel aiconfigurator timed for it (moe_dtype bfloat16, fp8_block, w4a16_mxfp4)."""
DISTRIBUTIONS = ("balanced", "power_law_1.2")
MAX_TOKENS = 1024
FIELDS = ("gpu", "dtype", "num_tokens", "hidden_size", "inter_size", "topk", "num_experts",
          "moe_tp_size", "moe_ep_size", "distribution", "latency_ms")  # fmt: skip


def main() -> int:
    import pandas as pd

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--wheel", type=Path, required=True)
    args = ap.parse_args()
    digest = hashlib.sha256(args.wheel.read_bytes()).hexdigest()
    if digest != WHEEL_SHA256:
        sys.exit(f"{args.wheel}: sha256 {digest}, expected {WHEEL_SHA256} (aiconfigurator-core 0.12.0)")
    frames = []
    with zipfile.ZipFile(args.wheel) as z:
        for folder, gpu in GPUS.items():
            d = pd.read_parquet(io.BytesIO(z.read(f"aiconfigurator_core/systems/data/{folder}/moe/vllm/0.24.0/moe_perf.parquet")))
            for dtype, kernel in KERNELS.items():
                x = d[(d.kernel_source == kernel) & (d.num_tokens <= MAX_TOKENS) & d.distribution.isin(DISTRIBUTIONS)].copy()
                x["gpu"], x["dtype"], x["latency_ms"] = gpu, dtype, x["latency"].round(6)
                frames.append(x[list(FIELDS)])
    out = pd.concat(frames).sort_values(list(FIELDS[:10])).reset_index(drop=True)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    tmp = OUT.with_suffix(".tmp")
    out.to_csv(tmp, index=False, lineterminator="\n")
    tmp.replace(OUT)
    print(f"{len(out)} rows -> {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
