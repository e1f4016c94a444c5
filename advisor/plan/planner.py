"""The real :class:`~advisor.plan.seams.MemoryPlanner`: boot feasibility of a decision and the nearest
one that boots (pure, over advisor.plan.memory)."""

from __future__ import annotations

from advisor.domain.decision import Decision
from advisor.domain.host import HostContext
from advisor.domain.memory import MemoryVerdict
from advisor.model.schema import ModelProfile
from advisor.hardware.gpus import get_gpu
from advisor.plan.memory import nearest_bootable, plan_memory


FLAG_OF = {"num_speculative_tokens": "--k", "gpu_memory_utilization": "--gmu", "tensor_parallel_size": "--tp",
           "max_model_len": "--max-model-len"}
"""The command-line flag that sets each Decision field the memory planner may change."""


def planner(profile: ModelProfile, host: HostContext, decision: Decision, fixed: frozenset[str] = frozenset(),
            *, build: str = "release") -> tuple[Decision, MemoryVerdict, list[str], list[str]]:  # fmt: skip
    """Boot feasibility: keep the decision when it boots, else take the nearest bootable one that
    leaves the user's explicit flags (``fixed``: Decision field names) as given. When only changing
    a flag would boot, the user's value is kept and reported as not booting, naming the flag.
    ``build``: whose start-up memory terms apply (memory_terms: ``seed`` = the write-up's build)."""
    gpu = get_gpu(host.gpu)
    plan = plan_memory(profile, gpu, decision, num_gpus=host.gpus, fixed=fixed, build=build, vllm_version=host.vllm_version)
    trace: list[str] = []
    warnings: list[str] = []
    if plan.boots:
        trace.append(f"memory: {plan.reason}")
    elif plan.alternative is not None:
        alt = plan.alternative
        trace.append(f"memory: the rules' choice {plan.reason}")
        trace.append(f"memory: using the nearest configuration that boots: {alt.change} ({alt.reason})")
        warnings.append(f"the configuration the rules chose does not boot on {host.gpus}x{host.gpu}; changed {alt.change}")
        decision = alt.decision
        plan = plan_memory(profile, gpu, decision, num_gpus=host.gpus, build=build, vllm_version=host.vllm_version)
    else:
        trace.append(f"memory: {plan.reason}")
        free = nearest_bootable(profile, gpu, decision, num_gpus=host.gpus, build=build,
                                vllm_version=host.vllm_version) if fixed else None
        given = ", ".join(f"{FLAG_OF[f]} {getattr(decision, f)}" for f in sorted(fixed) if f in FLAG_OF)
        if free is not None and free.field in fixed:
            flag = FLAG_OF[free.field]
            warnings.append(f"does not boot with your {given} (kept as given): {plan.reason}; "
                            f"it would boot with {free.change} (change or drop {flag})")  # fmt: skip
        elif given:
            warnings.append(f"does not boot with your {given} (kept as given): {plan.reason}")
        else:
            warnings.append(f"does not fit: {plan.reason}")
    return decision, plan.verdict(), trace, warnings
