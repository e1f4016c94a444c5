"""More GPUs than a node: TP inside the node x PP across nodes through Ray (vLLM's
parallelism_scaling docs). Scripts run against recording fakes of `vllm` and `ray`; both units
pass `systemd-analyze verify`; vLLM's parser accepts the head's command (tests/test_vllm_contract.py)."""

from __future__ import annotations

import json
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from advisor.errors import UsageError
from advisor.domain.decision import Decision
from advisor.render.files import render_files
from advisor.render.multinode import DOCS, layout
from advisor.render.write import write_files
from tests.render_helpers import unit as sd
from tests.render_helpers.fakebin import make_fake

D16 = Decision(tensor_parallel_size=16, gpu_memory_utilization=0.85, env={"VLLM_PLUGINS": ""})
FAKE_RAY = """#!/bin/sh
[ "$1" = --version ] && { echo "ray, version 2.53.0"; exit 0; }
echo "$*" >> "$RAY_LOG"
[ "$1" = start ] && echo "RAY_AUTH_MODE=${RAY_AUTH_MODE:-} VLLM_API_KEY=${VLLM_API_KEY:-unset}" >> "$RAY_LOG"
if [ "$1" = status ]; then
  printf 'Node status\\n----\\nActive:\\n 1 node_aaa\\n 1 node_bbb\\nPending:\\n (no pending nodes)\\n'
fi
"""


@pytest.mark.parametrize(("tp", "per_node", "want"), [(16, 8, (8, 2)), (32, 8, (8, 4)), (8, 8, None), (4, 8, None), (16, 4, (4, 4))])
def test_layout_is_tp_per_node_times_pp_nodes(tp, per_node, want):
    got = layout(Decision(tensor_parallel_size=tp), per_node)
    assert (got and (got.tp, got.pp)) == want or (got is None and want is None)


def test_a_layout_that_does_not_split_into_nodes_is_refused():
    with pytest.raises(UsageError, match="do not split into nodes of 8"):
        layout(Decision(tensor_parallel_size=12), 8)


def _bin(tmp_path: Path) -> Path:
    fake = make_fake(tmp_path / "bin")
    ray = fake.parent / "ray"
    ray.write_text(FAKE_RAY)
    ray.chmod(ray.stat().st_mode | stat.S_IEXEC)
    return fake


def _launch_env(fake: Path, tmp_path: Path, **extra: str) -> dict[str, str]:
    """The environment the rendered head and worker scripts run in against the recording fakes."""
    return {"PATH": f"{fake.parent}:/usr/bin:/bin", "ADVISOR_SKIP_PREFLIGHT": "1", "FAKE_OUT": str(tmp_path / "r.json"),
            "RAY_LOG": str(tmp_path / "ray.log"), "HOME": str(tmp_path), "RAY_NODE_IP": "10.0.0.1", **extra}  # fmt: skip


def test_16_gpus_on_nodes_of_8_render_tp8_pp2_through_ray(tmp_path):
    fake = _bin(tmp_path)
    files = render_files("m/x", D16, vllm_bin=str(fake))
    assert set(files) == {"launch.sh", "vllm.service", "vllm.env", "ray-worker.sh", "vllm-ray-worker.service"}
    argv = sd.exec_argv(sd.one(files["vllm.service"], "ExecStart"))
    flags = dict(zip(argv[3::2], argv[4::2]))
    assert (flags["--tensor-parallel-size"], flags["--pipeline-parallel-size"], flags["--distributed-executor-backend"]) == ("8", "2", "ray")
    pre = [sd.exec_argv(v) for _, k, v in sd.directives(files["vllm.service"]) if k == "ExecStartPre"]
    from advisor.render.ray_start import RAY_START_SCRIPT

    # Ray starts through the guarded program (token authentication, node address, VLLM_API_KEY kept out: issue 43 item 3)
    assert pre[0] == ["/bin/bash", "-c", RAY_START_SCRIPT, "ray-start", "head", str(fake.parent / "ray"), "6379", "8"]
    assert "Environment=RAY_AUTH_MODE=token" in files["vllm.service"].splitlines()
    assert DOCS in files["launch.sh"] and DOCS in files["vllm.service"]
    worker = sd.exec_argv(sd.one(files["vllm-ray-worker.service"], "ExecStart"), allow=frozenset({"RAY_HEAD_ADDRESS"}))
    assert worker[4:9] == ["worker", str(fake.parent / "ray"), "6379", "8", "${RAY_HEAD_ADDRESS}"]  # systemd expands it


