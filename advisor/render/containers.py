"""Kubernetes (Secret, PVC, Deployment, Service) and Docker Compose renderings of the same
serving command. Values go through ``yamlq`` (ASCII double-quoted YAML) and, where the
orchestrator expands variables, ``dollars``.

Inside a container vLLM listens on 0.0.0.0 (the pod / container network is private to it);
``--host`` then chooses where Compose publishes the port, and the Service fronts the pod in k8s.
"""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict

from advisor.domain.decision import Decision
from advisor.render import quoting
from advisor.render.files import _environment, base_context, needs_arctic, serve_args, summary_line
from advisor.render.flags import _check_version
from advisor.render.target import Target
from advisor.render.ray_start import RAY_START_SCRIPT
from advisor.vllm_facts import DEFAULT_VERSION

STARTUP_MINUTES = 60
# LeaderWorkerSet pods (vLLM's docs/deployment/frameworks/lws.md pattern): the leader starts the Ray
# head, waits for LWS_GROUP_SIZE nodes, then execs `vllm "$@"` with the rendered argv; a worker
# joins the head at $1 (the pod's $(LWS_LEADER_ADDRESS)).
# Ray starts through advisor.render.ray_start's program (token authentication, the pod's address, the dashboard on
# localhost, VLLM_API_KEY kept out of Ray; RAY_AUTH_TOKEN comes from vllm-secret.yaml: render with --env RAY_AUTH_TOKEN).
LEADER_SCRIPT = (
    "set -euo pipefail; (set -- head ray {port} {gpus}; " + RAY_START_SCRIPT.replace("{", "{{").replace("}", "}}") + "); "
    "export RAY_AUTH_MODE=token; "
    'until [ "$(ray status 2>/dev/null | sed -n "/^Active:/,/^Pending:/p" | grep -c node_ || true)" -ge "${{LWS_GROUP_SIZE}}" ]; '
    'do sleep 5; done; exec vllm "$@"'
)
WORKER_SCRIPT = 'set -- worker ray {port} {gpus} "$1"; ' + RAY_START_SCRIPT.replace("{", "{{").replace("}", "}}")

AMD_GPUS = ("MI300X", "MI325X", "MI250X")

NANOBIND_VERSION = "2.9.2"
"""nanobind release arctic-inference's build uses (scripts/install_arctic.sh NANOBIND_VERSION)."""

# Suffix decoding in a container: the server's first act is to check that Arctic Inference imports,
# failing with the fix in its message (an image the user named may lack it); then exec vLLM with the
# rendered argv ("$@").
ARCTIC_ENTRY = (
    'python3 -c "import arctic_inference.suffix_decoding" >/dev/null 2>&1 || { echo "suffix decoding needs '
    'Arctic Inference (arctic-inference==@PIN@), which this image lacks: build the image from the rendered '
    'Containerfile (docker build -f Containerfile .) and run that one" >&2; exit 1; }; exec vllm "$@"'
)


def default_image(version: str) -> str:
    """vLLM's OpenAI-server image of the release ``version``'s facts were read from."""
    from advisor.vllm_facts import facts

    return f"vllm/vllm-openai:v{facts(version).release}"


def arctic_image(version: str) -> str:
    """The local tag of the image the rendered Containerfile builds (the stock image + Arctic Inference)."""
    from advisor.vllm_facts import facts

    f = facts(version)
    return f"advisor/vllm-openai-arctic:v{f.release}-arctic{f.arctic_inference}"


class Images(BaseModel):
    """Which image runs and, for suffix decoding, what the Containerfile builds it from."""

    model_config = ConfigDict(extra="forbid")

    run: str
    base: str
    build: bool
    """compose builds ``run`` from the Containerfile (suffix, no --image given)."""
    given: bool


def images(decision: Decision, version: str, image: str | None) -> Images:
    """--image given: it runs (with suffix, the entry check tells if it lacks Arctic). Not given: the
    stock vLLM image, or with suffix the Containerfile's image built FROM it."""
    if image is not None:
        quoting.check_image(image)
    suffix = needs_arctic(decision, version)
    base = image or default_image(version)
    if image is not None or not suffix:
        return Images(run=base, base=base, build=False, given=image is not None)
    return Images(run=arctic_image(version), base=base, build=True, given=False)


def containerfile(target: Target, decision: Decision, version: str, imgs: Images) -> str:
    from advisor.vllm_facts import facts

    f = facts(version)
    ctx = {**base_context(target, decision, version), "base_image": imgs.base, "run_image": imgs.run,
           "nanobind": NANOBIND_VERSION, "arctic_source": f.sources.get("arctic_inference", "")}  # fmt: skip
    return _env(version).get_template("Containerfile.j2").render(**ctx)


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


