"""``--vllm-version`` end to end: render and recommend target the chosen vLLM line, say which and
why, and refuse an unsupported one with exit 2 naming the supported versions."""

from __future__ import annotations

import json
import re

import pytest

from advisor import vllm_facts

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
HOST = ("--gpu", "H200", "--gpus", "1")


@pytest.mark.parametrize("version", ["0.26", "0.33", "0.34"])
def test_render_targets_the_given_version(run_cli, tmp_path, version):
    out = tmp_path / "o"
    code, stdout, err = run_cli("render", MODEL, *HOST, "--out", str(out), "--vllm-bin", "/usr/bin/vllm", "--vllm-version", version)
    assert code == 0, err
    assert re.search(rf"\n  vLLM +{version} \(--vllm-version {version}\)\n", stdout)
    launch = (out / "launch.sh").read_text()
    assert f"# Launch vLLM {version} for" in launch and f"vllm=={version}.*" in launch
    assert f"Description=vLLM {version} serving {MODEL}" in (out / "vllm.service").read_text()


def test_render_k8s_image_follows_the_version(run_cli, tmp_path):
    code, _, err = run_cli("render", MODEL, *HOST, "--out", str(tmp_path / "k"), "--format", "k8s", "--vllm-version", "0.26")
    assert code == 0, err
    manifests = (tmp_path / "k" / "vllm-deployment.yaml").read_text()
    if (tmp_path / "k" / "Containerfile").exists():  # suffix: the image the Containerfile builds FROM the version's
        assert 'image: "advisor/vllm-openai-arctic:v0.26.0-arctic' in manifests
        assert "FROM vllm/vllm-openai:v0.26.0\n" in (tmp_path / "k" / "Containerfile").read_text()
    else:
        assert 'image: "vllm/vllm-openai:v0.26.0"' in manifests


@pytest.mark.parametrize("command", ["render", "recommend"])
def test_an_unsupported_version_is_exit_2_naming_the_supported(run_cli, tmp_path, command):
    extra = ("--out", str(tmp_path / "o")) if command == "render" else ()
    code, stdout, err = run_cli(command, MODEL, *HOST, *extra, "--vllm-version", "0.31")
    assert code == 2 and stdout == ""
    assert "vLLM 0.31 is not supported; supported: 0.26, 0.32, 0.33, 0.34" in err
    assert not (tmp_path / "o").exists()


def test_an_unsupported_setting_is_exit_2(run_cli, tmp_path, monkeypatch):
    monkeypatch.setenv("ADVISOR_VLLM_VERSION", "0.9")
    code, _, err = run_cli("render", MODEL, *HOST, "--out", str(tmp_path / "o"))
    assert code == 2 and "vllm_version" in err and "supported: 0.26, 0.32, 0.33, 0.34" in err


def test_recommend_says_which_version_and_why(run_cli, monkeypatch):
    monkeypatch.setattr(vllm_facts, "installed_version", lambda: "0.33.0")
    code, stdout, err = run_cli("recommend", MODEL, *HOST)
    assert code == 0, err
    assert re.search(r"\n  vLLM +0\.33 \(vLLM 0\.33\.0 installed here\)\n", stdout)
    assert "\n  vllm serve meta-llama/Llama-3.1-8B-Instruct " in stdout
    code, stdout, err = run_cli("recommend", MODEL, *HOST, "--json")
    assert json.loads(stdout)["vllm"] == {"version": "0.33", "why": "vLLM 0.33.0 installed here", "note": None}
    monkeypatch.setenv("ADVISOR_VLLM_VERSION", "0.26")
    code, stdout, err = run_cli("recommend", MODEL, *HOST, "--json")
    assert json.loads(stdout)["vllm"]["version"] == "0.26"


def test_an_unsupported_installed_vllm_falls_back_with_a_warning(run_cli, monkeypatch):
    monkeypatch.setattr(vllm_facts, "installed_version", lambda: "0.30.0")
    code, stdout, err = run_cli("recommend", MODEL, *HOST)
    assert code == 0, err
    assert f"0.30.0 is not supported (supported: 0.26, 0.32, 0.33, 0.34); rendered for {vllm_facts.DEFAULT_VERSION}" in stdout


def test_a_version_folder_overrides_only_the_templates_it_holds(tmp_path, monkeypatch):
    """templates/vllm-<X.Y>/ wins for the files it has; every other file comes from templates/vllm/."""
    import shutil

    import advisor.paths
    from advisor.domain.decision import Decision
    from advisor.render import files

    shipped = advisor.paths.data_path("templates")
    root = tmp_path / "templates"
    shutil.copytree(shipped / "vllm", root / "vllm")
    (root / "vllm-0.33").mkdir()
    (root / "vllm-0.33" / "vllm.env.j2").write_text("# only 0.33: {{ vllm_version }}\n")
    monkeypatch.setattr(advisor.paths, "data_path", lambda name: root)
    assert files.template_dirs("0.33") == [str(root / "vllm-0.33"), str(root / "vllm")]
    assert files.template_dirs("0.26") == [str(root / "vllm")]
    got = {v: files.render_files(MODEL, Decision(), version=v, vllm_bin="/usr/bin/vllm") for v in ("0.33", "0.26")}
    assert got["0.33"]["vllm.env"] == "# only 0.33: 0.33\n"
    assert got["0.26"]["vllm.env"].startswith("# Environment for vLLM 0.26 serving")
    assert got["0.33"]["vllm.service"].replace("0.33", "X") == got["0.26"]["vllm.service"].replace("0.26", "X")


def test_rendered_flags_name_mtp_as_each_version_does():
    from advisor.domain.decision import Decision
    from advisor.render.flags import serve_flags

    d = Decision(speculative_method="mtp", num_speculative_tokens=1)
    for v in vllm_facts.versions():
        spec = json.loads(serve_flags(d, v)[serve_flags(d, v).index("--speculative-config") + 1])
        assert spec["method"] == vllm_facts.facts(v).mtp_method
