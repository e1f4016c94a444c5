"""Issue 25's defects, each fed its exact input through the CLI (advisor.cli.app.main): the exit
code and message are the documented ones, nothing hangs, nothing is written half."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
M = "meta-llama/Llama-3.1-8B-Instruct"
HOST = ("--gpu", "H100", "--gpus", "1")
LLAMA = ROOT / "catalog" / "models" / "meta-llama" / "Llama-3.1-8B-Instruct" / "config.json"


@pytest.mark.parametrize("prefix", ["+", "!", "!!", "@", ":", "-", "|"])
def test_systemd_exec_prefixes_in_vllm_bin_are_refused(run_cli, tmp_path, prefix):
    code, _, err = run_cli("render", M, *HOST, "--out", str(tmp_path / "o"), "--vllm-bin", f"{prefix}vllm")
    assert code == 2 and f'"{prefix[0]}' in err and not (tmp_path / "o").exists(), err


@pytest.mark.parametrize("card, words", [(b": : :\n- [", "not valid YAML"), (b"\xff\xfe", "not UTF-8"),
                                         (b"- a\n- b\n", "must be a YAML mapping"), (b"family: nonsense\n", "is not one of")])
def test_bad_catalog_cards_are_config_errors(run_cli, tmp_path, card, words):
    (tmp_path / "org" / "m").mkdir(parents=True)
    shutil.copy(LLAMA, tmp_path / "org" / "m" / "config.json")
    (tmp_path / "org" / "m" / "card.yaml").write_bytes(card)
    code, _, err = run_cli("--catalog-dir", str(tmp_path), "inspect", "org/m")
    assert code == 4 and words in err, err


@pytest.mark.parametrize("what", ["config", "host", "toml"])
def test_nesting_1100_deep_is_a_clear_error(run_cli, tmp_path, monkeypatch, what):
    deep = "[" * 1100 + "]" * 1100
    if what == "config":
        (tmp_path / "config.json").write_text(deep)
        code, _, err = run_cli("inspect", str(tmp_path))
    elif what == "host":
        (tmp_path / "h.json").write_text(deep)
        code, _, err = run_cli("host", "diff", str(tmp_path / "h.json"), str(tmp_path / "h.json"))
    else:
        (tmp_path / "a.toml").write_text("x = " + deep)
        monkeypatch.setenv("ADVISOR_CONFIG", str(tmp_path / "a.toml"))
        code, _, err = run_cli("inspect", M)
    assert code in (2, 4, 5) and "too deeply" in err, err


@pytest.mark.parametrize("target", ["missing", "dir"])
def test_advisor_config_naming_no_file_is_refused(run_cli, tmp_path, monkeypatch, target):
    monkeypatch.setenv("ADVISOR_CONFIG", str(tmp_path / "missing.toml") if target == "missing" else str(tmp_path))
    code, _, err = run_cli("inspect", M)
    assert code == 2 and "ADVISOR_CONFIG" in err and ("no such file" in err or "not a regular file" in err), err


@pytest.mark.parametrize("args", [["--data-dir", "", "inspect", M], ["--rules-dir", "", "inspect", M],
                                  ["--catalog-dir", "", "inspect", M], ["render", M, *HOST, "--out", ""]])
def test_empty_paths_are_refused(run_cli, args):
    code, _, err = run_cli(*args)
    assert code == 2 and "is empty" in err and "current directory" in err, err


@pytest.mark.parametrize("how", ["flag", "env", "toml"])
def test_gpus_999999999_is_refused_at_once(run_cli, tmp_path, monkeypatch, how):
    t0 = time.monotonic()
    if how == "flag":
        code, _, err = run_cli("recommend", M, "--gpu", "H100", "--gpus", "999999999")
    else:
        if how == "env":
            monkeypatch.setenv("ADVISOR_DEFAULT_GPUS", "999999999")
        else:
            (tmp_path / "a.toml").write_text("default_gpus = 999999999\n")
            monkeypatch.setenv("ADVISOR_CONFIG", str(tmp_path / "a.toml"))
        code, _, err = run_cli("recommend", M, "--gpu", "H100")
    assert code == 2 and "4096" in err and time.monotonic() - t0 < 5, err


def _store_with(tmp_path: Path, **fields) -> Path:
    from advisor.probe.store import ProbeStore

    data = tmp_path / "data"
    ProbeStore(data / "probes.sqlite").close()
    rec = {"campaign_id": "c", "model": M, "config": "suffix:32", "outcome": "ok", "corpus": "humaneval", "concurrency": 32,
           "started_at": "2026-01-01T00:00:00+00:00", "throughput_tok_s": 100.0, **fields}  # fmt: skip
    conn = sqlite3.connect(data / "probes.sqlite")
    conn.execute("INSERT INTO probes (campaign_id, model, config, outcome, corpus, concurrency, started_at, record_json)"
                 " VALUES ('c', ?, 'suffix:32', 'ok', 'humaneval', 32, 'now', ?)", (M, json.dumps(rec)))  # fmt: skip
    conn.commit()
    conn.close()
    return data


@pytest.mark.parametrize("field, value", [("num_speculative_tokens", 10**9), ("gpu_memory_utilization", 5), ("max_model_len", -1)])
def test_store_rows_out_of_range_are_left_out_with_a_word(run_cli, tmp_path, field, value):
    data = _store_with(tmp_path, **{field: value})
    code, out, err = run_cli("--data-dir", str(data), "recommend", M, *HOST, "--json")
    assert code == 0, err
    assert any("row 1 skipped" in w and field in w for w in json.loads(out)["warnings"]), json.loads(out)["warnings"]


@pytest.mark.parametrize("sql, words", [("UPDATE schema_version SET version='abc'", "schema_version holds 'abc'"),
                                        ("DROP TABLE schema_version; CREATE TABLE schema_version (version); INSERT INTO schema_version VALUES (NULL)", "schema_version holds None"),
                                        ("ALTER TABLE probes DROP COLUMN record_json", "lacks record_json")])  # fmt: skip
def test_damaged_store_layout_is_a_data_error(run_cli, tmp_path, sql, words):
    data = _store_with(tmp_path)
    conn = sqlite3.connect(data / "probes.sqlite")
    conn.executescript(sql)
    conn.close()
    code, _, err = run_cli("--data-dir", str(data), "recommend", M, *HOST)
    assert code == 5 and words in err, err


def test_read_only_store_can_be_read(run_cli, tmp_path):
    """A store the user cannot write (a shared, read-only copy; made immutable with chattr +i, which
    binds root too): recommend reads it, and its records count."""
    data = _store_with(tmp_path, num_speculative_tokens=32)
    for extra in ("-wal", "-shm"):
        (data / f"probes.sqlite{extra}").unlink(missing_ok=True)
    if subprocess.run(["chattr", "+i", str(data / "probes.sqlite"), str(data)], capture_output=True).returncode:
        pytest.skip("chattr +i is not supported here")
    try:
        assert not os.access(data / "probes.sqlite", os.W_OK)
        code, out, err = run_cli("--data-dir", str(data), "recommend", M, *HOST, "--json")
        assert code == 0, err
        assert json.loads(out)["decision"]
    finally:
        subprocess.run(["chattr", "-i", str(data / "probes.sqlite"), str(data)], capture_output=True)


def test_model_under_tmp_and_home_are_warned(run_cli, tmp_path, monkeypatch):
    model = Path("/tmp") / f"advisor-model-{os.getpid()}"
    model.mkdir(exist_ok=True)
    shutil.copy(LLAMA, model / "config.json")
    try:
        code, out, err = run_cli("render", str(model), *HOST, "--out", str(tmp_path / "o"), "--json")
        assert code == 0, err
        assert any("PrivateTmp=yes" in w for w in json.loads(out)["warnings"])
    finally:
        shutil.rmtree(model, ignore_errors=True)
    home_model = Path("/home") / f"advisor-test-{os.getpid()}"
    if os.access("/home", os.W_OK):
        home_model.mkdir(exist_ok=True)
        shutil.copy(LLAMA, home_model / "config.json")
        try:
            code, out, err = run_cli("render", str(home_model), *HOST, "--out", str(tmp_path / "h"), "--json")
            assert code == 0 and any("ProtectHome=read-only" in w for w in json.loads(out)["warnings"]), err
            assert "ProtectHome=read-only" in (tmp_path / "h" / "vllm.service").read_text()
        finally:
            shutil.rmtree(home_model, ignore_errors=True)


def test_two_renders_into_one_directory_one_wins_the_other_says_so(run_cli, tmp_path):
    out = tmp_path / "o"
    out.mkdir()
    fd = os.open(out, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # another writer holds the folder
        code, _, err = run_cli("render", M, *HOST, "--out", str(out))
        assert code == 73 and "another advisor process is writing into" in err, err
        assert [p.name for p in out.iterdir()] == []
    finally:
        os.close(fd)
    code, _, err = run_cli("render", M, *HOST, "--out", str(out))
    assert code == 0, err
    code, _, err = run_cli("render", M, *HOST, "--out", str(out))  # the loser of a race, afterwards: no --force
    assert code == 2 and "already exist" in err


@pytest.mark.parametrize("args, words", [(["--image", "img:${HOME}"], "not an image reference"), (["--image", ""], "--image is empty"),
                                         (["--image", "-x"], "not an image reference"), (["--host", "localhost"], "not a host name")])
def test_compose_values(run_cli, tmp_path, args, words):
    code, _, err = run_cli("render", M, *HOST, "--out", str(tmp_path / "c"), "--format", "compose", *args)
    assert code == 2 and words in err, err


@pytest.mark.parametrize("pattern, code, words", [("^(a+)+$", 0, ""), ("(a+)+$", 0, ""),  # the input: no longer hangs
                                                   ("(a|aa)+$", 5, "catastrophic backtracking")])  # still exponential: bounded
def test_catastrophic_user_regex_is_bounded(run_cli, tmp_path, pattern, code, words):
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "evil.yaml").write_text("rules:\n  - id: evil\n    priority: 100\n    when: {model.id: {matches: '" + pattern + "'}}\n"
                                     "    then: {speculation: open}\n    rationale: r\n    source: s\n")  # fmt: skip
    model = tmp_path / ("a" * 40 + "!")
    model.mkdir()
    shutil.copy(LLAMA, model / "config.json")
    t0 = time.monotonic()
    got, _, err = run_cli("--rules-dir", str(rules), "recommend", str(model), *HOST)
    assert time.monotonic() - t0 < 10
    assert got == code and words in err, err


def test_fifo_in_the_rules_dir_is_refused_not_read(run_cli, tmp_path):
    os.mkfifo(tmp_path / "blocks.yaml")
    code, _, err = run_cli("--rules-dir", str(tmp_path), "recommend", M, *HOST)
    assert code == 5 and "not a regular file" in err, err


def test_escapes_from_a_model_path_do_not_reach_the_terminal(run_cli, tmp_path):
    model = tmp_path / "evil\x1b]0;title\x07\u202e"
    model.mkdir()
    shutil.copy(LLAMA, model / "config.json")
    code, out, err = run_cli("inspect", str(model))
    assert code == 0 and "\x1b" not in out and "\u202e" not in out and "\\x1b]0;title\\x07\\u202e" in out


def test_files_follow_the_umask(tmp_path):
    """Issue 43 item 9: files were written 0644 under umask 077 (report, host --save, --save-responses, render)."""
    import os

    from advisor.atomic import write_one

    old = os.umask(0o077)
    try:
        path = write_one(tmp_path / "r.html", "<html></html>")
        secret = write_one(tmp_path / "vllm.env", "A=1\n", mode=0o600)
        script = write_one(tmp_path / "launch.sh", "#!/bin/sh\n", mode=0o755)
    finally:
        os.umask(old)
    assert (path.stat().st_mode & 0o777, secret.stat().st_mode & 0o777, script.stat().st_mode & 0o777) == (0o600, 0o600, 0o700)
