"""Trace readers: every format people keep, auto-detected; bad records counted, never raised."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from advisor.errors import UsageError
from advisor.kbar.formats import ReadStats, detect_record, iter_samples


def _read(path: Path, fmt: str = "auto") -> tuple[list, ReadStats]:
    stats = ReadStats()
    return list(iter_samples(path, fmt, stats)), stats


def _jsonl(tmp_path: Path, rows: list, name: str = "t.jsonl") -> Path:
    p = tmp_path / name
    p.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return p


def test_prompt_response_jsonl_with_aliases_and_bad_lines(tmp_path):
    p = _jsonl(tmp_path, [
        {"prompt": "2+2?", "response": "4"},
        {"prompt": "hi", "completion": "hello"},
        {"instruction": "sort", "output": "done"},
        {"prompt": "x", "response": ""},  # empty response
        {"prompt": "  ", "response": "y"},  # empty prompt
        "{not json",
        "",
        {"foo": 1},  # unknown
        [1, 2],  # not an object
    ])  # fmt: skip
    samples, st = _read(p)
    assert [(s.prompt, s.response) for s in samples] == [("2+2?", "4"), ("hi", "hello"), ("sort", "done")]
    assert st.formats == {"prompt_response": 3}
    assert st.skipped == {"empty_response": 1, "empty_prompt": 1, "malformed_json": 1, "unknown_format": 2}
    assert st.records == 8  # the blank line is not a record


def test_openai_chat_logs_all_shapes(tmp_path):
    msgs = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]
    chat = {"choices": [{"message": {"role": "assistant", "content": "hello!"}}]}
    p = _jsonl(tmp_path, [
        {"request": {"model": "m", "messages": msgs}, "response": chat},
        {"custom_id": "1", "request": {"body": {"messages": msgs}},
         "response": {"status_code": 200, "body": chat}},  # Batch API, joined
        {"request": {"prompt": "complete me"}, "response": {"choices": [{"text": " done"}]}},
        {"request": {"messages": [{"role": "user", "content": [{"type": "text", "text": "part"}]}]}, "response": chat},
        {"request": {"messages": msgs}, "response": {"status_code": 500, "body": {"error": "x"}}},
        {"request": {"messages": msgs}, "response": {"error": {"message": "rate limited"}}},
        {"request": {"messages": msgs}, "response": {"choices": []}},
        {"messages": msgs + [{"role": "assistant", "content": "a1"}, {"role": "user", "content": "more"},
                             {"role": "assistant", "content": "a2"}]},  # stored conversation
    ])  # fmt: skip
    samples, st = _read(p)
    assert [s.response for s in samples] == ["hello!", "hello!", " done", "hello!", "a1", "a2"]
    assert samples[0].prompt == msgs and samples[2].prompt == "complete me"
    assert samples[3].prompt == [{"role": "user", "content": "part"}]
    assert [m["content"] for m in samples[5].prompt] == ["be brief", "hi", "a1", "more"]
    assert st.skipped == {"error_response": 2, "no_response": 1}
    assert st.formats == {"openai_chat": 6}


def test_sharegpt_json_array_and_jsonl(tmp_path):
    recs = [
        {"id": "a", "conversations": [{"from": "human", "value": "q1"}, {"from": "gpt", "value": "r1"},
                                      {"from": "human", "value": "q2"}, {"from": "gpt", "value": "r2"}]},
        {"id": "b", "conversations": [{"from": "gpt", "value": "orphan"}, {"from": "human", "value": "x"}]},
        {"id": "c", "conversations": [{"from": "human", "value": "q"}, {"from": "gpt", "value": ""}]},
        {"id": "d", "conversations": []},
    ]  # fmt: skip
    arr = tmp_path / "s.json"
    arr.write_text(json.dumps(recs, indent=2))
    for path in (arr, _jsonl(tmp_path, recs)):
        samples, st = _read(path)
        assert [s.response for s in samples] == ["r1", "r2"]
        assert samples[1].prompt == [{"role": "user", "content": "q1"}, {"role": "assistant", "content": "r1"},
                                     {"role": "user", "content": "q2"}]  # fmt: skip
        assert st.skipped == {"empty_prompt": 1, "no_response": 1, "empty_response": 1}
        assert st.records == 4


def test_json_array_cut_mid_record_keeps_whole_records(tmp_path):
    recs = [{"prompt": f"p{i}", "response": f"r{i}" * 50} for i in range(500)]
    text = json.dumps(recs)
    p = tmp_path / "cut.json"
    p.write_text(text[: len(text) * 2 // 3])
    samples, st = _read(p)
    assert len(samples) == st.records - 1 > 300
    assert st.skipped == {"truncated": 1}
    assert [s.prompt for s in samples[:2]] == ["p0", "p1"]


def test_json_array_streams_across_chunks(tmp_path, monkeypatch):
    import advisor.kbar.formats as F

    monkeypatch.setattr(F, "_CHUNK", 64)  # records straddle many chunk borders
    recs = [{"prompt": "é" * (i % 7 + 1), "response": "ü" * 30} for i in range(40)]
    p = tmp_path / "a.json"
    p.write_text(json.dumps(recs, ensure_ascii=False))
    samples, st = _read(p)
    assert len(samples) == 40 and not st.skipped
    assert st.bytes_read == st.total_bytes


def test_vllm_custom_with_and_without_outputs(tmp_path):
    p = _jsonl(tmp_path, [
        {"prompt": "capital of India?", "output_tokens": 10, "output": "New Delhi"},
        {"prompt": "capital of Iran?", "output_tokens": 5, "generated_text": "Tehran"},
        {"prompt": "capital of China?", "output_tokens": 819},  # no recorded output
    ])  # fmt: skip
    samples, st = _read(p)
    assert [s.response for s in samples] == ["New Delhi", "Tehran"]
    assert st.formats == {"vllm_custom": 2} and st.skipped == {"no_response": 1}


def test_gzip_and_wrapped_document(tmp_path):
    rows = [{"prompt": "a", "response": "b"}, {"prompt": "c", "response": "d"}]
    gz = tmp_path / "t.jsonl.gz"
    with gzip.open(gz, "wt") as fh:
        fh.write("\n".join(json.dumps(r) for r in rows) + "\n")
    assert len(_read(gz)[0]) == 2
    doc = tmp_path / "doc.json"
    doc.write_text(json.dumps({"version": 1, "data": rows}, indent=1))
    samples, st = _read(doc)
    assert [s.response for s in samples] == ["b", "d"] and st.container == "json_document"


def test_forced_format_and_errors(tmp_path):
    p = _jsonl(tmp_path, [{"prompt": "a", "response": "b"}, {"conversations": [{"from": "human", "value": "q"}]}])
    samples, st = _read(p, "sharegpt")
    assert samples == [] and st.skipped == {"unknown_format": 1, "no_response": 1}
    with pytest.raises(UsageError, match="unknown --format"):
        _read(p, "csv")
    with pytest.raises(UsageError, match="not found"):
        _read(tmp_path / "missing.jsonl")


def test_unknown_binary_file_is_counted_not_raised(tmp_path):
    p = tmp_path / "bin.dat"
    p.write_bytes(b"\x00\xff\xfe garbage\nmore \xff\n")
    samples, st = _read(p)
    assert samples == [] and sum(st.skipped.values()) == 2


def test_detect_record():
    assert detect_record({"conversations": []}) == "sharegpt"
    assert detect_record({"request": {}, "response": {}}) == "openai_chat"
    assert detect_record({"messages": []}) == "openai_chat"
    assert detect_record({"prompt": "x", "output_tokens": 3}) == "vllm_custom"
    assert detect_record({"prompt": "x", "response": "y"}) == "prompt_response"
    assert detect_record({"text": "x"}) is None and detect_record([]) is None


def test_generation_records_of_the_models_own_outputs(tmp_path):
    """``advisor probe --save-responses`` lines (token ids kept as they are, EOS per finish_reason) and
    calibration/gpu_real's responses files (text; a null ``messages`` is one user turn as --api auto sent it)."""
    from advisor.kbar.formats import AutoPrompt, ReadStats, iter_samples

    path = tmp_path / "own.jsonl"
    rows = [
        {"format": "advisor-probe-responses/1", "config": "vanilla", "api": "chat", "index": 0, "prompt": "p",
         "messages": [{"role": "user", "content": "hi"}], "response": "yo", "finish_reason": "stop",
         "prompt_token_ids": [1, 2], "token_ids": [3, 2]},
        {"index": 1, "prompt": "write code", "messages": None, "response": "def f(): pass", "completion_tokens": 5},
        {"config": "suffix:32", "api": "completions", "prompt": "abc", "messages": None, "response": "d",
         "finish_reason": "length"},
    ]  # fmt: skip
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    stats = ReadStats()
    a, b, c = list(iter_samples(path, "auto", stats))
    assert stats.formats == {"generation": 3}
    assert (a.prompt_ids, a.response_ids, a.eos, a.config) == ([1, 2], [3, 2], True, "vanilla")
    assert b.prompt == AutoPrompt("write code") and b.eos is None and b.prompt_ids is None and b.config is None
    assert c.prompt == "abc" and c.eos is False and c.config == "suffix:32"
