"""Suffix decoding needs Arctic Inference (vLLM's SpeculativeConfig refuses method=suffix without
``arctic_inference``): every artifact that runs suffix carries or checks it, checked by the real
validators the other render tests use (systemd-analyze verify, kubernetes-validate --strict,
docker-compose 1.29's loader) and by running the checks themselves."""

from __future__ import annotations

import json
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from advisor.domain.decision import Decision
from advisor.render.containers import arctic_image, default_image, render_compose, render_k8s
from advisor.render.files import render_files
from advisor.render.target import make_target
from advisor.render.write import write_files
from advisor.vllm_facts import facts
from tests.render_helpers import unit as sd
from tests.render_helpers.compose import compose_python
from tests.render_helpers.fakebin import make_fake, which_in

ROOT = Path(__file__).resolve().parents[1]
SUFFIX = Decision(speculative_method="suffix", num_speculative_tokens=16, tensor_parallel_size=2, gpu_memory_utilization=0.85)
VANILLA = SUFFIX.model_copy(update={"speculative_method": None, "num_speculative_tokens": None})
PIN = facts("0.32").arctic_inference


def _python_without_arctic(folder: Path) -> Path:
    """An interpreter wrapper in which ``import arctic_inference`` fails (a module of that name that raises)."""
    shadow = folder / "shadow"
    (shadow / "arctic_inference").mkdir(parents=True)
    (shadow / "arctic_inference" / "__init__.py").write_text("raise ImportError('not installed')\n")
    py = folder / "python-no-arctic"
    py.write_text(f"#!/bin/sh\nPYTHONPATH={shadow} exec {sys.executable} \"$@\"\n")
    py.chmod(0o755)
    return py


def _python_with_arctic(folder: Path) -> Path:
    shadow = folder / "shadow-ok"
    (shadow / "arctic_inference" / "suffix_decoding").mkdir(parents=True)
    (shadow / "arctic_inference" / "__init__.py").write_text("")
    (shadow / "arctic_inference" / "suffix_decoding" / "__init__.py").write_text("class SuffixDecodingCache: pass\n")
    py = folder / "python-arctic"
    py.write_text(f"#!/bin/sh\nPYTHONPATH={shadow} exec {sys.executable} \"$@\"\n")
    py.chmod(0o755)
    return py


def _fake_vllm(folder: Path, python: Path) -> Path:
    fake = folder / "vllm"
    fake.write_text(f"#!{python}\nimport sys; print('vllm ran', sys.argv[1:])\n")
    fake.chmod(0o755)
    return fake


# --- systemd -------------------------------------------------------------------------------------


def _unit_files(tmp_path: Path, decision: Decision) -> tuple[Path, dict[str, str]]:
    bindir = tmp_path / "bin"
    make_fake(bindir)
    files = render_files("org/model", decision, vllm_bin="vllm", which=which_in(bindir))
    return bindir, files


def test_unit_checks_arctic_before_vllm_starts_and_only_with_suffix(tmp_path):
    _, files = _unit_files(tmp_path, SUFFIX)
    pre = [v for _, k, v in sd.directives(files["vllm.service"]) if k == "ExecStartPre"]
    assert len(pre) == 1 and "arctic_inference.suffix_decoding" in pre[0] and f'"{PIN}"' in pre[0]
    _, plain = _unit_files(tmp_path / "v", VANILLA)
    assert "ExecStartPre" not in plain["vllm.service"] and "arctic_inference" not in plain["vllm.service"]


