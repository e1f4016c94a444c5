"""Render launch.sh, vllm.service and vllm.env from the templates (Jinja2, StrictUndefined).

Templates are looked up in ``templates/vllm-<major.minor>/`` first and then in the shared
``templates/vllm/``: a version gets its own file only where its text really differs.
"""

from __future__ import annotations

import shutil

from advisor import __version__
from advisor.errors import UsageError
from advisor.domain.decision import Decision
from advisor.render import quoting
from advisor.render.flags import _check_version, serve_argv
from advisor.render.target import Target, make_target
from advisor.vllm_facts import DEFAULT_VERSION, facts

FILES = ("launch.sh", "vllm.service", "vllm.env")
MULTINODE_FILES = ("ray-worker.sh", "vllm-ray-worker.service")

TIMEOUT_START_S = 3600
"""systemd start timeout: download + load + torch.compile + CUDA graph capture of a 400B-class
model takes tens of minutes; the readiness check below keeps the unit 'activating' till then."""

START_LIMIT_INTERVAL_S = 6 * 3600
START_LIMIT_BURST = 3
HOME_PREFIXES = ("/home/", "/root/", "/run/user/")
"""A model or executable under these needs ProtectHome=read-only instead of yes."""
TMP_PREFIXES = ("/tmp/", "/var/tmp/")
"""PrivateTmp=yes gives the unit its own empty /tmp and /var/tmp: nothing under these is visible to it."""


def _unit_paths(target: Target) -> list[tuple[str, str]]:
    return [("MODEL", target.model), ("the executable", target.exec_path)]


def protect_home(target: Target) -> str:
    return "read-only" if any(p.startswith(HOME_PREFIXES) for _, p in _unit_paths(target)) else "yes"


def unit_warnings(target: Target) -> list[str]:
    """What the unit's sandbox does to the paths it is given: PrivateTmp hides /tmp, ProtectHome
    makes home directories read-only (and a home directory's 0700 mode keeps the dynamic user out)."""
    out = []
    for what, path in _unit_paths(target):
        if path.startswith(TMP_PREFIXES) or path in ("/tmp", "/var/tmp"):
            out.append(f"{what} {quoting.comment(path)} is under /tmp or /var/tmp, which the unit cannot see (PrivateTmp=yes "
                       "gives it an empty private /tmp): move it, e.g. to /opt or /srv, and render again")  # fmt: skip
        elif path.startswith(HOME_PREFIXES):
            out.append(f"{what} {quoting.comment(path)} is in a home directory: the unit gets ProtectHome=read-only instead of "
                       "yes, and its dynamic user can read it only if every directory on the way is world-readable "
                       "(home directories are often 0700); a path under /opt or /srv avoids both")  # fmt: skip
    return out
DEVICE_ALLOW: tuple[str, ...] = ()
"""DeviceAllow= lines (empty: DevicePolicy stays 'auto', every device node allowed; see docs/deploy.md)."""

# Readiness: bash alone (no curl in a minimal image). $1 host, $2 port are passed as separate
# arguments, so no rendered value is ever part of the script text. vLLM's /health answers 200 once
# the engine is up and is not behind --api-key (vllm/entrypoints/openai/api_server.py).
READY_SCRIPT = (
    'until (exec 3<>"/dev/tcp/$1/$2" && printf "GET /health HTTP/1.0\\r\\n\\r\\n" >&3 '
    '&& IFS= read -r line <&3 && [[ $line == *" 200 "* ]]) 2>/dev/null; do sleep 5; done'
)


# Suffix decoding: the interpreter vLLM runs under ($1's #! line, else python3) must import Arctic
# Inference, else the unit fails before vLLM starts with the fix in its message; $2 = the pinned release.
ARCTIC_CHECK_SCRIPT = (
    'p="$(command -v -- "$1" || true)"; l=""; [ -n "$p" ] && { IFS= read -r l < "$p" || true; }; '
    'case "$l" in "#!"*) read -r -a py <<< "${l#??}" ;; *) py=(python3) ;; esac; '
    '"${py[@]}" -c "import arctic_inference.suffix_decoding" >/dev/null 2>&1 && exit 0; '
    'echo "suffix decoding needs Arctic Inference, but import arctic_inference.suffix_decoding fails in ${py[*]}: '
    'install it there (${py[*]} -m pip install --no-build-isolation arctic-inference==$2 builds it against the torch of vLLM; '
    'scripts/install_arctic.sh in the advisor repository does it), or render again with suffix off" >&2; exit 1'
)

# Multi-node head: wait until $2 Ray nodes are alive (`ray status`, section "Active:"), $1 = ray.
from advisor.render.ray_start import RAY_START_SCRIPT, head_argv, worker_argv  # noqa: E402

RAY_WAIT_SCRIPT = (
    'for _ in $(seq 1 120); do n="$("$1" status 2>/dev/null | sed -n "/^Active:/,/^Pending:/p" | grep -c node_ || true)"; '
    '[ "$n" -ge "$2" ] && exit 0; sleep 5; done; echo "ray: fewer than $2 nodes joined in 10 minutes" >&2; exit 1'
)


def template_dirs(version: str) -> list[str]:
    """Where ``version``'s templates are looked up, in order: its own folder (if any), then the shared one."""
    from advisor.paths import data_path

    root = data_path("templates")
    shared = root / "vllm"
    if not shared.is_dir():
        raise UsageError(f"no vLLM templates under {root}: the installation is incomplete; reinstall advisor")
    own = root / f"vllm-{version}"
    return [str(p) for p in (own, shared) if p.is_dir()]


