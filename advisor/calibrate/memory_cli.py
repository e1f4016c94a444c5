"""``python -m advisor.calibrate.memory_cli MODEL --gpu B200 --gpus 8 --gmu 0.85 --k 32 --k 0``: the terms table.

The I/O edge of the memory planner: resolves the model (``load_profile``) and the GPU, prints a
Markdown table of the per-GPU terms, one column per K (docs/memory.md is generated with it).
"""

from __future__ import annotations

import argparse
import json
import sys

from advisor.domain.memory import MemoryPlan

ROWS = (
    ("budget", "budget (gmu x total)"),
    ("weights", "weights"),
    ("activation_peak", "activation peak (profile run)"),
    ("spec_decode_extra", "speculative decoding extra"),
    ("spec_decode_fitted", "  of which fitted"),
    ("cudagraph", "CUDA graphs"),
    ("non_torch", "non-torch (NCCL, workspaces)"),
    ("kv_cache", "KV cache"),
    ("deficit", "deficit"),
)


def terms_table(plans: dict[str, MemoryPlan]) -> str:
    """Markdown table: one row per term (GiB per GPU), one column per labelled plan."""
    labels = list(plans)
    lines = ["| term (GiB per GPU) | " + " | ".join(labels) + " |", "|---|" + "---:|" * len(labels)]
    for key, name in ROWS:
        lines.append(f"| {name} | " + " | ".join(f"{plans[label].terms_gib[key]:.2f}" for label in labels) + " |")
    extra = (
        ("num_gpu_blocks", lambda p: str(p.num_gpu_blocks)),
        ("KV cache tokens", lambda p: f"{p.kv_cache_tokens:,}"),
        ("requests at max_model_len", lambda p: f"{p.max_concurrency_at_max_len:g}"),
        ("largest term", lambda p: p.dominant_term),
        ("boots", lambda p: "yes" if p.boots else "**no**"),
    )
    for name, fn in extra:
        lines.append(f"| {name} | " + " | ".join(fn(plans[label]) for label in labels) + " |")
    return "\n".join(lines)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m advisor.calibrate.memory_cli", description=__doc__.splitlines()[0])
    p.add_argument("model", nargs="?", help="HF id, bundled catalog id or path to a model directory / config.json")
    p.add_argument("--gpu", default="B200", help="GPU name from catalog/gpus.yaml")
    p.add_argument("--gpus", type=int, default=8, help="GPUs on the host (also the default TP)")
    p.add_argument("--tp", type=int, default=None, help="tensor_parallel_size (default: --gpus)")
    p.add_argument("--gmu", type=float, default=0.85, help="gpu_memory_utilization")
    p.add_argument("--max-model-len", type=int, default=16384)
    p.add_argument("--max-num-seqs", type=int, default=None)
    p.add_argument("--cudagraph-mode", default="FULL_AND_PIECEWISE")
    p.add_argument("--k", type=int, action="append", help="suffix K (repeatable: one column each; 0 = no speculation)")
    p.add_argument("--build", choices=("release", "seed"), default="release",
                   help="release: vLLM releases (spec term measured on 0.26.0); seed: the seed write-up's 1.7.dev build "
                        "(adds the FITTED K-dependent term that reproduces its 405B-FP8 boot failure)")
    p.add_argument("--json", action="store_true", help="print the MemoryPlan objects as JSON instead")
    p.add_argument("--calibration", action="store_true",
                   help="print the bounds the seed boot outcomes put on the fitted speculative-decoding constant")
    return p


SEED_OUTCOMES = (
    ("meta-llama/Llama-3.1-405B-Instruct-FP8", False),
    ("deepseek-ai/DeepSeek-R1", True),
    ("Qwen/Qwen2.5-72B-Instruct", True),
    ("meta-llama/Llama-3.1-70B-Instruct", True),
    ("deepseek-ai/DeepSeek-R1-Distill-Llama-70B", True),
    ("Qwen/Qwen2.5-32B-Instruct", True),
    ("deepseek-ai/DeepSeek-R1-Distill-Qwen-32B", True),
    ("meta-llama/Llama-3.1-8B-Instruct", True),
    ("Qwen/Qwen2.5-7B-Instruct", True),
    ("deepseek-ai/DeepSeek-R1-Distill-Qwen-7B", True),
)
"""Seed write-up, finding 4: suffix at the seed's K (SEED_K) at gmu 0.85, TP 8, 8 x B200: only 405B-FP8 failed to boot."""


