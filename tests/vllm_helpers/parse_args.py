"""Run vLLM's own `serve` argument parser on argv lists; runs inside the vLLM test venv.

stdin: JSON list of {"id": str, "argv": [str, ...]} where argv is what follows `vllm serve`
(MODEL then flags). stdout: one JSON list of {"id", "ok", "error", "values"}.

For each case: parse with make_arg_parser(FlexibleArgumentParser()) from $ADVISOR_PARSER_MODULE
(advisor.vllm_facts parser_module of the release under test: 0.26 vllm.entrypoints.openai.cli_args,
0.32 vllm.entrypoints.launchers.cli_args, 0.33 vllm.entrypoints.common.cli_args), build
AsyncEngineArgs.from_cli_args, then validate the JSON-valued flags with vLLM's own config classes
(SpeculativeConfig, CompilationConfig) as far as that is possible without loading a model.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")


def pin_cpu_platform() -> None:
    """A release installed by scripts/setup_vllm_parsers.sh is a CUDA wheel without its kernels: it
    cannot infer its platform on this CPU machine, so it is given vLLM's own CPU platform."""
    if os.environ.get("ADVISOR_PIN_CPU_PLATFORM") == "1":
        import vllm.platforms as platforms
        from vllm.platforms.cpu import CpuPlatform

        platforms._current_platform = CpuPlatform()


def _parser():
    import importlib

    from vllm.utils.argparse_utils import FlexibleArgumentParser

    module = importlib.import_module(os.environ.get("ADVISOR_PARSER_MODULE", "vllm.entrypoints.launchers.cli_args"))
    return module.make_arg_parser(FlexibleArgumentParser(prog="vllm serve"))


def _jsonable(value):
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return str(value)


def check(argv: list[str]) -> dict:
    from vllm.config import CompilationConfig, SpeculativeConfig
    from vllm.engine.arg_utils import AsyncEngineArgs

    parser = _parser()
    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr):
            args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse reports errors by exiting
        return {"ok": False, "error": stderr.getvalue().strip().splitlines()[-1:] or [f"exit {exc.code}"]}
    if getattr(args, "model_tag", None):  # what `vllm serve MODEL` does
        args.model = args.model_tag
    engine = AsyncEngineArgs.from_cli_args(args)
    comp = engine.compilation_config
    if not isinstance(comp, CompilationConfig):
        comp = CompilationConfig(**comp)
    values = {
        "model": engine.model,
        "tensor_parallel_size": engine.tensor_parallel_size,
        "gpu_memory_utilization": engine.gpu_memory_utilization,
        "max_model_len": engine.max_model_len,
        "max_num_seqs": engine.max_num_seqs,
        "max_num_batched_tokens": engine.max_num_batched_tokens,
        "cudagraph_mode": comp.cudagraph_mode.name if comp.cudagraph_mode is not None else None,
        "speculative_config": _jsonable(engine.speculative_config),
        "pipeline_parallel_size": engine.pipeline_parallel_size,
        "data_parallel_size": engine.data_parallel_size,
        "enable_expert_parallel": engine.enable_expert_parallel,
        "distributed_executor_backend": _jsonable(engine.distributed_executor_backend),
        "host": getattr(args, "host", None),
        "port": getattr(args, "port", None),
        "served_model_name": _jsonable(getattr(args, "served_model_name", None)),
    }
    if engine.speculative_config is not None and engine.speculative_config.get("method") in ("mtp", "eagle3", "eagle", "draft_model"):
        # SpeculativeConfig builds an MTP draft from the target model's config (num_nextn_predict_layers), and an
        # EAGLE head or draft model from the drafter's (hub download): check the method name against vLLM's own
        # Literal and the keys against SpeculativeConfig's fields instead.
        from typing import get_args

        from vllm.config.speculative import SpeculativeMethod

        def _names(t):
            out = set()
            for a in get_args(t):
                out |= _names(a) if get_args(a) else {a}
            return out

        method = engine.speculative_config["method"]
        if method not in _names(SpeculativeMethod):
            return {"ok": False, "error": [f"{method} is not a SpeculativeMethod of this vLLM"]}
        import dataclasses

        fields = {f.name for f in dataclasses.fields(SpeculativeConfig)} if dataclasses.is_dataclass(SpeculativeConfig) \
            else set(getattr(SpeculativeConfig, "model_fields", {}))
        unknown = sorted(set(engine.speculative_config) - fields) if fields else []
        if unknown:
            return {"ok": False, "error": [f"SpeculativeConfig has no field(s) {unknown}"]}
        values["spec_validated"] = {"method": method, "num_speculative_tokens": engine.speculative_config["num_speculative_tokens"],
                                    "model": engine.speculative_config.get("model")}
    elif engine.speculative_config is not None:
        # Same object vLLM builds in create_speculative_config, minus the target model (none here).
        spec = SpeculativeConfig(**engine.speculative_config)
        values["spec_validated"] = {
            "method": spec.method,
            "num_speculative_tokens": spec.num_speculative_tokens,
            "model": spec.model,
            "num_speculative_tokens_per_batch_size": _jsonable(getattr(spec, "num_speculative_tokens_per_batch_size", None)),
            **{
                k: getattr(spec, k)
                for k in (
                    "suffix_decoding_max_tree_depth",
                    "suffix_decoding_max_cached_requests",
                    "suffix_decoding_max_spec_factor",
                    "suffix_decoding_min_token_prob",
                    "prompt_lookup_max",
                    "prompt_lookup_min",
                )
            },
        }
    return {"ok": True, "error": None, "values": values}


def main() -> int:
    cases = json.load(sys.stdin)
    pin_cpu_platform()
    import vllm

    out = [{"id": "@version", "ok": True, "error": None, "values": {"version": vllm.__version__, "file": vllm.__file__}}]
    for case in cases:
        try:
            result = check(case["argv"])
        except (ValueError, TypeError, KeyError, ImportError) as exc:  # vLLM rejects the value
            result = {"ok": False, "error": [f"{type(exc).__name__}: {exc}"]}
        result["id"] = case["id"]
        out.append(result)
    sys.stdout.write("\n@@RESULT@@" + json.dumps(out) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
