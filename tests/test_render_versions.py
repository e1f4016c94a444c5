"""What the rendered files say per vLLM line where the lines differ (issue 41, vLLM 0.34): suffix knobs a
line's suffix proposer does not read are never rendered, and leaving out one the decision sets is a
warning of ``render``; 0.34's suffix decoding is vLLM's own GPU speculator, so nothing checks for or
builds Arctic Inference there."""

from __future__ import annotations

import json

from advisor.domain.decision import Decision, SuffixParams
from advisor.render.containers import container_warnings, render_compose, render_k8s
from advisor.render.files import render_files
from advisor.render.flags import dropped_suffix_knobs, flag_warnings, serve_flags
from advisor.render.target import make_target
from advisor.vllm_facts import facts

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
TUNED = Decision(speculative_method="suffix", num_speculative_tokens=8,
                 suffix=SuffixParams(max_tree_depth=16, max_cached_requests=500, max_spec_factor=2.5, min_token_prob=0.05))  # fmt: skip
PLAIN_SUFFIX = Decision(speculative_method="suffix", num_speculative_tokens=8)


def _spec(decision: Decision, version: str) -> dict:
    flags = serve_flags(decision, version)
    return json.loads(flags[flags.index("--speculative-config") + 1])


def test_0_33_renders_every_suffix_knob_and_warns_of_none():
    spec = _spec(TUNED, "0.33")
    assert spec == {"method": "suffix", "num_speculative_tokens": 8, "suffix_decoding_max_tree_depth": 16,
                    "suffix_decoding_max_cached_requests": 500, "suffix_decoding_max_spec_factor": 2.5,
                    "suffix_decoding_min_token_prob": 0.05}  # fmt: skip
    assert dropped_suffix_knobs(TUNED, "0.33") == {} and flag_warnings(TUNED, "0.33") == []


def test_0_34_drops_the_knobs_its_gpu_speculator_ignores_and_says_so():
    spec = _spec(TUNED, "0.34")
    assert spec == {"method": "suffix", "num_speculative_tokens": 8, "suffix_decoding_max_tree_depth": 16,
                    "suffix_decoding_max_cached_requests": 500}  # fmt: skip
    assert set(spec) - {"method", "num_speculative_tokens"} <= set(facts("0.34").suffix_tuning_knobs)
    (warning,) = flag_warnings(TUNED, "0.34")
    assert warning.startswith("suffix_decoding_max_spec_factor=2.5, suffix_decoding_min_token_prob=0.05 not rendered: "
                              "vLLM 0.34's suffix decoding does not read them")  # fmt: skip
    assert "drafts all num_speculative_tokens every step" in warning and "(0.34.0)" in warning


def test_knobs_left_at_the_defaults_warn_of_nothing_on_any_line():
    for version in ("0.26", "0.32", "0.33", "0.34"):
        assert _spec(PLAIN_SUFFIX, version) == {"method": "suffix", "num_speculative_tokens": 8}
        assert flag_warnings(PLAIN_SUFFIX, version) == [] and flag_warnings(Decision(), version) == []


def test_one_dropped_knob_is_named_alone():
    d = PLAIN_SUFFIX.model_copy(update={"suffix": SuffixParams(min_token_prob=0.3)})
    assert "suffix_decoding_min_token_prob" not in _spec(d, "0.34")
    (warning,) = flag_warnings(d, "0.34")
    assert warning.startswith("suffix_decoding_min_token_prob=0.3 not rendered: vLLM 0.34's suffix decoding does not read it (")


def test_render_warns_when_it_drops_a_knob_the_decision_sets(run_cli, tmp_path, monkeypatch):
    """`advisor render` lists the dropped knob among its warnings (the decision here carries tuned suffix knobs,
    as one built from a probe's configuration would)."""
    import advisor.cli.recommend as cli_rec

    real = cli_rec.recommend_maybe_probe

    def tuned(*args, **kwargs):
        rec, probed = real(*args, **kwargs)
        d = rec.decision.model_copy(update={"speculative_method": "suffix", "num_speculative_tokens": 8, "suffix": TUNED.suffix})
        return rec.model_copy(update={"decision": d}), probed

    monkeypatch.setattr(cli_rec, "recommend_maybe_probe", tuned)
    got = {}
    for version in ("0.33", "0.34"):
        code, out, err = run_cli("render", MODEL, "--gpu", "H100", "--gpus", "1", "--out", str(tmp_path / version),
                                 "--vllm-bin", "/usr/bin/vllm", "--vllm-version", version, "--json")  # fmt: skip
        assert code == 0, err
        got[version] = json.loads(out)["warnings"]
        launch = (tmp_path / version / "launch.sh").read_text()
        assert ("suffix_decoding_min_token_prob" in launch) is (version == "0.33")
    assert not [w for w in got["0.33"] if "not rendered" in w]
    assert [w for w in got["0.34"] if w.startswith("suffix_decoding_max_spec_factor=2.5, suffix_decoding_min_token_prob=0.05 not rendered")]


def test_0_34_suffix_needs_no_arctic_inference():
    assert facts("0.34").arctic_inference is None and facts("0.33").arctic_inference
    files = {v: render_files(MODEL, PLAIN_SUFFIX, version=v, vllm_bin="/usr/bin/vllm") for v in ("0.33", "0.34")}
    assert "arctic_inference" in files["0.33"]["launch.sh"] and "arctic-check" in files["0.33"]["vllm.service"]
    assert "arctic" not in files["0.34"]["launch.sh"].lower() and "arctic-check" not in files["0.34"]["vllm.service"]
    target = make_target(MODEL, PLAIN_SUFFIX, resolve=False)
    assert "Containerfile" in render_compose(target, PLAIN_SUFFIX, version="0.33")
    compose = render_compose(target, PLAIN_SUFFIX, version="0.34")
    assert "Containerfile" not in compose and "vllm/vllm-openai:v0.34.0" in compose["compose.yaml"]
    assert "arctic" not in compose["compose.yaml"].lower()
    manifests = "".join(render_k8s(target, PLAIN_SUFFIX, version="0.34").values())
    assert "arctic" not in manifests.lower() and "vllm/vllm-openai:v0.34.0" in manifests
    assert container_warnings(PLAIN_SUFFIX, "0.34", None, "k8s") == [] and container_warnings(PLAIN_SUFFIX, "0.33", None, "k8s")
