"""``advisor kbar``: the CLI adapter, its output and its one-line errors; the install script."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from advisor.kbar.replay import arctic_available

REPO = Path(__file__).resolve().parent.parent
needs_arctic = pytest.mark.skipif(
    not arctic_available(),
    reason="arctic_inference is not importable: run scripts/install_arctic.sh (the test script does)",
)


@pytest.fixture
def tokenizer_json(tmp_path) -> Path:
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.train_from_iterator([f"print('hello {i}')\n" * 3 for i in range(100)], trainers.BpeTrainer(vocab_size=300))
    path = tmp_path / "tokenizer.json"
    tok.save(str(path))
    return path


@pytest.fixture
def trace(tmp_path) -> Path:
    p = tmp_path / "trace.jsonl"
    rows = [{"prompt": f"say hello {i}", "response": f"print('hello {i}')\n" * 4} for i in range(30)]
    p.write_text("".join(json.dumps(r) + "\n" for r in rows) + "{broken\n")
    return p


@needs_arctic
def test_table_output(run_cli, trace, tokenizer_json):
    code, out, err = run_cli("kbar", "--corpus", str(trace), "--tokenizer", str(tokenizer_json), "--k", "16")
    assert code == 0, err
    for text in ("K̄ tokens/step", "mean accept len", "acceptance rate", "per position", "95% CI",
                 "malformed_json 1", "30 replayed", "K=16", "max_tree_depth=24"):  # fmt: skip
        assert text in out
    assert "FALLBACK" not in out and err == ""  # no progress bar when stderr is not a terminal


@needs_arctic
def test_json_output(run_cli, trace, tokenizer_json):
    code, out, _ = run_cli("kbar", "--corpus", str(trace), "--tokenizer", str(tokenizer_json), "--json",
                           "--concurrency", "4", "--max-requests", "20")  # fmt: skip
    assert code == 0
    d = json.loads(out)
    assert d["requests"] == 20 and d["stop_reason"] == "max_requests" and d["params"]["concurrency"] == 4
    assert d["skipped"] == {"malformed_json": 1} and len(d["per_position"]) == 32
    assert d["ci_low"] <= d["tokens_per_step"] <= d["ci_high"]


def test_errors_are_one_line(run_cli, trace, tmp_path, monkeypatch):
    code, _, err = run_cli("kbar", "--corpus", str(tmp_path / "nope.jsonl"), "--tokenizer", "builtin")
    assert (code, err.count("\n")) == (2, 1)  # checked before Arctic and the tokenizer
    monkeypatch.setitem(sys.modules, "arctic_inference.suffix_decoding", None)
    code, _, err = run_cli("kbar", "--corpus", str(trace))
    assert code == 6 and "scripts/install_arctic.sh" in err and err.startswith("error: ")


@needs_arctic
def test_dependency_and_data_errors(run_cli, trace, tmp_path, tokenizer_json):
    code, _, err = run_cli("kbar", "--corpus", str(trace), "--tokenizer", "no-org/no-model")
    assert code == 6 and "--tokenizer builtin" in err and err.count("\n") == 1
    junk = tmp_path / "junk.jsonl"
    junk.write_text('{"a": 1}\n')
    code, _, err = run_cli("kbar", "--corpus", str(junk), "--tokenizer", str(tokenizer_json))
    assert code == 5 and "no usable requests" in err and "unknown_format" in err
    code, _, err = run_cli("kbar", "--corpus", str(trace), "--tokenizer", str(tokenizer_json), "--until-ci", "2")
    assert code == 2 and "--until-ci" in err


def test_progress_bar_draws_on_a_terminal():
    from advisor.cli.common import replay_progress
    from advisor.kbar.estimate import Progress

    assert replay_progress(False) == (None, None)
    update, prog = replay_progress(True)
    with prog:
        update(Progress(10, 100, 3, 300, 1.5))
        update(Progress(100, 100, 9, 900, None))
    assert prog.tasks[0].completed == 100 and prog.tasks[0].fields["requests"] == 9


@needs_arctic
def test_install_script_is_idempotent():
    out = subprocess.run(["bash", str(REPO / "scripts" / "install_arctic.sh")], capture_output=True, text=True, check=False,
                         env={"PYTHON": sys.executable, "PATH": "/usr/bin:/bin", "HOME": "/tmp"}, timeout=60)  # fmt: skip
    assert out.returncode == 0 and "nothing to do" in out.stdout