@pytest.mark.skipif(not shutil.which("systemd-analyze"), reason="systemd-analyze not installed (scripts/test.sh installs systemd)")
def test_unit_with_the_arctic_check_passes_systemd_analyze_verify(tmp_path):
    _, files = _unit_files(tmp_path, SUFFIX)
    write_files(tmp_path / "out", files)
    proc = subprocess.run(["systemd-analyze", "verify", "--man=no", str(tmp_path / "out" / "vllm.service")],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert proc.returncode == 0, proc.stderr


@pytest.mark.skipif(not sd.have_systemd_test_mode(), reason="systemd --test (the real unit parser) not available")
def test_the_check_systemd_runs_fails_with_the_fix_then_passes_once_arctic_is_there(tmp_path):
    """The ExecStartPre argv exactly as systemd parses it (systemd --test), run against a vLLM whose
    #! interpreter lacks Arctic (exit 1, the pip command in the message), then one that has it."""
    _, files = _unit_files(tmp_path, SUFFIX)
    write_files(tmp_path / "out", files)
    (pre,) = sd.systemd_exec_lines(tmp_path / "out", ["vllm.service"], key="ExecStartPre")["vllm.service"]
    assert pre[:2] == ["/bin/bash", "-c"] and pre[-1] == PIN
    missing = _fake_vllm(tmp_path / "a", _python_without_arctic(tmp_path / "a"))
    proc = subprocess.run([*pre[:-2], str(missing), PIN], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert "suffix decoding needs Arctic Inference" in proc.stderr and f"pip install --no-build-isolation arctic-inference=={PIN}" in proc.stderr
    present = _fake_vllm(tmp_path / "b", _python_with_arctic(tmp_path / "b"))
    proc = subprocess.run([*pre[:-2], str(present), PIN], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr


def test_launch_sh_keeps_its_preflight(tmp_path):
    _, files = _unit_files(tmp_path, SUFFIX)
    assert "import arctic_inference" in files["launch.sh"]


# --- containers ----------------------------------------------------------------------------------


def _target(decision: Decision):
    return make_target("org/model", decision, resolve=False)


def test_containerfile_is_from_the_versions_image_and_pins_arctic():
    for version in ("0.26", "0.32", "0.33"):
        files = render_compose(_target(SUFFIX), SUFFIX, version=version)
        cf = files["Containerfile"]
        froms = [line for line in cf.splitlines() if line.startswith("FROM ")]
        assert froms == [f"FROM {default_image(version)}"]
        assert f'"arctic-inference=={facts(version).arctic_inference}"' in cf and "--no-build-isolation" in cf
        assert "from arctic_inference.suffix_decoding import SuffixDecodingCache" in cf
    assert "Containerfile" not in render_compose(_target(VANILLA), VANILLA)
    assert "Containerfile" not in render_k8s(_target(VANILLA), VANILLA)



LOAD = """
import json, sys
from compose.config import config
from compose.config.environment import Environment
folder = sys.argv[1]
details = config.find(folder, [folder + "/compose.yaml"], Environment.from_env_file(folder))
(svc,) = config.load(details).services
print(json.dumps({"build": svc.get("build"), "image": svc.get("image"), "entrypoint": svc["entrypoint"], "command": svc["command"]}))
"""


def test_compose_builds_the_arctic_image_and_checks_it(tmp_path):
    python = compose_python()
    write_files(tmp_path, render_compose(_target(SUFFIX), SUFFIX))
    proc = subprocess.run([str(python.parent / "docker-compose"), "-f", str(tmp_path / "compose.yaml"), "config", "-q"],
                          capture_output=True, text=True, timeout=120, env={"PATH": "/usr/bin:/bin"})  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    got = json.loads(subprocess.run([str(python), "-c", LOAD, str(tmp_path)], capture_output=True, text=True, check=True,
                                    timeout=120, env={"PATH": "/usr/bin:/bin"}).stdout)  # fmt: skip
    assert got["build"]["dockerfile"] == "Containerfile" and Path(got["build"]["context"]) == tmp_path
    assert got["image"] == arctic_image("0.32")
    assert got["entrypoint"][:2] == ["/bin/bash", "-c"] and got["entrypoint"][3] == "vllm"
    _run_entry(tmp_path, got["entrypoint"][2], got["command"])


def _run_entry(tmp_path: Path, script: str, command: list[str]) -> None:
    """The container's entry check, run with a python3 on PATH that lacks Arctic, then one that has it."""
    for name, maker, rc in (("no", _python_without_arctic, 1), ("yes", _python_with_arctic, 0)):
        bindir = tmp_path / f"bin-{name}"
        bindir.mkdir()
        (bindir / "python3").symlink_to(maker(tmp_path / f"py-{name}"))
        _fake_vllm(bindir, Path(sys.executable))
        proc = subprocess.run(["/bin/bash", "-c", script, "vllm", *command], capture_output=True, text=True, timeout=60,
                              env={"PATH": f"{bindir}:/usr/bin:/bin"})  # fmt: skip
        assert proc.returncode == rc, (name, proc.stderr)
        if rc:
            assert f"arctic-inference=={PIN}" in proc.stderr and "Containerfile" in proc.stderr
        else:
            assert "vllm ran" in proc.stdout and command[0] in proc.stdout


def test_k8s_runs_the_arctic_image_validates_and_checks_it(tmp_path):
    import kubernetes_validate

    files = render_k8s(_target(SUFFIX), SUFFIX)
    docs = list(yaml.safe_load_all(files["vllm-deployment.yaml"]))
    for doc in docs:
        kubernetes_validate.validate(doc, "1.33.0", strict=True)
    (dep,) = [d for d in docs if d["kind"] == "Deployment"]
    (container,) = dep["spec"]["template"]["spec"]["containers"]
    assert container["image"] == arctic_image("0.32")
    assert container["command"][:2] == ["/bin/bash", "-c"]
    script = container["command"][2].replace("$$", "$")  # Kubernetes' $$ rule
    _run_entry(tmp_path, script, container["args"])
    assert "Containerfile" in files


def test_render_cli_warns_what_a_cluster_cannot_do(run_cli, tmp_path):
    # --spec suffix: launched whatever it is predicted to do (here predicted to lose), so the suffix path is rendered
    code, out, err = run_cli("render", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100", "--gpus", "1", "--k", "16",
                             "--spec", "suffix", "--format", "k8s", "--out", str(tmp_path / "k"), "--json")  # fmt: skip
    assert code == 0, err
    doc = json.loads(out)
    assert doc["recommendation"]["decision"]["speculative_method"] == "suffix"
    assert any(w.startswith("suffix decoding needs Arctic Inference") and "docker push" in w for w in doc["warnings"])
    assert (tmp_path / "k" / "Containerfile").is_file()
    assert stat.S_IMODE((tmp_path / "k" / "Containerfile").stat().st_mode) == 0o644
