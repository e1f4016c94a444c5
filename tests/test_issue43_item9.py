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
