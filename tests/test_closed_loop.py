"""advisor.predict.closed_loop against cases worked by hand from vLLM V1's scheduler rules (token budget M per step,
running requests first, then waiting ones admitted with a first chunk; first token at the end of the step that
schedules a prompt's last chunk)."""

from __future__ import annotations

import pytest

from advisor.predict.closed_loop import bench_prompts, simulate
from tests.vllm_helpers.versions import vllm_env  # at import: conftest clears ADVISOR_VLLM_VENV for each test

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


# --- per-request lengths (--length-spread: vllm bench serve --random-range-ratio) ----------------------------

import random  # noqa: E402
import statistics  # noqa: E402

from advisor.predict.closed_loop import spread_lengths, spread_range  # noqa: E402


def _battery(n: int, seed: int = 7):
    rng = random.Random(seed)
    for _ in range(n):
        c = rng.choice([1, 3, 8, 13, 64, 100])
        yield dict(concurrency=c, num_prompts=rng.choice([c, bench_prompts(c), 3 * c + 1]),
                   max_num_seqs=rng.choice([4, 16, 256]), max_num_batched_tokens=rng.choice([64, 512, 2048, 8192]),
                   kv_slots=rng.choice([3, 50, 10_000]), gain=rng.choice([1.0, 0.586, 1.7, 3.25]),
                   tokens_per_seq=rng.choice([1, 2, 4.5])), rng.choice([1, 7, 1000, 3000, 9000]), rng.choice([1, 2, 64, 300])  # fmt: skip


def test_per_request_play_with_equal_lengths_is_the_fast_path_to_the_last_bit():
    """The reference for the per-request path: given every request the same lengths it must report what the fast path
    (the groups, the emitted table, the jumps; itself checked against a per-request play, a2e348e) reports, every field
    to the last bit, over prompts beyond the budget, slots and KV below the concurrency, fractional gains and drafted
    tokens per step. (The fast path was built from the rules worked by hand above; so, by this, is the general one.)"""
    step = lambda n: 0.0013 + 1e-5 * n  # noqa: E731
    for kw, P, out in _battery(60):
        fast = simulate(step, prefill_token_s=2e-6, prompt_len=P, output_len=out, **kw)
        each = simulate(step, prefill_token_s=2e-6, prompt_len=0, output_len=0,
                        lengths=([P] * kw["num_prompts"], [out] * kw["num_prompts"]), **kw)  # fmt: skip
        assert repr(each) == repr(fast), (kw, P, out)


def test_per_request_lengths_are_each_requests_own():
    # two requests at once, one step's budget: A (prompt 100, 11 tokens) ends after 10 decode steps, B (prompt 300, 3)
    # after 2; the third, C (prompt 50, 2 tokens), sent when B ends, is prefilled in A's 3rd decode step and decodes once
    r = simulate(lambda n: STEP, prefill_token_s=CP, prompt_len=0, output_len=0, concurrency=2, num_prompts=3,
                 max_num_seqs=8, max_num_batched_tokens=8192, kv_slots=100, lengths=([100, 300, 50], [11, 3, 2]))  # fmt: skip
    first = STEP + 400 * CP  # both prompts in one step
    third = STEP + 50 * CP  # C's one step: its prompt beside A's decode
    assert r.requests == 3 and r.steps == 1 + 2 + 1 + 1 + 6
    assert r.output_tok_s == pytest.approx(16 / (first + 10 * STEP + 50 * CP), abs=0.05)  # A's ten decode steps, one with C's prompt
    assert r.mean_ttft_ms == pytest.approx((2 * first + third) / 3 * 1e3, abs=0.05)
    # TPOT: A (end - first token) / 10 over its ten decode steps; B 2 steps / 2; C 1 step / 1
    assert r.mean_tpot_ms == pytest.approx(((10 * STEP + 50 * CP) / 10 + STEP + STEP) / 3 * 1e3, abs=0.005)
    with pytest.raises(ValueError):
        simulate(lambda n: STEP, prefill_token_s=CP, prompt_len=1, output_len=1, concurrency=1, num_prompts=3,
                 max_num_seqs=8, max_num_batched_tokens=8192, kv_slots=100, lengths=([1], [1]))  # fmt: skip


def test_spread_lengths_are_vllms_draws():
    """vLLM 0.26.0 vllm/benchmarks/datasets/utils.py:72-79, 98-99: floor / ceil bounds, an output at least 1, one
    ratio for both, ``default_rng(seed).integers(low, high + 1)`` prompts first (--seed 0)."""
    import numpy as np

    assert spread_range(1024, 0.5) == (512, 1536) and spread_range(512, 0.5, output=True) == (256, 768)
    assert spread_range(1000, 0.333) == (667, 1333) and spread_range(1, 0.9, output=True) == (1, 2)
    ins, outs = spread_lengths(1024, 512, 0.5, 640)
    rng = np.random.default_rng(0)
    assert list(ins) == rng.integers(512, 1537, size=640).tolist() and list(outs) == rng.integers(256, 769, size=640).tolist()
    assert min(ins) >= 512 and max(ins) <= 1536 and min(outs) >= 256 and max(outs) <= 768
    assert abs(statistics.fmean(ins) / 1024 - 1) < 0.03 and abs(statistics.fmean(outs) / 512 - 1) < 0.03  # centred: means
    assert spread_lengths(1024, 512, 0.5, 640) == (ins, outs)  # deterministic
    assert spread_lengths(1024, 512, 0.0, 5) == ((1024,) * 5, (512,) * 5)


