"""Issue 43 item 9, the smaller silently-wrong cases: each test is the audit's input, and it failed
before its fix (the fix's commit says which)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from advisor.cli.app import main

ROOT = Path(__file__).resolve().parents[1]
FAKE = ROOT / "tests" / "vllm_helpers" / "fake_vllm.py"


def _corpus(tmp: Path) -> Path:
    corpus = tmp / "prompts.jsonl"
    corpus.write_text("".join(json.dumps({"prompt": f"prompt number {i}"}) + "\n" for i in range(20)))
    return corpus


def _probe(tmp: Path, model: str, *extra: str) -> list[str]:
    return ["--data-dir", str(tmp / "data"), "probe", "--corpus", str(_corpus(tmp)), "--configs", "vanilla",
            "--requests", "4", "--duration", "30", "--concurrency", "2", "--max-tokens", "8", "--max-model-len", "512",
            "--server-cmd", f"{sys.executable} {FAKE}", "--boot-timeout", "30", "--json", *extra, "--", model]  # fmt: skip


# -- an option-like MODEL never reaches the server as a flag ------------------------------------------------------------


@pytest.mark.parametrize("model", ["--trust-remote-code", "-h", "--load-format=dummy"])
def test_option_like_model_is_refused_before_any_boot(tmp_path, capsys, monkeypatch, model):
    monkeypatch.setenv("FAKE_TOKEN_S", "0.001")
    rc = main(_probe(tmp_path, model))
    out, err = capsys.readouterr()
    assert rc == 2, (out, err)
    assert f"MODEL {model!r}" in err and "starts with '-'" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "data" / "campaigns").exists()  # nothing booted


def test_a_model_directory_named_like_an_option_is_passed_as_a_path(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("FAKE_TOKEN_S", "0.001")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "-m").mkdir()
    rc = main(_probe(tmp_path, "-m"))
    out, err = capsys.readouterr()
    assert rc == 0, err
    rec = json.loads(out)["records"][0]
    assert rec["outcome"] == "ok", rec
    assert "./-m" in rec["command"] and "-m" not in rec["command"]


# -- --image: the OCI/Docker reference grammar (github.com/distribution/reference, regexp.go) -------------------------

M = "meta-llama/Llama-3.1-8B-Instruct"
HOST = ("--gpu", "H100", "--gpus", "1")
HEX64 = "0123456789abcdef" * 4

# Each of these passed the old character check, and Docker refuses each ("invalid reference format").
BAD_IMAGES = [
    "vllm/Vllm-openai:v0.33.0",  # repository names are lowercase (only a registry host may have capitals)
    "VLLM-openai",
    "vllm//vllm-openai",  # empty path component
    "vllm/vllm-openai:",  # empty tag
    "vllm/vllm-openai:v1:v2",  # two tags
    "vllm/vllm-openai:-v1",  # a tag starts with a word character
    "vllm/vllm-openai:" + "v" * 129,  # a tag is at most 128 characters
    "vllm/vllm-openai@sha256:abc",  # a digest is at least 32 hex digits
    "vllm/vllm-openai@sha256:" + "g" * 64,  # hex only
    "vllm/vllm-openai@" + HEX64,  # no algorithm
    "vllm/vllm-openai-",  # a component ends in a letter or digit
    "vllm/vllm..openai",  # '..' is no separator
    "vllm/vllm+openai",  # '+' only in a digest algorithm
    "vllm/",  # no name
    "registry.example.com:port/vllm",  # a port is digits
    "-registry.example.com/vllm",  # a domain component starts with a letter or digit
    "a" * 200 + "/" + "b" * 60,  # a name is at most 255 characters
]
GOOD_IMAGES = [
    "vllm/vllm-openai:v0.33.0",
    "registry.example.com:5000/team/vllm-openai:latest",
    "localhost:5000/vllm",
    "Registry.Example.com/vllm:TAG_1.x-y",  # the domain may be upper case, the tag too
    "ghcr.io/org/img@sha256:" + HEX64,
    "img:tag@sha256:" + HEX64,
    "[::1]:5000/img:t",
    "my_img__x/a-b--c.d",
]


@pytest.mark.parametrize("image", BAD_IMAGES)
def test_image_docker_refuses_is_refused(run_cli, tmp_path, image):
    code, _, err = run_cli("render", M, *HOST, "--out", str(tmp_path / "c"), "--format", "compose", "--image", image)
    assert code == 2 and "not an image reference" in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "c").exists()


@pytest.mark.parametrize("image", GOOD_IMAGES)
def test_image_docker_accepts_is_rendered(run_cli, tmp_path, image):
    code, _, err = run_cli("render", M, *HOST, "--out", str(tmp_path / "c"), "--format", "compose", "--image", image)
    assert code == 0, err
    assert image in (tmp_path / "c" / "compose.yaml").read_text()
