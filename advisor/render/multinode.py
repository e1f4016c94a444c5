"""Multi-node layouts: more GPUs than one node has becomes tensor parallel inside a node x
pipeline parallel across nodes, on a Ray cluster, as vLLM's distributed-serving docs describe:
https://docs.vllm.ai/en/stable/serving/parallelism_scaling.html ("Multi-node multi-GPU using
tensor parallel and pipeline parallel inference": tensor_parallel_size = GPUs per node,
pipeline_parallel_size = nodes; start `ray start --head` on one node, `ray start --address=HEAD`
on the others, then `vllm serve` on the head with --distributed-executor-backend ray)."""

from __future__ import annotations

import os

from pydantic import BaseModel, ConfigDict

from advisor.errors import UsageError
from advisor.domain.decision import Decision
from advisor.render.target import Target

DOCS = "https://docs.vllm.ai/en/stable/serving/parallelism_scaling.html"
RAY_PORT = 6379
DEFAULT_GPUS_PER_NODE = 8


class Layout(BaseModel):
    """How one replica spreads over nodes."""

    model_config = ConfigDict(extra="forbid")

    tp: int
    """tensor_parallel_size: GPUs per node."""
    pp: int
    """pipeline_parallel_size: nodes."""
    nodes: int
    gpus_per_node: int
    port: int = RAY_PORT
    docs: str = DOCS

    def args(self) -> list[str]:
        return ["--pipeline-parallel-size", str(self.pp), "--distributed-executor-backend", "ray"]


def layout(decision: Decision, gpus_per_node: int = DEFAULT_GPUS_PER_NODE) -> Layout | None:
    """None when the replica fits one node; else TP = GPUs per node, PP = nodes. A decision that already
    carries its pipeline stages (``pipeline_parallel_size`` > 1, as recommend's does) is taken as it is."""
    if decision.pipeline_parallel_size > 1:
        if decision.tensor_parallel_size > gpus_per_node:
            raise UsageError(f"TP {decision.tensor_parallel_size} per node exceeds a node of {gpus_per_node} GPUs; "
                             "pass --gpus-per-node as the recommendation was made for, or recommend again")  # fmt: skip
        return Layout(tp=decision.tensor_parallel_size, pp=decision.pipeline_parallel_size,
                      nodes=decision.pipeline_parallel_size, gpus_per_node=gpus_per_node)  # fmt: skip
    total = decision.tensor_parallel_size
    if decision.data_parallel_size > 1:
        gpus = total * decision.data_parallel_size
        if gpus <= gpus_per_node:
            return None
        raise UsageError(
            f"TP {total} x DP {decision.data_parallel_size} needs {gpus} GPUs, more than a node of {gpus_per_node}: "
            "data-parallel replicas across nodes are not rendered; render one server per node (--gpus "
            f"{gpus_per_node}) or pass --tp"
        )
    if total <= gpus_per_node:
        return None
    if total % gpus_per_node:
        raise UsageError(
            f"{total} GPUs do not split into nodes of {gpus_per_node}: multi-node serving runs TP {gpus_per_node} inside "
            f"each node x PP across nodes, so give --gpus as a multiple of --gpus-per-node"
        )
    nodes = total // gpus_per_node
    return Layout(tp=gpus_per_node, pp=nodes, nodes=nodes, gpus_per_node=gpus_per_node)


def check_speculation(decision: Decision, lay: Layout | None, version: str) -> None:
    """Never render a speculative method with PP that ``version`` is not known to run
    (advisor.vllm_facts pp_speculative_methods, with its sources)."""
    from advisor.vllm_facts import facts

    method = decision.speculative_method
    if lay is None or method is None or method in facts(version).pp_speculative_methods:
        return
    raise UsageError(
        f"{method} decoding with pipeline parallelism (TP {lay.tp} x PP {lay.pp} over {lay.nodes} nodes) is not known to "
        f"work in vLLM {version} (vLLM issue #57755: speculative decoding with PP fails to boot; PR #55623: only EAGLE3 "
        "is known to work with PP): recommend prices this layout without speculation; drop --k, or fit the replica in "
        "one node (--gpus / --gpus-per-node)"
    )


def apply(decision: Decision, target: Target, lay: Layout) -> tuple[Decision, Target]:
    """The head node's decision: TP per node, PP = nodes and the Ray backend, which its flags carry
    (advisor.render.flags.serve_flags); a decision that already carries them is returned as it is."""
    if decision.pipeline_parallel_size > 1:
        return decision, target
    return (decision.model_copy(update={"tensor_parallel_size": lay.tp, "pipeline_parallel_size": lay.pp,
                                        "nodes": lay.nodes, "distributed_executor_backend": "ray"}), target)  # fmt: skip


def ray_program(exec_path: str) -> str:
    """The ``ray`` CLI of the same environment as vLLM (beside it), else ``ray`` by name."""
    if exec_path.startswith("/"):
        return os.path.join(os.path.dirname(exec_path), "ray")
    return "ray"
