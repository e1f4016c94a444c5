"""advisor.predict.closed_loop against cases worked by hand from vLLM V1's scheduler rules (token budget M per step,
running requests first, then waiting ones admitted with a first chunk; first token at the end of the step that
schedules a prompt's last chunk)."""

from __future__ import annotations

import pytest

from advisor.predict.closed_loop import bench_prompts, simulate

STEP = 0.010  # a decode step, whatever the batch
CP = 1e-5  # seconds per prefill token


def run(c, *, n=None, P=1000, out=101, M=8192, seqs=256, kv=10_000, g=1.0):
    return simulate(lambda n_: STEP, prefill_token_s=CP, prompt_len=P, output_len=out, concurrency=c,
                    num_prompts=n or c, max_num_seqs=seqs, max_num_batched_tokens=M, kv_slots=kv, gain=g)  # fmt: skip


def test_one_request_prefills_in_one_step_and_decodes_o_minus_one_steps():
    r = run(1)
    assert r.mean_ttft_ms == pytest.approx((STEP + 1000 * CP) * 1e3)  # one step: its prompt, no decodes
    assert r.mean_tpot_ms == pytest.approx(STEP * 1e3)
    assert r.steps == 1 + 100


def test_a_wave_that_fits_the_budget_shares_one_prefill_step():
    r = run(8)  # 8 x 1000 tokens <= 8192: one step prefills all eight, all get their first token together
    assert r.mean_ttft_ms == pytest.approx((STEP + 8000 * CP) * 1e3) == r.median_ttft_ms


def test_a_wave_beyond_the_budget_queues_in_chunks():
    # 20 prompts of 1000 tokens, M 4096: 4.096 prompts a step; request i's last chunk is in step ceil((i+1)*1000/4096)
    # (its decoding neighbours take 1 token each from the budget, which delays the later ones a little)
    r = run(20, M=4096)
    first = (STEP + 4096 * CP) * 1e3
    assert r.median_ttft_ms > 2 * first and r.mean_ttft_ms > first
    assert r.p99_ttft_ms >= 5 * (STEP * 1e3)


def test_waves_repeat_in_a_closed_loop_and_the_gain_shortens_tpot():
    one, four = run(8, n=8), run(8, n=32)  # four waves: every wave arrives together again
    assert four.mean_ttft_ms == pytest.approx(one.mean_ttft_ms, rel=1e-6)
    assert run(1, g=2.0).mean_tpot_ms == pytest.approx(STEP / 2 * 1e3, rel=0.02)


def test_slots_cap_the_running_batch():
    r = run(16, seqs=8)  # 8 run, 8 wait a whole life: the second half's TTFT includes a life
    assert r.p99_ttft_ms > 100 * STEP * 1e3


def test_bench_prompts_is_ten_lifetimes_at_least_200():
    assert bench_prompts(1) == 200 and bench_prompts(64) == 640 and bench_prompts(7.2) == 200
