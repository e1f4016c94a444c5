"""Where and how the rendered server runs: the validated deployment inputs every renderer shares.

``make_target`` is the one place user-supplied deployment values are checked; each renderer then
quotes them for its own destination (advisor.render.quoting).
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from advisor.errors import UsageError
from advisor.domain.decision import DSA_ENV, Decision
from advisor.render import quoting

ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
from advisor.domain.secrets import SECRET_NAME  # noqa: E402  (one rule: advisor.domain.secrets)
"""Env names whose values are secrets: they go to vllm.env (0600) or a Kubernetes Secret only."""


class Target(BaseModel):
    """Validated deployment inputs (what is not part of the serving Decision)."""

    model_config = ConfigDict(extra="forbid")

    model: str
    """What ``vllm serve`` gets as MODEL: a hub id, or an absolute local path."""
    vllm_bin: str = "vllm"
    """The executable as the user gave it (launch.sh's default; VLLM_BIN overrides it there)."""
    exec_path: str = "vllm"
    """The executable for the unit: absolute when it could be resolved at render time."""
    env_file: str = "/etc/vllm/vllm.env"
    host: str = "127.0.0.1"
    port: int = 8000
    served_model_name: str | None = None
    unit_name: str = "vllm.service"
    env: list[tuple[str, str]] = Field(default_factory=list)
    """Every env variable for the server, sorted by name (the decision's plus --env)."""
    parallel_args: list[str] = Field(default_factory=list)
    """Layout flags beyond the decision's (multi-node: --pipeline-parallel-size, Ray backend)."""
    warnings: list[str] = Field(default_factory=list)

    def health_host(self) -> str:
        """Where a local readiness probe connects: the loopback for a wildcard bind."""
        return {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(self.host, self.host)

    def deploy_args(self) -> list[str]:
        """``vllm serve`` arguments that are about the deployment, not the engine."""
        args = ["--host", self.host, "--port", str(self.port)]
        if self.served_model_name is not None:
            args += ["--served-model-name", self.served_model_name]
        return args

    def secret_env(self) -> list[tuple[str, str]]:
        return [(k, v) for k, v in self.env if SECRET_NAME.search(k)]

    def plain_env(self) -> list[tuple[str, str]]:
        return [(k, v) for k, v in self.env if not SECRET_NAME.search(k)]


def serve_model(model: str) -> str:
    """A model given as a local path becomes absolute (a config.json path becomes its folder);
    anything else (a hub id) is kept as given."""
    try:
        path = Path(model).expanduser()
    except RuntimeError:
        return model
    if model and path.exists():
        path = path.resolve()
        return str(path.parent if path.is_file() else path)
    return model


def resolve_program(vllm_bin: str, which=shutil.which) -> tuple[str, str | None]:
    """(path for the unit, warning or None). A name or relative path is resolved now, so the unit
    runs the executable the user tested, not whatever systemd's PATH finds."""
    if vllm_bin.startswith("/"):
        return vllm_bin, None
    if "/" in vllm_bin:
        return os.path.abspath(vllm_bin), None
    found = which(vllm_bin)
    if found:
        return os.path.abspath(found), None
    return vllm_bin, (
        f"{quoting.comment(vllm_bin)} is not on PATH here: the unit runs it by name from systemd's own PATH; "
        "pass --vllm-bin /absolute/path/to/vllm to pin it"
    )


def decision_env(decision: Decision) -> tuple[dict[str, str], list[str]]:
    """The decision's env, and a warning for each DSA variable left out because the DSA block is off."""
    env, warnings = {}, []
    for name, value in decision.env.items():
        if name in DSA_ENV and not decision.dsa_env:
            warnings.append(f"{name} left out of vllm.env: the decision has the DSA env block off")
            continue
        env[name] = value
    return env, warnings


def make_target(
    model: str,
    decision: Decision,
    *,
    vllm_bin: str = "vllm",
    env_file: str = "/etc/vllm/vllm.env",
    host: str = "127.0.0.1",
    port: int = 8000,
    served_model_name: str | None = None,
    unit_name: str = "vllm.service",
    extra_env: dict[str, str] | None = None,
    which=shutil.which,
    resolve: bool = True,
) -> Target:
    """Check every deployment value (UsageError naming the bad one) and collect the env.
    ``resolve``: look ``vllm_bin`` up on this machine's PATH (for the unit; not for a container)."""
    quoting.check_arg(model, "MODEL")
    quoting.check_program(vllm_bin)
    exec_path, warning = resolve_program(vllm_bin, which) if resolve else (vllm_bin, None)
    quoting.check_program(exec_path)
    quoting.sdexe(exec_path)  # what systemd accepts as an executable path
    quoting.check_abs_path(env_file, "--env-file")
    if served_model_name is not None:
        quoting.check_arg(served_model_name, "--served-model-name")
    env, warnings = decision_env(decision)
    for name, value in (extra_env or {}).items():
        env[name] = value
    for name, value in env.items():
        if not ENV_NAME.match(name):
            raise UsageError(f"environment variable name {quoting.comment(name)} is not valid")
        quoting.envq(value)  # refuses newlines and NULs
    if warning:
        warnings.append(warning)
    return Target(
        model=model, vllm_bin=vllm_bin, exec_path=exec_path, env_file=env_file, host=quoting.check_host(host),
        port=quoting.check_port(port), served_model_name=served_model_name, unit_name=quoting.check_unit_name(unit_name),
        env=sorted(env.items()), warnings=warnings,
    )  # fmt: skip


def parse_env_options(items: list[str] | None, environ=os.environ) -> dict[str, str]:
    """``--env NAME=VALUE`` or ``--env NAME`` (value taken from advisor's own environment, so a
    secret need not appear on a command line)."""
    out: dict[str, str] = {}
    for item in items or []:
        name, sep, value = item.partition("=")
        if not ENV_NAME.match(name):
            raise UsageError(f"--env {quoting.comment(item)}: {quoting.comment(name)} is not a valid variable name")
        if not sep:
            if name not in environ:
                raise UsageError(f"--env {name}: {name} is not set in this environment (use --env {name}=VALUE)")
            value = environ[name]
        out[name] = value
    return out
