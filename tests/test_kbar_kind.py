"""Where K̄ came from is typed (issue 42: one ordered list of K̄ sources, no logic on message text).

``KBAR_SOURCE_ORDER`` (advisor.domain.prediction) is the one list the chooser walks
(``CalibratedModel.kbar_choice``); every prediction says which source it took (``Prediction.k_bar_kind``, in
``--json`` too) and, for a published prior, which publication (``k_bar_published_source_id``); the prose
``k_bar_source`` beside it is for people and is unchanged."""

from __future__ import annotations

import json
from typing import get_args

import pytest

from advisor.domain.prediction import KBAR_SOURCE_ORDER, AcceptanceKind, KbarKind, KbarSourceKind, Prediction
from advisor.domain.workload import Workload
from advisor.hardware.gpus import get_gpu
from advisor.predict import kbar_prior as kp
from advisor.predict.api import calibrated_model, predict
from advisor.predict.calibrated import RowInputs
from advisor.predict.dataset import default_profile_of

LLAMA_8B = "meta-llama/Llama-3.1-8B-Instruct"
DISTILL_7B = "deepseek-ai/DeepSeek-R1-Distill-Qwen-7B"

# (model, GPU, TP, workload) -> the source of KBAR_SOURCE_ORDER it takes, and its publication
CASES = {
    "measured": (LLAMA_8B, "H200", 1, Workload(corpus="sharegpt", k_bar=2.0, k_bar_source="test"), None),
    "own_output": (LLAMA_8B, "H200", 1, Workload(corpus="humaneval", concurrency=8), None),
    "published": (LLAMA_8B, "H200", 1, Workload(corpus="specbench", concurrency=4), "suffixdecoding-paper-2025"),
    "published_derived": (LLAMA_8B, "H200", 1, Workload(corpus="blazedit", concurrency=1), "vllm-pr-24344"),
    "seed": (DISTILL_7B, "H200", 1, Workload(corpus="humaneval", concurrency=8), None),  # no own or published prior of reasoning models
    "fallback": (LLAMA_8B, "H200", 1, Workload(concurrency=8), None),  # the traffic unknown
}


def test_the_order_names_every_kind_once():
    assert sorted(KBAR_SOURCE_ORDER) == sorted(get_args(KbarKind)) and len(set(KBAR_SOURCE_ORDER)) == len(KBAR_SOURCE_ORDER)
    assert KBAR_SOURCE_ORDER[0] == "measured" and KBAR_SOURCE_ORDER[-1] == "fallback"
    assert {a for lit in get_args(KbarSourceKind) for a in get_args(lit)} == {*get_args(KbarKind), *get_args(AcceptanceKind)}
    assert set(CASES) == set(KBAR_SOURCE_ORDER)


@pytest.mark.parametrize("kind", KBAR_SOURCE_ORDER)
def test_each_kind_is_reached_and_is_the_first_source_that_has_a_kbar(kind):
    model_id, gpu, tp, work, pub = CASES[kind]
    profile = default_profile_of()(model_id)
    p = predict(profile, get_gpu(gpu), tp, work, host_state="OFF")
    assert p.k_bar_kind == kind and p.k_bar_published_source_id == pub
    # the chooser walks KBAR_SOURCE_ORDER: every source before the one taken has no K̄ for this traffic and model
    model = calibrated_model()
    inputs = RowInputs(profile=profile, gpu=get_gpu(gpu), tp=tp, corpus=work.corpus, host_state="OFF",
                       concurrency=work.concurrency, k=32, k_bar=work.k_bar)  # fmt: skip
    have = [k for k in KBAR_SOURCE_ORDER if model.kbar_source(k, inputs) is not None]
    assert have[0] == kind and have[-1] == "fallback"
    assert model.kbar_choice(inputs).kind == kind


