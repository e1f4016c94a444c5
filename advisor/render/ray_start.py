"""Starting a Ray node for multi-node vLLM, safely (pure text): one bash program every rendered file runs (launch.sh,
ray-worker.sh, the systemd head and worker units, the LeaderWorkerSet's pods).

Ray's control plane (GCS, dashboard, job and client servers) runs code for anyone who reaches its ports, and its
token authentication is off by default (https://docs.ray.io/en/latest/ray-security/token-auth.html: Ray 2.52.0
added it, ``RAY_AUTH_MODE=token`` with the shared secret in ``RAY_AUTH_TOKEN`` on every node; the
advisory https://advisories.gitlab.com/pkg/pypi/ray/ calls the default insecure). So the program:

- refuses to start without ``RAY_AUTH_TOKEN`` (or ``RAY_AUTH_TOKEN_PATH``), and refuses a Ray older than 2.52 (no
  token authentication) unless ``RAY_ALLOW_UNAUTHENTICATED=1`` says the network is private and firewalled;
- starts Ray with ``RAY_AUTH_MODE=token``, advertised on this node's own address (``--node-ip-address``, from
  ``RAY_NODE_IP`` or the first address ``hostname -I`` lists), the dashboard on 127.0.0.1;
- keeps the serving secret out of Ray's processes (``env -u VLLM_API_KEY``: only vLLM's API server checks it).
  ``HF_TOKEN`` stays: vLLM's workers on every node load the weights (pre-download them and drop it where you can).

Args: ``head BIN PORT GPUS`` or ``worker BIN PORT GPUS HEAD_ADDRESS``. Exit 2, one line, when it refuses.
The firewall rule to pair it with is in docs/deploy.md.
"""

from __future__ import annotations

MIN_TOKEN_AUTH = "2.52"
"""First Ray release with token authentication (docs.ray.io ray-security/token-auth)."""

RAY_START_SCRIPT = (
    'set -euo pipefail; mode="$1"; bin="$2"; port="$3"; gpus="$4"; '
    'if [ -z "${RAY_AUTH_TOKEN:-}" ] && [ -z "${RAY_AUTH_TOKEN_PATH:-}" ]; then '
    'echo "ray: set RAY_AUTH_TOKEN (the same secret on every node, e.g. openssl rand -hex 32) in the env file: without '
    'it Ray runs code for anyone who reaches its ports" >&2; exit 2; fi; '
    'v="$("$bin" --version 2>/dev/null | grep -Eo "[0-9]+[.][0-9]+([.][0-9]+)?" | head -n 1 || true)"; '
    f'if [ "$(printf "%s\\n{MIN_TOKEN_AUTH}\\n" "${{v:-0}}" | sort -V | head -n 1)" != "{MIN_TOKEN_AUTH}" ] '
    '&& [ "${RAY_ALLOW_UNAUTHENTICATED:-0}" != 1 ]; then '
    f'echo "ray: Ray ${{v:-unknown}} has no token authentication ({MIN_TOKEN_AUTH}+): upgrade Ray, or set '
    'RAY_ALLOW_UNAUTHENTICATED=1 on a private network whose firewall admits only the cluster nodes" >&2; exit 2; fi; '
    'export RAY_AUTH_MODE=token; ip="${RAY_NODE_IP:-$(hostname -I 2>/dev/null | cut -d " " -f 1)}"; '
    'if [ -z "$ip" ]; then echo "ray: set RAY_NODE_IP to this node\'s address on the cluster network" >&2; exit 2; fi; '
    'if [ "$mode" = head ]; then exec env -u VLLM_API_KEY "$bin" start --head --node-ip-address="$ip" --port="$port" '
    '--dashboard-host=127.0.0.1 --num-gpus="$gpus" --disable-usage-stats; fi; '
    'exec env -u VLLM_API_KEY "$bin" start --address="$5:$port" --node-ip-address="$ip" --num-gpus="$gpus" --block '
    "--disable-usage-stats"
)


def head_argv(ray_bin: str, port: int, gpus: int) -> list[str]:
    """argv that starts this node as the Ray head (returns once Ray is up)."""
    return ["/bin/bash", "-c", RAY_START_SCRIPT, "ray-start", "head", ray_bin, str(port), str(gpus)]


def worker_argv(ray_bin: str, port: int, gpus: int, head: str) -> list[str]:
    """argv that joins this node to the head at ``head`` (blocks while the node runs)."""
    return ["/bin/bash", "-c", RAY_START_SCRIPT, "ray-start", "worker", ray_bin, str(port), str(gpus), head]
