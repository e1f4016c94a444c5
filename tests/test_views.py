"""The layout search's typed views (issue 42 item 1: advisor.domain.views, advisor.domain.prediction.LayoutFigures):
their dumps are what ``advisor recommend --json`` prints under ``candidates``, ``pareto`` and a candidate's
``prediction``, key for key and in this order, with the keys that apply to some entries only absent (not null) from
the others."""

from __future__ import annotations

import json

import pytest

from advisor.domain.prediction import LAYOUT_FIGURES, Band, LayoutFigures, RecommendedPrediction
from advisor.domain.views import CandidateView, ParetoPoint

FIGURES = ["throughput_tok_s", "tpot_ms", "ttft_ms", "ttft_unbounded", "busy_replicas", "step_ms", "prefill_ms",
           "speculative_gain", "running_per_replica", "waiting_per_replica", "layout", "method", "objective",
           "prompt_len", "output_len", "figure_notes", "tok_s_per_gpu", "tok_s_per_user", "max_num_seqs",
           "max_num_batched_tokens", "spec_schedule", "schedule_reason", "judged_on"]  # fmt: skip
LOADED = ["offered_concurrency", "request_rate", "ttft_unloaded_ms", "ttft_prefill_wait_ms", "ttft_slot_wait_ms"]
CANDIDATE = ["label", "tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size", "enable_expert_parallel",
             "speculative_method", "num_speculative_tokens", "max_num_seqs", "max_num_batched_tokens", "concurrency",
             "kv_cache_dtype", "spec_schedule", "schedule_reason", "boots", "kv_cache_tokens", "eligible", "why_not",
             "why_kind", "p_win", "chosen", "k_bar", "r", "measured_gain", "k_bar_source", "speculative_model"]  # fmt: skip
PARETO = ["label", "tok_s_per_gpu", "tok_s_per_user", "tpot_ms", "ttft_ms", "max_num_seqs", "max_num_batched_tokens",
          "concurrency", "tensor_parallel_size", "data_parallel_size", "method", "k"]  # fmt: skip
B = Band(value=1.0, low=0.9, high=1.1)


def _figures(**conditional) -> LayoutFigures:
    return LayoutFigures(throughput_tok_s=B, tpot_ms=B, ttft_ms=None, ttft_unbounded="no steady state", busy_replicas=None,
                         step_ms=B, prefill_ms=B, speculative_gain=None, running_per_replica=4, waiting_per_replica=None,
                         layout="TP 1", method="none", objective="throughput", prompt_len=1024, output_len=512,
                         figure_notes=[], tok_s_per_gpu=1.0, tok_s_per_user=2.0, max_num_seqs=None,
                         max_num_batched_tokens=None, spec_schedule=None, schedule_reason=None, judged_on=None,
                         **conditional)  # fmt: skip


def test_the_chosen_predictions_layout_figures_are_the_views_fields():
    assert set(LAYOUT_FIGURES) == {*LayoutFigures.model_fields, "closed_loop"}
    assert set(LayoutFigures.model_fields) <= set(RecommendedPrediction.model_fields)


def test_conditional_keys_are_absent_unless_set_and_kept_when_set_to_none():
    assert list(_figures().model_dump()) == FIGURES
    loaded = _figures(gpus_used=8, offered_concurrency=None, request_rate=1.5, ttft_unloaded_ms=9.0,
                      ttft_prefill_wait_ms=0.0, ttft_slot_wait_ms=None)  # fmt: skip
    dump = loaded.model_dump()
    assert list(dump) == [*FIGURES, "gpus_used", *LOADED] and dump["offered_concurrency"] is None
    assert LayoutFigures.model_validate(json.loads(loaded.model_dump_json())) == loaded  # the JSON reads back
    assert set(loaded.present()) == set(dump) and loaded.present()["throughput_tok_s"] is B  # values, not dumps


def test_a_candidate_carries_prediction_and_why_lost_only_with_figures():
    base = dict(label="TP 1, plain", tensor_parallel_size=1, pipeline_parallel_size=1, data_parallel_size=1,
                enable_expert_parallel=False, speculative_method=None, num_speculative_tokens=None, max_num_seqs=None,
                max_num_batched_tokens=None, concurrency=None, kv_cache_dtype="auto", spec_schedule=None,
                schedule_reason=None, boots=False, kv_cache_tokens=0, eligible=False, why_not="does not boot",
                why_kind="boot", p_win=None, chosen=False, k_bar=None, r=None, measured_gain=None, k_bar_source=None,
                speculative_model=None)  # fmt: skip
    assert list(CandidateView(**base).model_dump()) == CANDIDATE
    lost = CandidateView(**base, prediction=_figures(), why_lost="slower").model_dump()
    assert list(lost) == [*CANDIDATE, "prediction", "why_lost"] and list(lost["prediction"]) == FIGURES
    with pytest.raises(ValueError):
        CandidateView(**{**base, "why_kind": "not a kind"})


def test_the_off_frontier_point_has_no_kv_cache_dtype():
    base = dict(label="p", tok_s_per_gpu=1.0, tok_s_per_user=2.0, tpot_ms=3.0, ttft_ms=None, max_num_seqs=8,
                max_num_batched_tokens=2048, concurrency=None, tensor_parallel_size=1, data_parallel_size=1,
                method="none", k=None, feasible=True, why_not=None, chosen=True)  # fmt: skip
    on = ParetoPoint(**base, kv_cache_dtype="auto").model_dump()
    assert list(on) == [*PARETO, "kv_cache_dtype", "feasible", "why_not", "chosen"]
    assert list(ParetoPoint(**base, off_frontier=True).model_dump()) == [*PARETO, "feasible", "why_not", "chosen", "off_frontier"]


def test_recommends_json_candidates_and_frontier_are_the_views():
    """Through recommend's own path (an operating point searched: every conditional key in play): the JSON's
    entries have the views' keys in order, and each reads back into its view unchanged."""
    from advisor.cli import options as o
    from advisor.cli.recommend import build_recommendation

    rec = build_recommendation("meta-llama/Llama-3.1-8B-Instruct", o.RecommendOptions(gpu="H100", gpus=1, concurrency=1,
                                                                                     max_tpot_ms=30.0))  # fmt: skip
    out = json.loads(json.dumps(rec.model_dump(mode="json")))
    assert out["candidates"] and out["pareto"] and sum(c["chosen"] for c in out["candidates"]) == 1
    for c in out["candidates"]:
        assert list(c) == CANDIDATE + [k for k in ("prediction", "why_lost") if k in c]
        assert ("why_lost" in c) == ("prediction" in c and not c["chosen"])
        if "prediction" in c:
            assert list(c["prediction"]) == [*FIGURES, "gpus_used", *LOADED]
        assert CandidateView.model_validate(c).model_dump(mode="json") == c
    for p in out["pareto"]:
        assert ParetoPoint.model_validate(p).model_dump(mode="json") == p
    assert sum(p.get("off_frontier", False) for p in out["pareto"]) <= 1
