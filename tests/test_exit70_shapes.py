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


def _batch_line(status) -> str:
    line = {"custom_id": "r1", "request": {"body": {"messages": [{"role": "user", "content": "hi"}]}},
            "response": {"status_code": status, "body": {"choices": [{"message": {"role": "assistant", "content": "hello there"}}]}}}
    return json.dumps(line) + "\n"  # json.dumps writes inf as Infinity, as the audit's file had


@pytest.mark.parametrize("status", ["abc", float("inf"), [1], True, "999999999999999999999"])
def test_batch_status_code_of_no_number_is_an_error_response(run_cli, tmp_path, status):
    path = tmp_path / "batch.jsonl"
    path.write_text(_batch_line(status))
    _check(run_cli, ("kbar", "--corpus", str(path)), 5, "'error_response': 1")


def test_batch_status_code_200_as_text_or_float_is_read(run_cli, tmp_path):
    path = tmp_path / "batch.jsonl"
    path.write_text(_batch_line("200") + _batch_line(200.0) + _batch_line(None))
    got, _, err = run_cli("kbar", "--corpus", str(path), "--json")
    assert got == 0, err


def test_token_ids_beyond_int32_are_not_replayed_as_ids(run_cli, tmp_path):
    path = tmp_path / "gen.jsonl"
    path.write_text(json.dumps({"prompt": "hi", "response": "hello there hello", "prompt_token_ids": [1, 2],
                                "token_ids": [2**31, 5, 6]}) + "\n")  # was OverflowError (int32)
    got, _, err = run_cli("kbar", "--corpus", str(path), "--json")
    assert got == 0 and "internal error" not in err, err


@pytest.mark.parametrize("how, words", [("truncated", "cut short (truncated)"), ("not_gzip", "not valid gzip")])
def test_a_damaged_gz_is_a_data_error(run_cli, tmp_path, how, words):
    import gzip

    body = gzip.compress(((json.dumps({"prompt": "hi", "response": "hello there hello there"}) + "\n") * 2000).encode())
    path = tmp_path / "c.jsonl.gz"
    path.write_bytes(body[: len(body) // 2] if how == "truncated" else b"\x1f\x8b" + b"garbage" * 100)
    _check(run_cli, ("kbar", "--corpus", str(path)), 5, words)  # truncated was exit 130 'aborted'; not_gzip exit 70


def _profiles_csv(tmp_path, **upd) -> None:
    import csv
    import io

    from advisor.paths import data_path

    rows = list(csv.DictReader((data_path("calibration") / "host_profiles.csv").open()))
    row = next(r for r in rows if r["gpu"] == "H200") | {"id": "probe-x", "aliases": ""} | upd
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(row))
    w.writeheader()
    w.writerow(row)
    (tmp_path / "data").mkdir(exist_ok=True)
    (tmp_path / "data" / "host_profiles.csv").write_text(buf.getvalue())


@pytest.mark.parametrize("upd, words", [
    ({"suffix_step_s": "nan"}, "finite number"), ({"ngram_per_seq_s": "inf"}, "finite number"),  # inf was ZeroDivisionError
    ({"suffix_step_s": "-1"}, "greater than or equal to 0"),  # was a math domain error
    ({"source": "x" * 200_000}, "field larger than field limit"),  # was csv.Error, exit 70
])
def test_a_bad_user_host_profile_row_is_left_out_with_its_reason(run_cli, tmp_path, upd, words):
    _profiles_csv(tmp_path, **upd)
    got, out, err = run_cli("--data-dir", str(tmp_path / "data"), "recommend", M, "--gpu", "H200", "--gpus", "1", "--json")
    assert got == 0, err
    assert any("host profiles" in w and words in w for w in json.loads(out)["warnings"])


def test_calibrate_names_a_bounded_list_of_campaigns():
    from advisor.calibrate.host_infer import _campaigns_source

    text = _campaigns_source([f"campaign-{i:05d}" for i in range(25_000)])
    assert len(text) < 1000 and "25,000 in all" in text
