"""Pipeline parallelism across nodes, priced: a replica larger than one node runs tensor parallel
inside a node x pipeline parallel across nodes (advisor.render.multinode renders exactly that), so
the layout search predicts that layout, not one TP group spanning the nodes.

Mechanism (vLLM V1 with PP keeps one micro-batch per stage in flight, the scheduler's batch queue
of size ``pipeline_parallel_size``): each micro-batch holds concurrency / PP sequences and passes
through every stage in turn, so one of its steps costs a full-model step at TP = GPUs per node
(each stage reads its share of the layers; the stages run one after the other) plus one
stage-to-stage send per boundary; the PP micro-batches advance at once, so the host emits PP times
a micro-batch's tokens.
"""

from __future__ import annotations

from advisor.domain.prediction import Band
from advisor.hardware.gpus import GpuSpec
from advisor.model.schema import ModelProfile
from advisor.predict.absolute import ReplicaLayout, ServingFigures, serve
from advisor.predict.serving import busy_replicas

PP_HOP_S = 0.25e-3
"""ASSUMED: one stage-to-stage send of a decode micro-batch's hidden states between nodes (NCCL over
InfiniBand/RoCE, tens of kB: latency-bound), per pipeline boundary per step."""


def pp_split(tp_total: int, gpus_per_node: int) -> tuple[int, int] | None:
    """(TP per node, PP nodes) for a replica of ``tp_total`` GPUs, or None when it fits one node
    (or does not split into whole nodes: multi-node rendering refuses that)."""
    if tp_total <= gpus_per_node or tp_total % gpus_per_node:
        return None
    return gpus_per_node, tp_total // gpus_per_node


def _scale(b: Band, f: float, d: int) -> Band:
    return Band(value=round(b.value * f, d), low=round(b.low * f, d), high=round(b.high * f, d))


def pp_serve(p: ModelProfile, gpu: GpuSpec, tp_node: int, pp: int, *, concurrency: int, prompt_len: int, output_len: int,
             slots: int, gain: Band | None = None, notes: list[str] | None = None) -> ServingFigures:  # fmt: skip
    """The figures of TP ``tp_node`` x PP ``pp`` (the module docstring's mechanism)."""
    mb = serve(p, gpu, ReplicaLayout(tp=tp_node), concurrency=-(-concurrency // pp), prompt_len=prompt_len,
               output_len=output_len, slots=max(1, -(-slots // pp)), gain=gain, notes=notes)  # fmt: skip
    # micro-batches with no request add nothing: PP stages are busy only as far as there are requests
    busy = busy_replicas(concurrency, pp)
    g = (gain.value if gain else 1.0) or 1.0
    hop_ms = (pp - 1) * PP_HOP_S * 1e3
    tpot = mb.tpot_ms.value + hop_ms / g  # a step yields g tokens per sequence
    stretch = mb.tpot_ms.value / tpot if tpot else 1.0
    return mb.model_copy(update={
        "throughput_tok_s": _scale(mb.throughput_tok_s, busy * stretch, 0),
        "tpot_ms": Band(value=round(tpot, 2), low=round(mb.tpot_ms.low + hop_ms / g, 2), high=round(mb.tpot_ms.high + hop_ms / g, 2)),
        "ttft_ms": (Band(value=round(mb.ttft_ms.value + hop_ms), low=round(mb.ttft_ms.low + hop_ms), high=round(mb.ttft_ms.high + hop_ms))
                    if mb.ttft_ms is not None else None),
        "step_ms": Band(value=round(mb.step_ms.value + hop_ms, 3), low=round(mb.step_ms.low + hop_ms, 3), high=round(mb.step_ms.high + hop_ms, 3)),
        "running_per_replica": mb.running_per_replica * pp,
        "waiting_per_replica": round(mb.waiting_per_replica * pp, 1) if mb.waiting_per_replica is not None else None,
        "busy_replicas": None,
        "notes": [*mb.notes, f"multi-node: TP {tp_node} x PP {pp} ({pp} micro-batches of {mb.running_per_replica} in flight, "
                  f"each step a full-model TP {tp_node} step + {pp - 1} stage hop(s) of {PP_HOP_S * 1e3:.2f} ms ASSUMED)"],
    })  # fmt: skip
