"""Kubernetes (Secret, PVC, Deployment, Service) and Docker Compose renderings of the same
serving command. Values go through ``yamlq`` (ASCII double-quoted YAML) and, where the
orchestrator expands variables, ``dollars``.

Inside a container vLLM listens on 0.0.0.0 (the pod / container network is private to it);
``--host`` then chooses where Compose publishes the port, and the Service fronts the pod in k8s.
"""

from __future__ import annotations

import math

from advisor.domain.decision import Decision
from advisor.render import quoting
from advisor.render.files import _environment, base_context, serve_args, summary_line
from advisor.render.flags import _check_version
from advisor.render.target import Target
from advisor.vllm_facts import DEFAULT_VERSION

STARTUP_MINUTES = 60
# LeaderWorkerSet pods (vLLM's docs/deployment/frameworks/lws.md pattern): the leader starts the Ray
# head, waits for LWS_GROUP_SIZE nodes, then execs `vllm "$@"` with the rendered argv; a worker
# joins the head at $1 (the pod's $(LWS_LEADER_ADDRESS)).
LEADER_SCRIPT = (
    "set -euo pipefail; ray start --head --port={port} --num-gpus={gpus} --disable-usage-stats; "
    'until [ "$(ray status 2>/dev/null | sed -n "/^Active:/,/^Pending:/p" | grep -c node_ || true)" -ge "${{LWS_GROUP_SIZE}}" ]; '
    'do sleep 5; done; exec vllm "$@"'
)
WORKER_SCRIPT = 'exec ray start --address="$1:{port}" --num-gpus={gpus} --block --disable-usage-stats'

AMD_GPUS = ("MI300X", "MI325X", "MI250X")


def _gpu(gpu: str | None) -> tuple[str, str]:
    """(Kubernetes extended resource, Compose device driver)."""
    if gpu and gpu.upper() in AMD_GPUS:
        return "amd.com/gpu", "amdgpu"
    return "nvidia.com/gpu", "nvidia"


def cache_size(weight_bytes: int | None) -> str:
    """PVC size for the HF cache: the weights plus a quarter, plus 20 GiB (tokenizer, compile cache)."""
    if not weight_bytes:
        return "512Gi"
    return f"{math.ceil(weight_bytes * 1.25 / 2**30) + 20}Gi"


def _context(target: Target, decision: Decision, version: str, *, image: str, gpu: str | None, gpus: int) -> dict:
    pod_target = target.model_copy(update={"host": "0.0.0.0"})
    resource, driver = _gpu(gpu)
    host = target.host if ":" not in target.host else f"[{target.host}]"
    return {
        **base_context(target, decision, version),
        "name": "vllm",
        "image": image,
        "serve_args": serve_args(pod_target, decision, version),
        "env_items": target.env,
        "summary": summary_line(decision),
        "gpus_per_pod": gpus,
        "gpu_resource": resource,
        "gpu_driver": driver,
        "container_port": target.port,
        "service_port": target.port,
        "published": f"{host}:{target.port}:{target.port}",
        "startup_minutes": STARTUP_MINUTES,
    }


def _env(version: str):
    env = _environment(version)
    env.filters.update(yamlq=quoting.yamlq, dollars=quoting.dollars)
    return env


def render_k8s(target: Target, decision: Decision, *, version: str = DEFAULT_VERSION, image: str, gpu: str | None = None,
               weight_bytes: int | None = None, gpus_per_node: int | None = None) -> dict[str, str]:  # fmt: skip
    """vllm-secret.yaml (0600) and vllm-deployment.yaml; for a layout larger than one node,
    vllm-lws.yaml (LeaderWorkerSet: Ray head + vLLM in the leader pod, Ray workers) instead."""
    from advisor.render import multinode

    major_minor = _check_version(version)
    quoting.check_image(image)
    lay = multinode.layout(decision, gpus_per_node or multinode.DEFAULT_GPUS_PER_NODE)
    if lay is not None:
        decision, target = multinode.apply(decision, target, lay)
    ctx = {**_context(target, decision, major_minor, image=image, gpu=gpu, gpus=decision.tensor_parallel_size * decision.data_parallel_size),
           "cache_size": cache_size(weight_bytes)}  # fmt: skip
    names = ("vllm-secret.yaml", "vllm-deployment.yaml")
    if lay is not None:
        ctx.update(ray=lay.model_dump(), leader_script=LEADER_SCRIPT.format(port=lay.port, gpus=lay.tp),
                   worker_script=WORKER_SCRIPT.format(port=lay.port, gpus=lay.tp))  # fmt: skip
        names = ("vllm-secret.yaml", "vllm-lws.yaml")
    env = _env(major_minor)
    return {name: env.get_template(f"{name}.j2").render(**ctx) for name in names}


def render_compose(target: Target, decision: Decision, *, version: str = DEFAULT_VERSION, image: str, gpu: str | None = None) -> dict[str, str]:
    """compose.yaml (0600: its environment holds the env, secrets included)."""
    import ipaddress

    from advisor.errors import UsageError

    major_minor = _check_version(version)
    try:
        ipaddress.ip_address(target.host)
    except ValueError:
        raise UsageError(f"--host {quoting.comment(target.host)}: Compose publishes a port on an IP address, not a host name "
                         "(e.g. --host 127.0.0.1 or --host 0.0.0.0)") from None  # fmt: skip
    quoting.check_image(image)
    ctx = _context(target, decision, major_minor, image=image, gpu=gpu, gpus=decision.tensor_parallel_size * decision.data_parallel_size)
    return {"compose.yaml": _env(major_minor).get_template("compose.yaml.j2").render(**ctx)}
