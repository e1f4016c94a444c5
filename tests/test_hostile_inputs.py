"""Inputs that used to end in 'internal error' (exit 70) get a clear one-line error naming the file or value."""

from __future__ import annotations

import base64
import json

import pytest

from advisor.errors import DependencyError

LLAMA_8B = "meta-llama/Llama-3.1-8B-Instruct"


def _clean(code, err, expected_code, *needles):
    assert code == expected_code, (code, err)
    assert "internal error" not in err and "Traceback" not in err
    for n in needles:
        assert n in err, (n, err)


def test_non_utf8_config_json(run_cli, tmp_path):
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_bytes(b'{"model_type": "llama", "x": "\xff\xfe"}')
    code, _, err = run_cli("inspect", str(tmp_path / "m"))
    _clean(code, err, 4, "config.json is not UTF-8", "0xff")


def test_non_utf8_rules_file(run_cli, tmp_path):
    (tmp_path / "bad.yaml").write_bytes(b"rules:\n  - id: x\n    when: {model.id: \"\xff\"}\n")
    code, _, err = run_cli("--rules-dir", str(tmp_path), "recommend", LLAMA_8B, "--gpu", "H100", "--gpus", "1")
    _clean(code, err, 5, "bad.yaml", "not UTF-8")


def test_bad_regex_in_a_rule(run_cli, tmp_path):
    (tmp_path / "r.yaml").write_text("rules:\n  - id: rx\n    when: {model.id: {matches: \"([a-\"}}\n    then: {}\n"
                                     "    rationale: r\n    source: s\n")
    code, _, err = run_cli("--rules-dir", str(tmp_path), "recommend", LLAMA_8B, "--gpu", "H100", "--gpus", "1")
    _clean(code, err, 5, "r.yaml", "rule rx", "invalid regular expression")


@pytest.mark.parametrize("body, needle", [(b"data_dir = [\n", "TOML syntax error"), (b'data_dir = "\xff"\n', "not UTF-8")])
def test_bad_settings_toml_names_the_file(run_cli, tmp_path, monkeypatch, body, needle):
    toml = tmp_path / "advisor.toml"
    toml.write_bytes(body)
    monkeypatch.setenv("ADVISOR_CONFIG", str(toml))
    code, _, err = run_cli("inspect", LLAMA_8B)
    _clean(code, err, 2, str(toml), needle)


@pytest.mark.parametrize("model", ["a--b", "org/a--b", "org/a..b"])
def test_invalid_hub_ids(run_cli, model):
    code, _, err = run_cli("inspect", model)
    _clean(code, err, 3, "not a valid Hugging Face id")


def test_non_utf8_host_file(run_cli, tmp_path):
    (tmp_path / "h.json").write_bytes(b'{"x": "\xff"}')
    code, _, err = run_cli("host", "diff", str(tmp_path / "h.json"), str(tmp_path / "h.json"))
    _clean(code, err, 5, "h.json", "not UTF-8")


def test_unwritable_data_dir(run_cli, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    code, _, err = run_cli("--data-dir", str(blocker / "sub"), "probe", LLAMA_8B, "--duration", "1")
    _clean(code, err, 5, "cannot create the data directory", "--data-dir")


@pytest.mark.parametrize("campaign", ["../x", "/tmp/x", ".hidden", "a/b"])
def test_campaign_id_cannot_leave_the_data_dir(run_cli, campaign):
    code, _, err = run_cli("probe", LLAMA_8B, "--campaign", campaign, "--duration", "1")
    _clean(code, err, 2, "--campaign")


def test_tokenizer_rust_panic_is_a_clean_error(tmp_path):
    """tokenizers panics (pyo3 PanicException, a BaseException) on a corrupt precompiled_charsmap."""
    from advisor.kbar.tokenize import load_tokenizer

    cfg = {"version": "1.0", "model": {"type": "WordLevel", "vocab": {"a": 0}, "unk_token": "a"},
           "normalizer": {"type": "Precompiled", "precompiled_charsmap": base64.b64encode(b"\x00\x00\x00\x10" + b"\x01" * 8).decode()}}  # fmt: skip
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(cfg))
    with pytest.raises(DependencyError, match="cannot load tokenizer file"):
        load_tokenizer(str(path))


def test_non_utf8_probe_corpus(run_cli, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b'{"prompt": "\xff\xfe"}\n')
    code, _, err = run_cli("--data-dir", str(tmp_path / "d"), "probe", LLAMA_8B, "--corpus", str(bad), "--configs", "vanilla",
                           "--duration", "1", "--server-cmd", "/nonexistent/vllm serve")  # fmt: skip
    _clean(code, err, 2, "bad.jsonl", "not UTF-8")
