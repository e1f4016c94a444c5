"""Probe configuration grammar and the corpus readers (real HumanEval and ShareGPT packages)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from advisor.errors import UsageError
from advisor.domain.decision import Decision
from advisor.probe.campaign import server_program
from advisor.probe.configs import parse_configs, probe_decision, probe_flags
from advisor.probe.corpus import load_corpus


def test_parse_and_labels() -> None:
    cfgs = parse_configs(" vanilla, suffix ,suffix:16, ngram, ngram:2@prompt_lookup_max=3, suffix:8@max_model_len=4096@gmu=0.8,suffix:16")
    assert [c.label for c in cfgs] == [
        "vanilla", "suffix:32", "suffix:16", "ngram:4", "ngram:2@prompt_lookup_max=3", "suffix:8@gmu=0.8@max_model_len=4096",
    ]  # fmt: skip
    assert [c.is_vanilla for c in cfgs] == [True] + [False] * 5


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("eagle:3", "needs its drafter"), ("medusa:3", "unknown probe configuration"),
        ("vanilla:3", "takes no K"),
        ("suffix:x", "integer"),
        ("suffix:0", "1..64"),
        ("suffix:8@prompt_lookup_max=3", "unknown override"),
        ("vanilla@gmu=1.5", "gpu_memory_utilization"),
        ("suffix:8@max_tree_depth=0", "max_tree_depth"),
        ("ngram:3@prompt_lookup_min=x", "integer"),
        (" , ", "empty"),
    ],
)
def test_bad_configs(text: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        parse_configs(text)


def test_flags_follow_the_campaign_base() -> None:
    base = Decision(max_model_len=512, gpu_memory_utilization=0.5, cudagraph_mode="NONE")
    vanilla, suffix, ngram, over = parse_configs("vanilla,suffix:8@min_token_prob=0.2,ngram:3@prompt_lookup_min=2,vanilla@tp=2")
    v = probe_flags(vanilla, base)
    assert v[v.index("--max-model-len") + 1] == "512" and "--speculative-config" not in v
    s = probe_flags(suffix, base)
    assert json.loads(s[s.index("--speculative-config") + 1]) == {
        "method": "suffix", "num_speculative_tokens": 8, "suffix_decoding_min_token_prob": 0.2,
    }  # fmt: skip
    n = probe_flags(ngram, base)
    assert json.loads(n[n.index("--speculative-config") + 1]) == {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 2}
    assert json.loads(n[n.index("--compilation-config") + 1]) == {"cudagraph_mode": "NONE"}
    assert probe_decision(over, base).tensor_parallel_size == 2
    assert probe_decision(ngram, base).speculative_method is None  # ngram is added as flags, not a Decision


def test_ngram_gpu_is_vllms_gpu_proposer_with_ngrams_lookup_keys() -> None:
    """``ngram_gpu[:K]``: vLLM's GPU n-gram proposer (async scheduling stays on with it, advisor.vllm_facts
    async_spec_methods), measured by probes (calibration/gpu_real/h200-vllm0.26.0/smol-g, l8-g), never recommended."""
    from advisor import vllm_facts

    (g,) = parse_configs("ngram_gpu@prompt_lookup_min=2")
    assert g.label == "ngram_gpu:4@prompt_lookup_min=2" and not g.is_vanilla
    f = probe_flags(g, Decision())
    assert json.loads(f[f.index("--speculative-config") + 1]) == {"method": "ngram_gpu", "num_speculative_tokens": 4, "prompt_lookup_min": 2}
    assert probe_decision(g, Decision()).speculative_method is None
    assert "ngram_gpu" in vllm_facts.facts("0.26").async_spec_methods
    with pytest.raises(UsageError, match="unknown override"):
        parse_configs("ngram_gpu:4@max_tree_depth=8")


def test_mtp_probe_is_the_checkpoints_own_layers_under_this_vllms_method_name() -> None:
    """``mtp[:K]`` (K 1 by default): the Decision ``recommend`` launches for a model with MTP layers, rendered with
    vLLM's method name for the version (advisor.vllm_facts mtp_method); async scheduling stays on with it."""
    from advisor import vllm_facts

    (m,) = parse_configs("mtp")
    assert m.label == "mtp:1" and not m.is_vanilla
    d = probe_decision(m, Decision())
    assert (d.speculative_method, d.num_speculative_tokens) == ("mtp", 1)
    f = probe_flags(parse_configs("mtp:3@gmu=0.8")[0], Decision(), "0.26")
    assert json.loads(f[f.index("--speculative-config") + 1]) == {"method": vllm_facts.facts("0.26").mtp_method, "num_speculative_tokens": 3}
    assert f[f.index("--gpu-memory-utilization") + 1] == "0.8"
    assert "mtp" in vllm_facts.facts("0.26").async_spec_methods
    with pytest.raises(UsageError, match="unknown override"):
        parse_configs("mtp:2@prompt_lookup_min=2")