def test_the_same_traffic_takes_the_same_source_on_every_host():
    profile = default_profile_of()(LLAMA_8B)
    work = Workload(corpus="swebench", concurrency=32)
    got = {g: predict(profile, get_gpu(g), 8, work, host_state="OFF") for g in ("B200", "H200", "A100")}
    assert {(p.k_bar_kind, p.k_bar_published_source_id, p.k_bar) for p in got.values()} == \
           {("published", "suffixdecoding-paper-2025", got["H200"].k_bar)}  # fmt: skip


def test_an_unseen_named_corpus_takes_the_fallback_with_a_band():
    profile = default_profile_of()(LLAMA_8B)
    named = predict(profile, get_gpu("H200"), 1, Workload(corpus="cnn_dailymail", concurrency=8), host_state="OFF")
    unknown = predict(profile, get_gpu("H200"), 1, Workload(concurrency=8), host_state="OFF")
    assert named.k_bar_kind == unknown.k_bar_kind == "fallback"
    assert named.k_bar_sigma > 0 and unknown.k_bar_sigma == 0


def test_kbar_choices_carry_their_kind():
    assert kp.published_prior("specbench", "instruct", "suffix").kind == "published"
    derived = kp.published_prior("blazedit", "instruct", "suffix")
    assert (derived.kind, derived.published_source_id) == ("published_derived", "vllm-pr-24344")
    assert kp.published_quoted("blazedit", "instruct", "suffix") is None  # no quoted suffix figure: the derived one is next
    assert kp.own_prior("humaneval", "instruct").kind == "own_output"
    priors = kp.shipped_priors()
    assert kp.seed_prior(priors, "humaneval", "reasoning").kind == "seed" and kp.seed_prior(priors, "specbench", "instruct") is None
    assert kp.fallback_prior(priors, None, "instruct").kind == "fallback"
    assert kp.lookup(priors, "humaneval", "reasoning") == (kp.seed_prior(priors, "humaneval", "reasoning").k_bar,
                                                           kp.seed_prior(priors, "humaneval", "reasoning").source)  # fmt: skip
    # n-gram's own K̄: measured on the file, or the prior of the source suffix's came from (typed, not parsed)
    measured = Workload(corpus="/x/t.jsonl", corpus_is_file=True, k_bar=2.0, k_bar_ngram=1.5, k_bar_ngram_k=4)
    assert kp.ngram_kbar_for(measured, "instruct").kind == "measured"
    ng = kp.ngram_kbar_for(Workload(corpus="blazedit"), "instruct", own_prior_ok=False, published_source_id="vllm-pr-24344")
    assert (ng.kind, ng.published_source_id) == ("published", "vllm-pr-24344")


def test_prediction_rejects_an_unknown_kind():
    p = predict(default_profile_of()(LLAMA_8B), get_gpu("H200"), 1, Workload(corpus="humaneval"), host_state="OFF")
    with pytest.raises(ValueError):
        Prediction.model_validate(p.model_dump() | {"k_bar_kind": "prior humaneval/instruct"})


@pytest.mark.parametrize("args, kind, pub", [
    (("--corpus", "humaneval", "--spec", "suffix"), "own_output", None),
    (("--corpus", "blazedit", "--spec", "suffix"), "published_derived", "vllm-pr-24344"),
    (("--corpus", "blazedit", "--spec", "ngram"), "published", "vllm-pr-24344"),  # n-gram's own K̄, from suffix's publication
    (("--spec", "suffix"), "fallback", None),
])
def test_json_carries_the_kind(run_cli, args, kind, pub):
    code, out, err = run_cli("recommend", LLAMA_8B, "--gpu", "H200", "--gpus", "1", *args, "--json")
    assert code == 0, err
    pred = json.loads(out)["prediction"]
    assert (pred["k_bar_kind"], pred["k_bar_published_source_id"]) == (kind, pub)


def test_json_carries_a_drafters_kind(run_cli):
    code, out, err = run_cli("recommend", LLAMA_8B, "--gpu", "H200", "--gpus", "8", "--json")
    assert code == 0, err
    rec = json.loads(out)
    assert rec["decision"]["speculative_method"] == "eagle3" and rec["prediction"]["k_bar_kind"] == "same_target"
