"""predict(): sane values, the right direction of moves, explanations, decide()."""

from __future__ import annotations

import math

import pytest

from advisor.hardware.gpus import get_gpu
from advisor.model.load import load_profile
from advisor.domain.workload import Workload
from advisor.domain.prediction import Prediction
from advisor.predict.api import decide, predict


@pytest.mark.parametrize(
    "model,gpu,tp",
    [("Qwen/Qwen3-30B-A3B", "H200", 2), ("mistralai/Mixtral-8x7B-Instruct-v0.1", "H100", 4), ("Qwen/Qwen3-30B-A3B", "A100", 4)],
)
def test_unmeasured_models_get_sane_predictions(model, gpu, tp):
    p = predict(load_profile(model), get_gpu(gpu), tp, Workload(corpus="sharegpt", concurrency=32))
    assert isinstance(p, Prediction)
    for v in (p.gain, p.gain_low, p.gain_high, p.r, p.k_bar):
        assert math.isfinite(v) and v > 0
    assert 0.2 < p.gain < 5 and p.gain_low < p.gain < p.gain_high
    assert 1.0 <= p.r < 10 and p.k_bar >= 1
    assert 0 <= p.p_win <= 1
    assert not p.model_seen
    assert any("not measured" in line for line in p.explanation)


def test_higher_measured_kbar_raises_gain():
    prof, gpu = load_profile("meta-llama/Llama-3.1-70B-Instruct"), get_gpu("B200")
    gains = [predict(prof, gpu, 8, Workload(corpus="sharegpt", k_bar=kb, k_bar_source="test"), host_state="OFF").gain for kb in (1.2, 2.0, 4.0)]
    assert gains[0] < gains[1] < gains[2]
    p = predict(prof, gpu, 8, Workload(corpus="sharegpt", k_bar=2.0, k_bar_source="advisor kbar"), host_state="OFF")
    assert p.k_bar == 2.0 and p.k_bar_source.startswith("measured")


def test_deepseek_r1_on_b200_names_the_mla_fallback_and_loses():
    p = predict(load_profile("deepseek-ai/DeepSeek-R1"), get_gpu("B200"), 8, Workload(corpus="sharegpt"), host_state="OFF")
    assert p.mla_prefill_ms > 0 and p.gain < 1 and not decide(p)
    text = " ".join(p.explanation)
    assert "split_decodes_and_prefills" in text and "left to calibration" in text


def test_unknown_host_state_widens_the_interval():
    prof, gpu = load_profile("Qwen/Qwen2.5-7B-Instruct"), get_gpu("B200")
    known = predict(prof, gpu, 8, Workload(corpus="lmsys"), host_state="OFF")
    unknown = predict(prof, gpu, 8, Workload(corpus="lmsys"))
    assert math.log(unknown.gain_high / unknown.gain_low) > math.log(known.gain_high / known.gain_low)
    assert unknown.host_state is None


def test_host_state_on_lowers_small_model_gain():
    prof, gpu = load_profile("Qwen/Qwen2.5-7B-Instruct"), get_gpu("B200")
    off = predict(prof, gpu, 8, Workload(corpus="lmsys"), host_state="OFF")
    on = predict(prof, gpu, 8, Workload(corpus="lmsys"), host_state="ON")
    assert on.gain < off.gain


def test_prediction_forbids_extra_fields():
    p = predict(load_profile("Qwen/Qwen2.5-7B-Instruct"), get_gpu("B200"), 8, Workload(corpus="mix"))
    with pytest.raises(ValueError):
        Prediction(**(p.model_dump() | {"bogus": 1}))
