"""`advisor render --format k8s` and `--format compose`, checked by real validators:
kubernetes-validate (the Kubernetes OpenAPI schemas, strict) for the manifests, and
docker-compose 1.29.2 (`config` and its own loader, from scripts/setup_compose_venv.sh) for the
Compose file. The hostile corpus goes through both: every value arrives exactly (after the
orchestrator's own `$$` rule) or is refused."""

from __future__ import annotations

import json
import shutil
import stat
import subprocess
from pathlib import Path

import yaml

from advisor.domain.decision import Decision
from advisor.render.containers import render_compose, render_k8s
from advisor.render.flags import serve_flags
from advisor.render.target import make_target
from advisor.render.write import write_files
from tests.render_helpers.corpus import HOSTILE
from tests.render_helpers.fakebin import make_fake
from tests.render_helpers.compose import compose_python

ROOT = Path(__file__).resolve().parents[1]
K8S_VERSION = "1.33.0"
DECISION = Decision(speculative_method="suffix", num_speculative_tokens=16, tensor_parallel_size=4, gpu_memory_utilization=0.85,
                    env={"VLLM_PLUGINS": "", "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"})  # fmt: skip
IMAGE = "vllm/vllm-openai:v0.32.0"
SECRETS = {"HF_TOKEN": "hf_SECRET", "VLLM_API_KEY": "sk-$(HF_TOKEN)${HOME}$$"}


def _ok(v: str) -> bool:
    return bool(v.strip()) and not v.startswith("-") and "\x00" not in v and not any(c in v for c in "\n\r")


def _k8s(model="org/model", served=None, env=None, **kw):
    target = make_target(model, DECISION, served_model_name=served, extra_env={**SECRETS, **(env or {})}, resolve=False)
    return target, render_k8s(target, DECISION, image=IMAGE, gpu=kw.get("gpu", "H100"), weight_bytes=141107412992)


def _unk8s(word: str) -> str:
    """Kubernetes' expansion of command/args (third_party/forked/golang/expansion): $$ -> $, $(VAR) -> value."""
    out, i = [], 0
    while i < len(word):
        if word[i] == "$" and word[i + 1 : i + 2] == "$":
            out.append("$")
            i += 2
        else:
            assert not (word[i] == "$" and word[i + 1 : i + 2] == "("), f"live $(VAR) in {word!r}"
            out.append(word[i])
            i += 1
    return "".join(out)


def _validate_k8s(docs: list[dict]) -> None:
    import kubernetes_validate

    for doc in docs:
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


class _StrictLoader(yaml.SafeLoader):
    """safe_load that refuses a repeated mapping key (PyYAML would keep the last one silently)."""


def _no_duplicates(loader, node, deep=False):
    keys = [loader.construct_object(k, deep=deep) for k, _ in node.value]
    assert len(keys) == len(set(map(str, keys))), f"duplicate key in {keys}"
    return yaml.SafeLoader.construct_mapping(loader, node, deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _no_duplicates)


def _load_all(text: str) -> list[dict]:
    return list(yaml.load_all(text, Loader=_StrictLoader))


def _docs(files: dict[str, str]) -> dict[str, dict]:
    return {d["kind"]: d for name, text in files.items() if name.endswith(".yaml") for d in _load_all(text)}


