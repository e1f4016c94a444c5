"""Render launch.sh, vllm.service and vllm.env from templates/vllm-<version>/ (Jinja2, StrictUndefined)."""

from __future__ import annotations

import re

from advisor import __version__
from advisor.errors import UsageError
from advisor.plan.decision import Decision
from advisor.render import quoting
from advisor.render.flags import UPSTREAM_ENV, DSA_ENV, _check_version, serve_argv

FILES = ("launch.sh", "vllm.service", "vllm.env")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _environment(version: str):
    from jinja2 import Environment, FileSystemLoader, StrictUndefined

    from advisor.paths import data_path

    folder = data_path("templates") / f"vllm-{version}"
    if not folder.is_dir():
        raise UsageError(f"no templates for vLLM {version} under {folder.parent}")
    env = Environment(
        loader=FileSystemLoader(str(folder)),
        undefined=StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(shq=quoting.shq, envq=quoting.envq, sdq=quoting.sdq, sdpath=quoting.sdpath,
                       sdtext=quoting.sdtext, sdcomment=quoting.comment)  # fmt: skip
    return env


def render_env(decision: Decision) -> list[tuple[str, str]]:
    """(name, value) pairs for vllm.env: the decision's env, keeping what the chosen vLLM reads
    plus the DSA block when a rule turned it on."""
    items = []
    for name, value in sorted(decision.env.items()):
        if not _ENV_NAME.match(name):
            raise UsageError(f"environment variable name {quoting.comment(name)} is not valid")
        if name in DSA_ENV:
            if decision.dsa_env:
                items.append((name, value))
        elif name in UPSTREAM_ENV or name.startswith("VLLM_"):
            items.append((name, value))
    return items


def render_files(
    model: str,
    decision: Decision,
    *,
    version: str = "0.32",
    vllm_bin: str = "vllm",
    env_file: str = "/etc/vllm/vllm.env",
    unit_name: str = "vllm.service",
    host_dsa_queues: str | None = None,
) -> dict[str, str]:
    """The three files' contents, keyed by file name (pure)."""
    major_minor = _check_version(version)
    env = _environment(major_minor)
    argv = serve_argv(model, decision, version)
    exec_argv = argv if vllm_bin.startswith("/") else ["/usr/bin/env", vllm_bin, *argv[1:]]
    exec_argv = [vllm_bin, *argv[1:]] if vllm_bin.startswith("/") else exec_argv
    spec = "suffix K=" + str(decision.num_speculative_tokens) if decision.speculative_method else "no speculation"
    ctx = {
        "vllm_version": major_minor,
        "advisor_version": __version__,
        "model_comment": quoting.comment(model),
        "decision_summary_comment": quoting.comment(
            f"{spec}, gmu {decision.gpu_memory_utilization:g}, TP {decision.tensor_parallel_size}, "
            f"max_model_len {decision.max_model_len}, cudagraph {decision.cudagraph_mode}"
        ),
        "required_gpus": int(decision.tensor_parallel_size),
        "expected_dsa": host_dsa_queues or "either",
        "vllm_bin_default": quoting.shq(vllm_bin)[1:-1] if quoting.shq(vllm_bin).startswith("'") else vllm_bin,
        "serve_args": argv[1:],
        "env_items": render_env(decision),
        "exec_argv": exec_argv,
        "env_file": env_file,
        "unit_name": unit_name,
        "description": f"vLLM {major_minor} serving {model}",
    }
    return {name: env.get_template(f"{name}.j2").render(**ctx) for name in FILES}
