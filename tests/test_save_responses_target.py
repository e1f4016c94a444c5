"""Issue 43 item 4: `probe --save-responses FILE` never rewrites a file that is not a responses file, nor the corpus."""

from __future__ import annotations

import json

import pytest

from advisor.errors import UsageError
from advisor.probe.campaign import RESPONSES_FORMAT, check_responses_file


def test_a_text_file_a_binary_file_a_folder_and_the_corpus_are_refused(tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes\nmore\n")
    with pytest.raises(UsageError, match="line 1 is not an advisor responses record"):
        check_responses_file(notes, None)
    assert notes.read_text() == "my notes\nmore\n"
    blob = tmp_path / "blob.bin"
    blob.write_bytes(b"\xff\xfe\x00bad")
    with pytest.raises(UsageError, match="UTF-8"):
        check_responses_file(blob, None)
    with pytest.raises(UsageError, match="not a regular file"):
        check_responses_file(tmp_path, None)
    corpus = tmp_path / "prompts.jsonl"
    corpus.write_text(json.dumps({"prompt": "hi"}) + "\n")
    with pytest.raises(UsageError, match="that is the corpus being probed"):
        check_responses_file(corpus, str(corpus))
    with pytest.raises(UsageError, match="that is the corpus being probed"):
        check_responses_file(tmp_path / "." / "prompts.jsonl", str(corpus))


def test_a_new_path_and_an_earlier_responses_file_are_accepted(tmp_path):
    check_responses_file(tmp_path / "new.jsonl", "humaneval")
    earlier = tmp_path / "earlier.jsonl"
    earlier.write_text(json.dumps({"format": RESPONSES_FORMAT, "campaign_id": "c-1", "config": "vanilla"}) + "\n\n")
    check_responses_file(earlier, "humaneval")


def test_probe_refuses_before_any_boot(run_cli, tmp_path):
    corpus = tmp_path / "prompts.jsonl"
    corpus.write_text(json.dumps({"prompt": "hi"}) + "\n")
    before = corpus.read_bytes()
    code, out, err = run_cli("--data-dir", str(tmp_path / "data"), "probe", "meta-llama/Llama-3.1-8B-Instruct", "--corpus",
                             str(corpus), "--configs", "vanilla", "--server-cmd", "false", "--save-responses", str(corpus))  # fmt: skip
    assert code == 2 and "that is the corpus being probed" in err and corpus.read_bytes() == before