def test_k8s_manifests_validate_and_carry_the_command(tmp_path):
    target, files = _k8s(served="llama")
    written = write_files(tmp_path, files)
    proc = subprocess.run([shutil.which("kubernetes-validate") or "kubernetes-validate", "--strict", "-k", K8S_VERSION,
                           *(str(p) for p in written if p.suffix == ".yaml")], capture_output=True, text=True, timeout=120)  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("passed") == 4  # Secret, PVC, Deployment, Service
    assert stat.S_IMODE((tmp_path / "vllm-secret.yaml").stat().st_mode) == 0o600
    docs = _docs(files)
    pod = docs["Deployment"]["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    # Suffix: the container first checks Arctic Inference imports (tests/test_arctic_artifacts.py), then execs vllm.
    assert c["command"][:2] == ["/bin/bash", "-c"] and c["command"][3] == "vllm" and 'exec vllm "$$@"' in c["command"][2]
    assert [_unk8s(a) for a in c["args"]] == ["serve", "org/model", *serve_flags(DECISION), "--host", "0.0.0.0", "--port", "8000",
                                              "--served-model-name", "llama"]  # fmt: skip
    assert c["resources"]["limits"] == {"nvidia.com/gpu": 4} and c["envFrom"] == [{"secretRef": {"name": "vllm"}}]
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert c[probe]["httpGet"]["path"] == "/health"
    assert c["startupProbe"]["periodSeconds"] * c["startupProbe"]["failureThreshold"] >= 1800
    assert docs["Secret"]["stringData"] == dict(target.env) and docs["Secret"]["stringData"]["HF_TOKEN"] == "hf_SECRET"
    assert "hf_SECRET" not in files["vllm-deployment.yaml"]
    claim = pod["volumes"][0]["persistentVolumeClaim"]["claimName"]
    assert docs["PersistentVolumeClaim"]["metadata"]["name"] == claim and docs["PersistentVolumeClaim"]["spec"]["resources"]["requests"]["storage"] == "185Gi"
    assert docs["Service"]["spec"]["ports"][0]["targetPort"] == "http"


def test_k8s_amd_gpus_use_the_amd_resource():
    _, files = _k8s(gpu="MI300X")
    (c,) = _docs(files)["Deployment"]["spec"]["template"]["spec"]["containers"]
    assert c["resources"]["limits"] == {"amd.com/gpu": 4}


def test_k8s_hostile_values_arrive_exactly_and_validate():
    import kubernetes_validate

    checked = 0
    for value in HOSTILE:
        if not _ok(value):
            continue
        target, files = _k8s(model=value, served=value, env={"VLLM_HOSTILE": value})
        docs = _docs(files)
        for doc in docs.values():
            kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
        (c,) = docs["Deployment"]["spec"]["template"]["spec"]["containers"]
        args = [_unk8s(a) for a in c["args"]]
        assert args[1] == value and args[-1] == value, value
        assert docs["Secret"]["stringData"]["VLLM_HOSTILE"] == value
        assert docs["Deployment"]["metadata"]["annotations"]["advisor/model"] == value
        checked += 1
    assert checked >= 80



LOAD = """
import json, sys
from compose.config import config
from compose.config.environment import Environment
out = {}
for folder in sys.argv[1:]:
    details = config.find(folder, [folder + "/compose.yaml"], Environment.from_env_file(folder))
    (svc,) = config.load(details).services
    out[folder] = {"entrypoint": svc["entrypoint"], "command": svc["command"], "environment": svc["environment"],
                   "devices": svc["deploy"]["resources"]["reservations"]["devices"], "ports": [[p.external_ip, p.published, p.target] for p in svc["ports"]]}
print(json.dumps(out))
"""


def test_compose_file_validates_and_carries_the_command(tmp_path):
    python = compose_python()
    target = make_target("org/model", DECISION, extra_env=SECRETS, host="127.0.0.1", port=8001, resolve=False)
    write_files(tmp_path, render_compose(target, DECISION, image=IMAGE, gpu="H100"))
    assert stat.S_IMODE((tmp_path / "compose.yaml").stat().st_mode) == 0o600
    proc = subprocess.run([str(python.parent / "docker-compose"), "-f", str(tmp_path / "compose.yaml"), "config", "-q"],
                          capture_output=True, text=True, timeout=120, env={"PATH": "/usr/bin:/bin"})  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    got = json.loads(subprocess.run([str(python), "-c", LOAD, str(tmp_path)], capture_output=True, text=True, check=True,
                                    timeout=120, env={"PATH": "/usr/bin:/bin"}).stdout)[str(tmp_path)]  # fmt: skip
    assert got["entrypoint"][:2] == ["/bin/bash", "-c"] and got["entrypoint"][3] == "vllm"  # the Arctic check, then vllm
    assert got["command"] == ["serve", "org/model", *serve_flags(DECISION), "--host", "0.0.0.0", "--port", "8001"]
    assert {k: got["environment"][k] for k in SECRETS} == SECRETS  # $(…), ${…} and $$ arrive literally
    assert got["devices"] == [{"driver": "nvidia", "count": 4, "capabilities": ["gpu"]}]
    assert got["ports"] == [["127.0.0.1", 8001, 8001]]  # published on --host only


def test_compose_hostile_values_arrive_exactly(tmp_path):
    python = compose_python()
    folders = {}
    for i, value in enumerate(v for v in HOSTILE if _ok(v)):
        target = make_target(value, DECISION, served_model_name=value, extra_env={"VLLM_HOSTILE": value}, resolve=False)
        folder = tmp_path / f"c{i}"
        write_files(folder, render_compose(target, DECISION, image=IMAGE))
        folders[str(folder)] = value
    proc = subprocess.run([str(python), "-c", LOAD, *folders], capture_output=True, text=True, timeout=300, env={"PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout)
    for folder, value in folders.items():
        assert got[folder]["command"][1] == value and got[folder]["command"][-1] == value, value
        assert got[folder]["environment"]["VLLM_HOSTILE"] == value, value
    assert len(folders) >= 80


D16 = DECISION.model_copy(update={"tensor_parallel_size": 16, "speculative_method": None, "num_speculative_tokens": None})
"""Multi-node (PP) layouts run no speculation: no method the advisor renders is known to work with
PP (advisor.vllm_facts pp_speculative_methods)."""
FAKE_RAY = """#!/bin/sh
[ "$1" = --version ] && { echo "ray, version 2.53.0"; exit 0; }
echo "$*" >> "$RAY_LOG"
[ "$1" = status ] && printf 'Active:\\n 1 node_a\\n 1 node_b\\nPending:\\n'
exit 0
"""


def lws_pods(files: dict[str, str]) -> dict[str, dict]:
    """The LeaderWorkerSet's leader and worker pod templates, as Pods (kubernetes-validate has no
    schema for the LWS custom resource itself, so its pod templates are validated as Pods)."""
    (lws,) = [d for d in _load_all(files["vllm-lws.yaml"]) if d["kind"] == "LeaderWorkerSet"]
    tpl = lws["spec"]["leaderWorkerTemplate"]
    return {role: {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"vllm-{role}", **tpl[f"{role}Template"]["metadata"]},
                   "spec": tpl[f"{role}Template"]["spec"]} for role in ("leader", "worker")}  # fmt: skip


def test_k8s_multinode_is_a_leaderworkerset_whose_pods_validate_and_run(tmp_path):
    target = make_target("org/model", D16, extra_env=SECRETS, resolve=False)
    files = render_k8s(target, D16, image=IMAGE, gpu="H100")
    assert set(files) == {"vllm-secret.yaml", "vllm-lws.yaml"}
    docs = _load_all(files["vllm-lws.yaml"])
    assert [d["kind"] for d in docs] == ["LeaderWorkerSet", "Service"]
    assert docs[0]["spec"]["leaderWorkerTemplate"]["size"] == 2
    pods = lws_pods(files)
    _validate_k8s([docs[1], *pods.values()])
    leader, worker = (pods[r]["spec"]["containers"][0] for r in ("leader", "worker"))
    assert leader["resources"]["limits"] == worker["resources"]["limits"] == {"nvidia.com/gpu": 8}
    # Run both pods' commands (Kubernetes' $$ rule applied) against recording fakes of ray and vllm.
    fake = make_fake(tmp_path / "bin")
    (fake.parent / "ray").write_text(FAKE_RAY)
    (fake.parent / "ray").chmod(0o755)
    log, report = tmp_path / "ray.log", tmp_path / "r.json"
    env = {"PATH": f"{fake.parent}:/usr/bin:/bin", "RAY_LOG": str(log), "FAKE_OUT": str(report), "LWS_GROUP_SIZE": "2",
           "RAY_AUTH_TOKEN": "s3cret", "RAY_NODE_IP": "10.1.2.3"}  # fmt: skip
    run = [*leader["command"], *(_unk8s(a) for a in leader["args"])]
    assert subprocess.run(run, env=env, capture_output=True, timeout=60).returncode == 0
    argv = json.loads(report.read_text())["argv"]
    head = D16.model_copy(update={"tensor_parallel_size": 8, "pipeline_parallel_size": 2, "nodes": 2,
                                  "distributed_executor_backend": "ray"})  # the decision as it runs (issue 39)
    assert argv == ["serve", "org/model", *serve_flags(head), "--host", "0.0.0.0", "--port", "8000"]
    assert argv.count("--pipeline-parallel-size") == 1 and argv[argv.index("--pipeline-parallel-size") + 1] == "2"
    assert worker["args"][-1] == "$(LWS_LEADER_ADDRESS)"  # the one reference Kubernetes must expand
    run = [*worker["command"], *(_unk8s(a) for a in worker["args"][:-1]), "10.1.2.3"]
    assert subprocess.run(run, env=env, capture_output=True, timeout=60).returncode == 0
    assert log.read_text().splitlines()[0].startswith("start --head --node-ip-address=10.1.2.3 --port=6379")
    assert log.read_text().splitlines()[-1] == ("start --address=10.1.2.3:6379 --node-ip-address=10.1.2.3 --num-gpus=8 --block "
                                                "--disable-usage-stats")  # fmt: skip


def test_compose_refuses_a_multinode_layout(run_cli, tmp_path):
    # DeepSeek-R1 does not fit one node of 8 x H100: one server spans two (405B-FP8 fits one: one-node servers)
    code, _, err = run_cli("render", "deepseek-ai/DeepSeek-R1", "--gpu", "H100", "--gpus", "16", "--format", "compose",
                           "--out", str(tmp_path / "o"))  # fmt: skip
    assert code == 2 and "--format compose renders one host only" in err and not (tmp_path / "o").exists()