def _loop(c: int, lengths=None, P=1024, out=512, M=8192):
    n = bench_prompts(c)
    return simulate(lambda n_: STEP, prefill_token_s=CP, prompt_len=P, output_len=out, concurrency=c, num_prompts=n,
                    max_num_seqs=1024, max_num_batched_tokens=M, kv_slots=100_000, lengths=lengths)  # fmt: skip


def test_a_spread_breaks_the_waves():
    """64 requests of 1,024 + 512 tokens, M 8,192. Fixed lengths: the first 64 prompts queue over 8 prefill steps, so
    the requests get their first tokens, end and come back in synchronised groups of 8, whose prompts fill one step's
    budget together, wave after wave. Lengths spread ±50%: requests end one by one, and each replacement is prefilled
    in the next step beside the decoding ones, alone: after the first wave (still 64 at once: p99 unchanged) a
    request waits about one step with one prompt."""
    fixed = _loop(64)
    spread = _loop(64, spread_lengths(1024, 512, 0.5, bench_prompts(64)))
    step_with_a_prompt = (STEP + 1536 * CP) * 1e3  # the longest prompt the spread draws, beside the decoders
    assert spread.median_ttft_ms <= 1.2 * step_with_a_prompt
    assert fixed.median_ttft_ms > 3 * step_with_a_prompt and fixed.median_ttft_ms >= (STEP + 7 * 1024 * CP) * 1e3  # a group's step
    assert spread.mean_ttft_ms < 0.6 * fixed.mean_ttft_ms
    assert spread.p99_ttft_ms == pytest.approx(fixed.p99_ttft_ms, rel=0.1)  # the first wave still queues


@pytest.mark.parametrize(("c", "P", "out", "M"), [(8, 1000, 101, 8192), (64, 1024, 512, 8192), (64, 1024, 512, 2048),
                                                (128, 512, 1024, 16384), (32, 4000, 200, 4096)])  # fmt: skip
@pytest.mark.parametrize("r", [0.2, 0.5, 0.9])
def test_a_spread_keeps_throughput_and_tpot_at_the_same_mean_lengths(c, P, out, M, r):
    """Against fixed lengths at the draws' own means. TPOT within +8%/-2%: the spread moves the prefills from between
    the waves (when the wave's other requests are still waiting for theirs) into the other requests' decode steps, at
    most one prompt's prefill per request per lifetime (here +7% at C 8, fewer than 2% from C 64). tok/s within
    -(R/10 + 4%)/+2%: the run drains on its longest outputs, up to O x R steps more of ten lifetimes."""
    L = spread_lengths(P, out, r, bench_prompts(c))
    spread = _loop(c, L, P, out, M)
    fixed = _loop(c, None, round(statistics.fmean(L[0])), round(statistics.fmean(L[1])), M)
    assert -0.02 <= spread.mean_tpot_ms / fixed.mean_tpot_ms - 1 <= 0.08
    assert -(r / 10 + 0.04) <= spread.output_tok_s / fixed.output_tok_s - 1 <= 0.02


_VLLM_DRAWS = """
import json, sys
import numpy as np
from vllm.benchmarks.datasets.utils import get_sampling_params
class Tok:  # a tokenizer that adds no special token: vLLM draws around the lengths as given
    vocab_size = 32000
    def num_special_tokens_to_add(self):
        return 0
out = []
for P, O, r, n in json.loads(sys.stdin.read()):
    ins, outs, _ = get_sampling_params(np.random.default_rng(0), n, r, P, O, Tok())
    out.append([ins.tolist(), outs.tolist()])
print("@@RESULT@@" + json.dumps(out))
"""


@pytest.mark.vllm
@pytest.mark.parametrize("version", ["0.26", "0.32"])
def test_spread_lengths_are_the_draws_of_vllms_own_code(version):
    """vLLM's own get_sampling_params (vllm/benchmarks/datasets/utils.py) with the benchmark's generator, seed 0."""
    import json
    import subprocess

    python, env = vllm_env(version)
    cases = [(1024, 512, 0.5, 2560), (1000, 7, 0.333, 200), (4000, 200, 0.9, 320)]
    proc = subprocess.run([str(python), "-c", _VLLM_DRAWS], input=json.dumps(cases), capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for (P, out, r, n), (ins, outs) in zip(cases, json.loads(proc.stdout.rsplit("@@RESULT@@", 1)[-1])):
        assert spread_lengths(P, out, r, n) == (tuple(ins), tuple(outs)), (P, out, r, n)
