"""`advisor inspect`: JSON contract, table, and one-line errors for bad input (never a traceback)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import CATALOG

STABLE_KEYS = {"id", "arch", "params_total_b", "params_active_b", "weights_dtype", "quant_method",
               "kv_bytes_per_token", "num_layers", "experts", "experts_per_token", "family"}  # fmt: skip


def test_json_has_stable_keys(run_cli):
    code, out, _ = run_cli("inspect", "deepseek-ai/DeepSeek-R1", "--json")
    assert code == 0
    data = json.loads(out)
    assert STABLE_KEYS <= data.keys()
    assert data["arch"] == "moe" and data["experts"] == 256 and data["experts_per_token"] == 8
    assert isinstance(data["params_total_b"], float) and isinstance(data["params_active_b"], float)


def test_table_output(run_cli):
    code, out, _ = run_cli("inspect", "meta-llama/Llama-3.1-70B-Instruct")
    assert code == 0
    assert "params total" in out and "70.55 B" in out and "gqa" in out


def _bad(tmp_path, name: str, content: str | None):
    d = tmp_path / name
    d.mkdir()
    if content is not None:
        (d / "config.json").write_text(content)
    return str(d)


CASES = {
    "malformed": ('{"model_type": "llama", ', "not valid JSON"),
    "no_hidden": ('{"model_type": "llama", "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 10, "intermediate_size": 8}', "missing 'hidden_size'"),
    "unknown_type": ('{"model_type": "zorblax", "foo": 1}', "unknown model_type 'zorblax'"),
    "not_object": ("[1, 2]", "must hold a JSON object"),
    "no_model_type": ('{"hidden_size": 8}', "no 'model_type'"),
    "no_config": (None, "has no config.json"),
    "attention_free": ('{"model_type": "mamba", "architectures": ["MambaForCausalLM"], "hidden_size": 768, '
                       '"num_hidden_layers": 24, "vocab_size": 50280}', "describes an attention-free model"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_configs_give_one_line_errors(run_cli, tmp_path, case):
    content, expected = CASES[case]
    code, out, err = run_cli("inspect", _bad(tmp_path, case, content))
    assert code != 0 and out == ""
    assert expected in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_nonexistent_path(run_cli, tmp_path):
    code, _, err = run_cli("inspect", str(tmp_path / "nope"))
    assert code == 3 and "no such file or directory" in err and err.count("\n") == 1


def test_unbundled_id_offline_says_where_it_looked(run_cli):
    code, _, err = run_cli("inspect", "acme/not-a-real-model")
    assert code == 3
    assert "not found offline" in err and "catalog" in err and "HF cache" in err and "go online" in err
    assert err.count("\n") == 1


def test_unknown_type_known_fields_falls_back_to_raw_json(run_cli, tmp_path):
    cfg = json.loads((CATALOG / "meta-llama" / "Llama-3.1-8B" / "config.json").read_text())
    cfg["model_type"] = "my_private_llama"
    path = _bad(tmp_path, "private", json.dumps(cfg))
    code, out, _ = run_cli("inspect", path, "--json")
    assert code == 0
    data = json.loads(out)
    assert data["params_total_b"] == pytest.approx(8.03, abs=0.01)
    assert any("raw JSON" in n for n in data["notes"])


def test_subprocess_error_has_no_traceback(tmp_path):
    path = _bad(tmp_path, "m", "{oops")
    proc = subprocess.run([sys.executable, "-m", "advisor", "inspect", path], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 4
    assert proc.stderr.startswith("error: ") and "Traceback" not in proc.stderr