def _context(target: Target, decision: Decision, version: str, *, imgs: Images, gpu: str | None, gpus: int) -> dict:
    from advisor.vllm_facts import facts

    pod_target = target.model_copy(update={"host": "0.0.0.0"})
    resource, driver = _gpu(gpu)
    host = target.host if ":" not in target.host else f"[{target.host}]"
    return {
        **base_context(target, decision, version),
        "name": "vllm",
        "image": imgs.run,
        "build": imgs.build,
        "arctic_entry": ARCTIC_ENTRY.replace("@PIN@", facts(version).arctic_inference or ""),
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


def render_k8s(target: Target, decision: Decision, *, version: str = DEFAULT_VERSION, image: str | None = None,
               gpu: str | None = None, weight_bytes: int | None = None, gpus_per_node: int | None = None) -> dict[str, str]:  # fmt: skip
    """vllm-secret.yaml (0600) and vllm-deployment.yaml; for a layout larger than one node,
    vllm-lws.yaml (LeaderWorkerSet: Ray head + vLLM in the leader pod, Ray workers) instead. With
    suffix decoding also the Containerfile of the image the manifests name (stock vLLM + Arctic)."""
    from advisor.render import multinode

    major_minor = _check_version(version)
    imgs = images(decision, major_minor, image)
    lay = multinode.layout(decision, gpus_per_node or multinode.DEFAULT_GPUS_PER_NODE)
    multinode.check_speculation(decision, lay, major_minor)
    if lay is not None:
        decision, target = multinode.apply(decision, target, lay)
    ctx = {**_context(target, decision, major_minor, imgs=imgs, gpu=gpu, gpus=decision.tensor_parallel_size * decision.data_parallel_size),
           "cache_size": cache_size(weight_bytes)}  # fmt: skip
    names = ("vllm-secret.yaml", "vllm-deployment.yaml")
    if lay is not None:
        ctx.update(ray=lay.model_dump(), leader_script=LEADER_SCRIPT.format(port=lay.port, gpus=lay.tp),
                   worker_script=WORKER_SCRIPT.format(port=lay.port, gpus=lay.tp))  # fmt: skip
        names = ("vllm-secret.yaml", "vllm-lws.yaml")
    env = _env(major_minor)
    files = {name: env.get_template(f"{name}.j2").render(**ctx) for name in names}
    if ctx["needs_arctic"]:
        files["Containerfile"] = containerfile(target, decision, major_minor, imgs)
    return files


def render_compose(target: Target, decision: Decision, *, version: str = DEFAULT_VERSION, image: str | None = None,
                   gpu: str | None = None) -> dict[str, str]:  # fmt: skip
    """compose.yaml (0600: its environment holds the env, secrets included); with suffix decoding
    also the Containerfile compose builds the image from (stock vLLM + Arctic Inference)."""
    import ipaddress

    from advisor.errors import UsageError

    major_minor = _check_version(version)
    try:
        ipaddress.ip_address(target.host)
    except ValueError:
        raise UsageError(f"--host {quoting.comment(target.host)}: Compose publishes a port on an IP address, not a host name "
                         "(e.g. --host 127.0.0.1 or --host 0.0.0.0)") from None  # fmt: skip
    imgs = images(decision, major_minor, image)
    ctx = _context(target, decision, major_minor, imgs=imgs, gpu=gpu, gpus=decision.tensor_parallel_size * decision.data_parallel_size)
    files = {"compose.yaml": _env(major_minor).get_template("compose.yaml.j2").render(**ctx)}
    if ctx["needs_arctic"]:
        files["Containerfile"] = containerfile(target, decision, major_minor, imgs)
    return files


def container_warnings(decision: Decision, version: str, image: str | None, fmt: str) -> list[str]:
    """What the user must do for Arctic Inference that the files cannot do themselves."""
    if not needs_arctic(decision, _check_version(version)):
        return []
    imgs = images(decision, _check_version(version), image)
    if imgs.given:
        return [f"suffix decoding needs Arctic Inference: the image {imgs.run} you named must carry it (the container "
                "checks at start and stops with the fix); the rendered Containerfile builds one FROM it"]  # fmt: skip
    if fmt == "k8s":
        return [f"suffix decoding needs Arctic Inference, which the stock vLLM image lacks: the manifests run {imgs.run}; "
                f"build it from the rendered Containerfile and push it where the cluster pulls from (docker build -t "
                f"REGISTRY/{imgs.run.split('/', 1)[-1]} -f Containerfile . && docker push …, then --image that name)"]  # fmt: skip
    return []
