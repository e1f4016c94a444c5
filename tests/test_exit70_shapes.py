"""Issue 43 item 8: the audit's exit-70 shapes are one-line usage errors (exit 2) or model-not-found (exit 3), as
README documents; never a traceback, never ``internal error``."""

from __future__ import annotations

import json

import pytest

M = "meta-llama/Llama-3.1-8B-Instruct"
HOST = ("--gpu", "H100", "--gpus", "1")


@pytest.fixture()
def corpus(tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_text(json.dumps({"prompt": "hi", "response": "hello there hello there"}) + "\n")
    return str(path)


def _check(run_cli, args, code, words):
    got, out, err = run_cli(*args)
    assert got == code, (got, err[-500:])
    assert "internal error" not in err and "Traceback" not in err
    assert words in err, err[-500:]
    assert "NaN" not in out and "Infinity" not in out


@pytest.mark.parametrize("args, code, words", [
    (("recommend", M, *HOST, "--output-len", "1000000000"), 2, "--output-len"),  # was ZeroDivisionError in why_lost
    (("recommend", M, *HOST, "--prompt-len", "1000000000"), 2, "--prompt-len"),
    (("render", M, *HOST, "--output-len", "1000000000", "--out", "x"), 2, "--output-len"),
    (("recommend", M, *HOST, "--tp", "4097"), 2, "--tp"),
    (("probe", M, "--tp", "4097"), 2, "tensor_parallel_size"),  # was a ProbeRecord ValidationError
    (("probe", M, "--configs", "suffix:32@tp=4097"), 2, "tensor_parallel_size"),
    (("probe", M, "--corpus", "~nosuchuser/x"), 2, "no such user's home directory"),  # was RuntimeError
    (("recommend", M, *HOST, "--corpus", "~nosuchuser/x"), 2, "no such user's home directory"),
    (("inspect", "a/" + "b" * 5000), 3, "5,002 characters"),  # was OSError ENAMETOOLONG
    (("inspect", "./" + "b" * 300), 3, "no such file or directory"),
])
def test_cli_shapes(run_cli, args, code, words):
    _check(run_cli, args, code, words)


@pytest.mark.parametrize("extra, words", [
    (("--k", str(2**63)), "--k must be in 1..1024"),  # was OverflowError
    (("--method", "ngram", "--k", str(2**63)), "--k must be in 1..1024"),
    (("--method", "ngram", "--prompt-lookup-max", str(2**63)), "--prompt-lookup-min/max must be in 1..1024"),
    (("--max-cached-requests", str(10**12)), "--max-cached-requests must be in 0..2147483647"),  # was ValueError
    (("--max-tree-depth", str(2**63)), "--max-tree-depth must be in 1..2147483647"),
    (("--seed", "-1"), "--seed must be >= 0"),  # was ValueError from numpy
    (("--max-spec-factor", "nan", "--json"), "--max-spec-factor must be a finite number"),  # printed NaN in --json
    (("--max-spec-factor", "inf", "--json"), "--max-spec-factor must be a finite number"),
    (("--tokenizer", "~nosuchuser/x"), "--tokenizer '~nosuchuser/x': no such user's home directory"),
])
def test_kbar_shapes(run_cli, corpus, extra, words):
    _check(run_cli, ("kbar", "--corpus", corpus, *extra), 2, words)