def _environment(version: str):
    from jinja2 import Environment, FileSystemLoader, StrictUndefined

    env = Environment(
        loader=FileSystemLoader(template_dirs(version)),
        undefined=StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(shq=quoting.shq, envq=quoting.envq, sdq=quoting.sdq, sdexe=quoting.sdexe, sdpath=quoting.sdpath,
                       sdtext=quoting.sdtext, sdcomment=quoting.comment, tojson=quoting.comment)  # fmt: skip
    return env


def summary_line(decision: Decision) -> str:
    d = decision
    spec = f"{d.speculative_method} K={d.num_speculative_tokens}" if d.speculative_method else "no speculation"
    par = f"TP {d.tensor_parallel_size}" + (f" x DP {d.data_parallel_size}" if d.data_parallel_size > 1 else "")
    par += f" x PP {d.pipeline_parallel_size} over {d.nodes} nodes" if d.pipeline_parallel_size > 1 else ""
    par += " + EP" if d.enable_expert_parallel else ""
    return (f"{spec}, gmu {d.gpu_memory_utilization:g}, {par}, "
            f"max_model_len {d.max_model_len}, cudagraph {d.cudagraph_mode}")  # fmt: skip


def needs_arctic(decision: Decision, version: str) -> bool:
    """Suffix decoding on a line whose vLLM imports Arctic Inference for it (advisor.vllm_facts arctic_inference;
    0.34's suffix speculator is vLLM's own)."""
    return decision.speculative_method == "suffix" and facts(version).arctic_inference is not None


def base_context(target: Target, decision: Decision, version: str) -> dict:
    """What every template (systemd, k8s, compose) shares."""
    return {
        "vllm_version": version,
        "advisor_version": __version__,
        "model_comment": quoting.comment(target.model),
        "decision_summary_comment": quoting.comment(summary_line(decision)),
        "description": f"vLLM {version} serving {target.model}",
        "required_gpus": int(decision.tensor_parallel_size * decision.data_parallel_size),
        "needs_arctic": needs_arctic(decision, version),
        "arctic": facts(version).arctic_inference,
        "target": target,
    }


def serve_args(target: Target, decision: Decision, version: str) -> list[str]:
    """Everything after the program: ``serve MODEL engine-flags deploy-flags``."""
    return [*serve_argv(target.model, decision, version)[1:], *target.parallel_args, *target.deploy_args()]


def render_target(target: Target, decision: Decision, *, version: str = DEFAULT_VERSION, host_dsa_queues: str | None = None,
                  gpus_per_node: int | None = None) -> dict[str, str]:  # fmt: skip
    """The files for an already validated target (pure): launch.sh, vllm.service, vllm.env, and for
    a layout larger than one node (advisor.render.multinode) ray-worker.sh and vllm-ray-worker.service."""
    from advisor.render import multinode

    major_minor = _check_version(version)
    env = _environment(major_minor)
    lay = multinode.layout(decision, gpus_per_node or multinode.DEFAULT_GPUS_PER_NODE)
    multinode.check_speculation(decision, lay, major_minor)
    if lay is not None:
        decision, target = multinode.apply(decision, target, lay)
    args = serve_args(target, decision, major_minor)
    ray = None if lay is None else {**lay.model_dump(), "bin": multinode.ray_program(target.exec_path)}
    ctx = {
        **base_context(target, decision, major_minor),
        "expected_dsa": host_dsa_queues or "either",
        "serve_args": args,
        "env_items": target.env,
        "exec_argv": [target.exec_path, *args],
        "ready_argv": ["/bin/bash", "-c", READY_SCRIPT, "vllm-ready", target.health_host(), str(target.port)],
        "arctic_check_argv": ["/bin/bash", "-c", ARCTIC_CHECK_SCRIPT, "arctic-check", target.exec_path,
                              facts(major_minor).arctic_inference or ""],
        "env_file": target.env_file,
        "unit_name": target.unit_name,
        "timeout_start_s": TIMEOUT_START_S,
        "set_names": {name for name, _ in target.env},
        "start_limit_interval_s": START_LIMIT_INTERVAL_S,
        "start_limit_burst": START_LIMIT_BURST,
        "protect_home": protect_home(target),
        "device_allow": DEVICE_ALLOW,
        "ray": ray,
        "ray_wait_argv": None if ray is None else ["/bin/bash", "-c", RAY_WAIT_SCRIPT, "ray-wait", ray["bin"], str(ray["nodes"])],
        "ray_start_script": RAY_START_SCRIPT,
        "ray_head_argv": None if ray is None else head_argv(ray["bin"], ray["port"], ray["tp"]),
        "ray_worker_argv": None if ray is None else worker_argv(ray["bin"], ray["port"], ray["tp"], "")[:-1],
    }
    names = FILES + (MULTINODE_FILES if ray else ())
    return {name: env.get_template(f"{name}.j2").render(**ctx) for name in names}


def render_files(
    model: str,
    decision: Decision,
    *,
    version: str = DEFAULT_VERSION,
    vllm_bin: str = "vllm",
    env_file: str = "/etc/vllm/vllm.env",
    unit_name: str = "vllm.service",
    host_dsa_queues: str | None = None,
    host: str = "127.0.0.1",
    port: int = 8000,
    served_model_name: str | None = None,
    extra_env: dict[str, str] | None = None,
    which=shutil.which,
) -> dict[str, str]:
    """The three files' contents, keyed by file name (pure but for resolving ``vllm_bin`` on PATH)."""
    target = make_target(model, decision, vllm_bin=vllm_bin, env_file=env_file, host=host, port=port,
                         served_model_name=served_model_name, unit_name=unit_name, extra_env=extra_env, which=which)  # fmt: skip
    return render_target(target, decision, version=version, host_dsa_queues=host_dsa_queues)
