"""`recommend --corpus FILE` says which tokenizer measured K̄, and never substitutes one the user named."""

from __future__ import annotations

import json

import pytest

from advisor.kbar.replay import arctic_available
from advisor.kbar.tokenize import fallback_tokenizer_file

pytestmark = pytest.mark.skipif(not arctic_available(), reason="arctic_inference is not importable: run scripts/install_arctic.sh")
LLAMA_8B = "meta-llama/Llama-3.1-8B-Instruct"


@pytest.fixture
def trace(tmp_path):
    p = tmp_path / "trace.jsonl"
    p.write_text("".join(json.dumps({"prompt": f"say hello {i}", "response": f"print('hello {i}')\n" * 4}) + "\n" for i in range(30)))
    return p


def test_named_tokenizer_that_cannot_load_fails_like_kbar(run_cli, trace):
    args = ("--corpus", str(trace), "--tokenizer", "no-such-org/no-such-tokenizer")
    code_k, _, err_k = run_cli("kbar", *args)
    code_r, _, err_r = run_cli("recommend", LLAMA_8B, "--gpu", "H100", "--gpus", "1", *args)
    assert code_k == code_r == 6, (err_k, err_r)
    assert "no-such-org/no-such-tokenizer" in err_r


@pytest.mark.skipif(fallback_tokenizer_file() is None, reason="the built-in fallback tokenizer (litellm) is not installed")
def test_substituted_tokenizer_is_reported(run_cli, trace):
    code, out, err = run_cli("recommend", LLAMA_8B, "--gpu", "H100", "--gpus", "1", "--corpus", str(trace), "--json",
                             "--spec", "suffix")  # the trace's K̄ is suffix's (the catalog's EAGLE-3 head wins otherwise)
    assert code == 0, err
    rec = json.loads(out)
    assert "builtin:deepseek" in rec["prediction"]["k_bar_source"]
    assert any("substituted tokenizer" in w and "builtin:deepseek" in w for w in rec["warnings"])
