"""The predicted suffix gain shrinks as concurrency rises, as published measurements show (a vLLM
study: Llama-3.1-8B about 1.3x at concurrency 1, gone by 64). The level is not checked here: the
seed measured gains only at 32 (the prediction says so, NOT FITTED)."""

from __future__ import annotations

import pytest

from advisor.hardware.gpus import get_gpu
from advisor.model.load import load_profile
from advisor.domain.workload import Workload
from advisor.predict.api import predict


@pytest.mark.parametrize("model, gpu, tp", [("meta-llama/Llama-3.1-8B-Instruct", "H200", 1),
                                            ("meta-llama/Llama-3.1-8B-Instruct", "H100", 1),
                                            ("Qwen/Qwen2.5-32B-Instruct", "B200", 8)])
def test_gain_falls_with_concurrency(model, gpu, tp):
    profile = load_profile(model)
    gains = [predict(profile, get_gpu(gpu), tp, Workload(corpus="sharegpt", concurrency=c), host_state="OFF").gain
             for c in (1, 4, 16, 64, 256)]  # fmt: skip
    assert all(a > b for a, b in zip(gains, gains[1:])), gains
    assert gains[-1] < 0.9 * gains[0], gains  # a real fall, not a rounding one