def test_server_program() -> None:
    assert server_program("vllm serve") == ["vllm", "serve"]
    assert server_program("/v/bin/python -m vllm.entrypoints.openai.api_server") == [
        "/v/bin/python", "-m", "vllm.entrypoints.openai.api_server", "--model",
    ]  # fmt: skip
    assert server_program("python -m x --model") == ["python", "-m", "x", "--model"]
    with pytest.raises(UsageError):
        server_program("  ")


def test_humaneval_corpus() -> None:
    c = load_corpus("humaneval")
    assert c.name == "humaneval" and len(c.prompts) == 164
    first = c.prompts[0]
    assert "def has_close_elements" in first.text
    assert first.chat()[0]["role"] == "user" and "def has_close_elements" in first.chat()[0]["content"]
    assert len(load_corpus("humaneval", max_chars=600).prompts) < 164
    assert len(load_corpus("humaneval", limit=10).prompts) == 10


def test_sharegpt_corpus_reads_record_by_record() -> None:
    c = load_corpus("sharegpt", limit=500)
    assert len(c.prompts) == 500
    assert c.prompts[0].text.startswith("Summarize the main ideas of Jeff Walker")
    assert all(p.text.strip() for p in c.prompts)


def test_user_files(tmp_path: Path) -> None:
    jsonl = tmp_path / "p.jsonl"
    jsonl.write_text(
        json.dumps({"prompt": "one"}) + "\n\n"
        + json.dumps({"messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "two"},
                                   {"role": "assistant", "content": "answer"}]}) + "\n"
        + json.dumps({"conversations": [{"from": "gpt", "value": "hi"}, {"from": "human", "value": "three"}]}) + "\n"
        + json.dumps({"unrelated": 1}) + "\n"
    )  # fmt: skip
    c = load_corpus(str(jsonl))
    assert [p.text for p in c.prompts] == ["one", "be brief\n\ntwo", "three"]
    assert c.prompts[1].chat() == [{"role": "system", "content": "be brief"}, {"role": "user", "content": "two"}]
    # A JSON array cut off mid-record yields the complete records before the cut.
    cut = tmp_path / "cut.json"
    full = json.dumps([{"text": f"prompt {i}"} for i in range(3000)])
    cut.write_text(full[: len(full) - 30])
    prompts = load_corpus(str(cut), limit=None).prompts
    assert 2990 < len(prompts) < 3000 and prompts[-1].text.startswith("prompt ")


def test_bad_corpora(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="neither a file"):
        load_corpus("no-such-corpus")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "ok"}\nnot json\n')
    with pytest.raises(UsageError, match="not JSON"):
        load_corpus(str(bad))
    empty = tmp_path / "e.jsonl"
    empty.write_text('{"prompt": "x"}\n')
    with pytest.raises(UsageError, match="no usable prompt"):
        load_corpus(str(empty), max_chars=0)
    obj = tmp_path / "o.json"
    obj.write_text('{"prompt": "x"}')
    with pytest.raises(UsageError, match="array"):
        load_corpus(str(obj))


def test_probe_refuses_mtp_for_a_model_without_mtp_layers_before_any_boot(run_cli, tmp_path):
    """``--configs mtp`` on a checkpoint with no MTP layers (read offline from its config: here the bundled catalog) is
    a usage error naming the fix, before a server is started or a store written; a model with them is accepted."""
    code, out, err = run_cli("--data-dir", str(tmp_path / "data"), "probe", "meta-llama/Llama-3.1-8B-Instruct",
                             "--corpus", "humaneval", "--configs", "vanilla,mtp:1", "--server-cmd", "false")  # fmt: skip
    assert code == 2 and "has no MTP layers" in err and "suffix[:K] or ngram[:K]" in err and "Traceback" not in err
    assert not (tmp_path / "data").exists()
    from advisor.cli.probe import _check_mtp_layers

    _check_mtp_layers("zai-org/GLM-4.5-Air")  # one MTP layer: no error
    _check_mtp_layers("no-such-org/no-such-model")  # config not at hand offline: vLLM's refusal is recorded instead


def test_drafter_configs_name_their_drafter():
    """eagle3 / eagle / draft_model probe a drafter model named with @draft (required), as recommend --draft takes it."""
    import json

    import pytest

    from advisor.domain.decision import Decision
    from advisor.errors import UsageError
    from advisor.probe.configs import parse_configs, probe_flags

    (cfg,) = parse_configs("eagle3:5@draft=yuhuili/EAGLE3-LLaMA3.1-Instruct-8B")
    assert cfg.label == "eagle3:5@draft=yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"
    flags = probe_flags(cfg, Decision(max_model_len=4096), "0.34")
    spec = json.loads(flags[flags.index("--speculative-config") + 1])
    assert spec == {"method": "eagle3", "model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", "num_speculative_tokens": 5}
    (dm,) = parse_configs("draft_model@draft=/models/llama-1b")
    assert dm.k == 3 and "/models/llama-1b" in " ".join(probe_flags(dm, Decision(), "0.26"))
    with pytest.raises(UsageError, match="@draft=DIR_OR_ID"):
        parse_configs("eagle3:3")
    with pytest.raises(UsageError, match="unknown override"):
        parse_configs("suffix:8@draft=x")
