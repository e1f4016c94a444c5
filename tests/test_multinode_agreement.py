"""One layout from prediction to files on more GPUs than a node: recommend prices the replica as
TP per node x PP across nodes (advisor.predict.pipeline), never with a speculative method the vLLM
version is not known to run under PP (advisor.vllm_facts pp_speculative_methods), and render's
summary and files run exactly that layout (checked with vLLM's own parser where the venv has it)."""

from __future__ import annotations

import json

import pytest

from advisor.vllm_facts import facts
from tests.render_helpers import unit as sd

CASES = [
    ("meta-llama/Llama-3.1-405B-Instruct-FP8", "H100", "16", None),
    ("meta-llama/Llama-3.1-405B-Instruct-FP8", "H100", "32", None),
    ("meta-llama/Llama-3.1-405B-Instruct-FP8", "H100", "16", "0.26"),
    ("meta-llama/Llama-3.1-405B-Instruct-FP8", "H200", "16", "0.33"),
    ("meta-llama/Llama-3.1-70B-Instruct", "H100", "16", None),
]


def _flag(argv: list[str], name: str) -> str | None:
    return argv[argv.index(name) + 1] if name in argv else None


@pytest.mark.parametrize("model, gpu, gpus, version", CASES)
def test_recommend_render_summary_and_files_agree(run_cli, tmp_path, model, gpu, gpus, version):
    ver = ["--vllm-version", version] if version else []
    code, out, err = run_cli("recommend", model, "--gpu", gpu, "--gpus", gpus, *ver, "--json")
    assert code == 0, err
    rec = json.loads(out)
    d = rec["decision"]
    code, out, err = run_cli("render", model, "--gpu", gpu, "--gpus", gpus, *ver, "--out", str(tmp_path / "s"), "--json")
    assert code == 0, err
    rendered = json.loads(out)
    assert rendered["recommendation"]["decision"] == d  # render renders what recommend recommends
    unit = (tmp_path / "s" / "vllm.service").read_text()
    (exec_line,) = [v for _, k, v in sd.directives(unit) if k == "ExecStart"]
    argv = sd.exec_argv(exec_line)
    tp, pp = int(_flag(argv, "--tensor-parallel-size")), int(_flag(argv, "--pipeline-parallel-size") or 1)
    # the decision carries the layout that runs (issue 39): TP per node, PP across nodes
    assert (tp, pp) == (d["tensor_parallel_size"], d["pipeline_parallel_size"]) and d["nodes"] == pp
    assert tp * pp * d["data_parallel_size"] == int(gpus) or pp == 1
    assert tp <= 8  # every pipeline stage inside one node of 8
    if pp > 1:
        assert d["data_parallel_size"] == 1
        allowed = facts(version or "0.32").pp_speculative_methods
        assert d["speculative_method"] is None or d["speculative_method"] in allowed
        assert "--speculative-config" not in argv or d["speculative_method"] in allowed
        assert _flag(argv, "--distributed-executor-backend") == "ray"
        # The prediction is of that layout: its figures name TP x PP.
        assert any(f"TP {tp} x PP {pp}" in n for n in rec["prediction"]["figure_notes"]), rec["prediction"]["figure_notes"]
        code, text, err = run_cli("render", model, "--gpu", gpu, "--gpus", gpus, *ver, "--out", str(tmp_path / "t"))
        assert code == 0 and f"runs as TP {tp} x PP {pp} over {pp} nodes" in text


def test_speculation_with_pp_is_refused_at_render(tmp_path):
    from advisor.domain.decision import Decision
    from advisor.errors import UsageError
    from advisor.render.files import render_files

    d = Decision(speculative_method="suffix", num_speculative_tokens=16, tensor_parallel_size=16, gpu_memory_utilization=0.85)
    for version in ("0.26", "0.32", "0.33"):
        with pytest.raises(UsageError, match="pipeline parallelism .* is not known to work"):
            render_files("org/model", d, version=version)


def test_facts_say_where_the_pp_rule_comes_from():
    for version in ("0.26", "0.32", "0.33"):
        src = facts(version).sources["pp_speculative_methods"]
        assert "#57755" in src and "#55623" in src and "gpu_model_runner.py" in src