def calibration_table(args) -> str:
    """Markdown table of the bound each seed outcome puts on SPEC_BYTES_PER_LAYER_HIDDEN."""
    from advisor.hardware.gpus import get_gpu
    from advisor.model.load import load_profile
    from advisor.plan import memory_terms as t
    from advisor.domain.decision import Decision
    from advisor.calibrate.memory_fit import bound, bracket
    from advisor.predict.dataset import SEED_K

    gpu = get_gpu(args.gpu)
    d = Decision(speculative_method="suffix", num_speculative_tokens=SEED_K, gpu_memory_utilization=args.gmu,
                 tensor_parallel_size=args.tp or args.gpus, max_model_len=args.max_model_len,
                 cudagraph_mode=args.cudagraph_mode)
    from advisor.calibrate.memory_fit import HYPOTHESES

    profiles = [(load_profile(m), booted) for m, booted in SEED_OUTCOMES]
    lines: list[str] = []
    for hyp, label in HYPOTHESES.items():
        bounds = [bound(p, gpu, d, booted, hyp) for p, booted in profiles]
        lines += [f"### K-dependent term = c x {label}", "",
                  "| model | booted | room before the term (GiB) | term per byte of c (GiB) | bound on c (bytes) |",
                  "|---|---|---:|---:|---:|"]
        for b in bounds:
            side = "<" if b.booted else ">"
            lines.append(f"| {b.model} | {'yes' if b.booted else 'no'} | {b.room_gib:.2f} | {b.unit_gib:.2f} | {side} {b.bound:.2f} |")
        lo, hi = bracket(bounds)
        verdict = f"allowed: {lo:.2f} < c < {hi:.2f}" if lo < hi else f"no c fits: needs c > {lo:.2f} and c < {hi:.2f}"
        used = f"; used: {t.SPEC_BYTES_PER_LAYER_HIDDEN}" if hyp == "layers_x_hidden" else ""
        lines += ["", verdict + used, ""]
    return "\n".join(lines).rstrip()


def main(argv: list[str] | None = None) -> int:
    from advisor.errors import AdvisorError
    from advisor.hardware.gpus import get_gpu
    from advisor.model.load import load_profile
    from advisor.domain.decision import Decision
    from advisor.plan.memory import plan_memory

    args = _parser().parse_args(argv)
    if args.calibration:
        try:
            print(calibration_table(args))
        except AdvisorError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return exc.exit_code
        return 0
    if not args.model:
        _parser().error("MODEL is required (or --calibration)")
    try:
        profile = load_profile(args.model)
        gpu = get_gpu(args.gpu)
        plans: dict[str, MemoryPlan] = {}
        for k in args.k or [0]:
            d = Decision(
                speculative_method="suffix" if k else None, num_speculative_tokens=k or None,
                gpu_memory_utilization=args.gmu, tensor_parallel_size=args.tp or args.gpus,
                max_model_len=args.max_model_len, max_num_seqs=args.max_num_seqs, cudagraph_mode=args.cudagraph_mode,
            )
            plans[f"K={k}" if k else "no speculation"] = plan_memory(profile, gpu, d, num_gpus=args.gpus, build=args.build)
    except AdvisorError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    if args.json:
        print(json.dumps({label: p.model_dump(mode="json") for label, p in plans.items()}, indent=2))
        return 0
    tp = args.tp or args.gpus
    print(f"{profile.id} on {args.gpus} x {gpu.name} ({gpu.memory_mib} MiB), TP={tp}, gmu={args.gmu}, "
          f"max_model_len={args.max_model_len}, cudagraph {args.cudagraph_mode}, build {args.build}\n")
    print(terms_table(plans))
    for label, p in plans.items():
        print(f"\n{label}: {p.reason}")
        if p.alternative:
            print(f"  nearest that boots: {p.alternative.change} ({p.alternative.plan_summary.kv_cache_tokens:,} KV tokens)")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
