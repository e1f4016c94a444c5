"""Run vLLM's own `vllm bench serve` argument parser on argv lists; runs inside the vLLM test venv.

stdin: JSON list of {"id": str, "argv": [str, ...]} where argv is what follows `vllm bench serve`.
stdout: "@@RESULT@@" then one JSON list of {"id", "ok", "error", "values"}; the first entry, id "@version",
names the vLLM imported. The parser is the one `vllm bench serve` builds: ``vllm.benchmarks.serve.add_cli_args``
(which adds ``vllm.benchmarks.datasets``'s dataset flags) on a FlexibleArgumentParser.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")

KEYS = ("model", "served_model_name", "base_url", "dataset_name", "random_input_len", "random_output_len",
        "random_range_ratio", "ignore_eos", "num_prompts", "max_concurrency", "request_rate", "burstiness",
        "percentile_metrics", "metric_percentiles", "save_result", "result_dir", "result_filename", "tokenizer", "metadata")  # fmt: skip


def main() -> int:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from parse_args import pin_cpu_platform

    cases = json.load(sys.stdin)
    pin_cpu_platform()
    import vllm
    from vllm.benchmarks.serve import add_cli_args
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    out = [{"id": "@version", "ok": True, "error": None, "values": {"version": vllm.__version__, "file": vllm.__file__}}]
    for case in cases:
        parser = FlexibleArgumentParser(prog="vllm bench serve")
        add_cli_args(parser)
        err = io.StringIO()
        try:
            with contextlib.redirect_stderr(err):
                args = parser.parse_args(case["argv"])
        except SystemExit as exc:
            out.append({"id": case["id"], "ok": False, "error": err.getvalue().strip().splitlines()[-1:] or [f"exit {exc.code}"]})
            continue
        values = {k: getattr(args, k, "@absent") for k in KEYS}
        values = {k: (str(v) if isinstance(v, float) and v == float("inf") else v) for k, v in values.items()}
        out.append({"id": case["id"], "ok": True, "error": None, "values": values})
    sys.stdout.write("\n@@RESULT@@" + json.dumps(out, default=str) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