def test_head_script_starts_ray_waits_for_the_nodes_then_serves(tmp_path):
    fake = _bin(tmp_path)
    out = tmp_path / "out"
    write_files(out, render_files("m/x", D16, vllm_bin=str(fake)))
    log = tmp_path / "ray.log"
    env = _launch_env(fake, tmp_path)
    refused = subprocess.run(["bash", str(out / "launch.sh")], env=env, capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2 and "set RAY_AUTH_TOKEN" in refused.stderr and not log.exists()
    env |= {"RAY_AUTH_TOKEN": "s3cret", "VLLM_API_KEY": "serving-key"}
    proc = subprocess.run(["bash", str(out / "launch.sh")], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    lines = log.read_text().splitlines()
    assert lines[0] == "start --head --node-ip-address=10.0.0.1 --port=6379 --dashboard-host=127.0.0.1 --num-gpus=8 --disable-usage-stats"
    assert lines[1] == "RAY_AUTH_MODE=token VLLM_API_KEY=unset"  # Ray never sees the serving secret
    argv = json.loads((tmp_path / "r.json").read_text())["argv"]
    assert argv[argv.index("--pipeline-parallel-size") + 1] == "2" and argv[argv.index("--tensor-parallel-size") + 1] == "8"
    env["RAY_NODE_IP"] = "10.0.0.2"
    worker = subprocess.run(["bash", str(out / "ray-worker.sh"), "10.0.0.1"], env=env, capture_output=True, text=True, timeout=60)
    assert worker.returncode == 0, worker.stderr
    assert log.read_text().splitlines()[-2:] == [
        "start --address=10.0.0.1:6379 --node-ip-address=10.0.0.2 --num-gpus=8 --block --disable-usage-stats",
        "RAY_AUTH_MODE=token VLLM_API_KEY=unset"]


def test_ray_refuses_a_release_without_token_authentication(tmp_path):
    fake = _bin(tmp_path)
    (fake.parent / "ray").write_text(FAKE_RAY.replace("2.53.0", "2.51.2"))
    out = tmp_path / "out"
    write_files(out, render_files("m/x", D16, vllm_bin=str(fake)))
    env = _launch_env(fake, tmp_path, RAY_AUTH_TOKEN="s")
    proc = subprocess.run(["bash", str(out / "launch.sh")], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "Ray 2.51.2 has no token authentication" in proc.stderr
    proc = subprocess.run(["bash", str(out / "launch.sh")], env=env | {"RAY_ALLOW_UNAUTHENTICATED": "1"}, capture_output=True,
                          text=True, timeout=60)  # fmt: skip
    assert proc.returncode == 0, proc.stderr


def test_head_script_gives_up_when_workers_do_not_join(tmp_path):
    fake = _bin(tmp_path)
    (fake.parent / "ray").write_text(FAKE_RAY.replace("\\n 1 node_bbb", ""))
    out = tmp_path / "out"
    write_files(out, render_files("m/x", D16, vllm_bin=str(fake)))
    env = _launch_env(fake, tmp_path, RAY_WAIT_S="0", RAY_AUTH_TOKEN="s")
    proc = subprocess.run(["bash", str(out / "launch.sh")], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and "fewer than 2 Ray nodes joined" in proc.stderr and not (tmp_path / "r.json").exists()


@pytest.mark.skipif(not shutil.which("systemd-analyze"), reason="systemd-analyze not installed (apt-get install systemd)")
def test_multinode_units_pass_systemd_analyze(tmp_path):
    fake = _bin(tmp_path)
    files = render_files("m/x", D16, vllm_bin=str(fake))
    units = []
    for name in ("vllm.service", "vllm-ray-worker.service"):
        (tmp_path / name).write_text(files[name])
        units.append(str(tmp_path / name))
    proc = subprocess.run(["systemd-analyze", "verify", "--man=no", *units], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and ".service" not in proc.stderr, proc.stderr
    from tests.test_render_unit import MAX_EXPOSURE, exposure

    assert all(exposure(Path(u)) <= MAX_EXPOSURE for u in units)


def test_unit_waits_for_the_ray_nodes_before_serving(tmp_path):
    """The head unit's second ExecStartPre= (as systemd splits it) returns 0 once `ray status` lists both nodes."""
    fake = _bin(tmp_path)
    unit = render_files("m/x", D16, vllm_bin=str(fake))["vllm.service"]
    wait = [sd.exec_argv(v) for _, k, v in sd.directives(unit) if k == "ExecStartPre"][1]
    assert wait[-2:] == [str(fake.parent / "ray"), "2"]
    env = {"PATH": "/usr/bin:/bin", "RAY_LOG": str(tmp_path / "ray.log")}
    assert subprocess.run(wait, env=env, capture_output=True, timeout=60).returncode == 0
    assert (tmp_path / "ray.log").read_text().splitlines() == ["status"]


def test_the_worker_unit_sees_a_vllm_in_a_home_directory(tmp_path):
    """Issue 43 item 9: the Ray worker unit hard-coded ProtectHome=yes (a vLLM under /root or /home was invisible)."""
    files = render_files("m/x", D16, vllm_bin="/home/ops/venv/bin/vllm")
    assert "ProtectHome=read-only" in files["vllm-ray-worker.service"].splitlines()
    assert "ProtectHome=read-only" in files["vllm.service"].splitlines()
    assert "ProtectHome=yes" in render_files("m/x", D16, vllm_bin="/opt/venv/bin/vllm")["vllm-ray-worker.service"].splitlines()
