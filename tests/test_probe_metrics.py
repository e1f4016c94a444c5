"""Metrics parsing with /metrics text captured from a real vLLM 0.32 CPU server (tests/fixtures),
window arithmetic, and failure-log recognition on real and typical vLLM logs."""

from __future__ import annotations

from pathlib import Path

import pytest

from advisor.errors import ProbeError
from advisor.probe.failures import classify, read_tail
from advisor.probe.metrics import GENERATION, Snapshot, implied_r, parse, window

FIX = Path(__file__).parent / "fixtures"


def test_parse_real_suffix_metrics() -> None:
    snap = parse((FIX / "vllm_metrics_suffix_k8.txt").read_text(), at=5.0)
    assert snap.counters == {
        "vllm:generation_tokens_total": 256.0,
        "vllm:spec_decode_num_drafts_total": 53.0,
        "vllm:spec_decode_num_draft_tokens_total": 204.0,
        "vllm:spec_decode_num_accepted_tokens_total": 177.0,
    }
    assert snap.accepted_per_pos == {0: 34.0, 1: 26.0, 2: 21.0, 3: 21.0, 4: 21.0, 5: 18.0, 6: 18.0, 7: 18.0}
    # The per-position counts add up to the accepted total, as in vLLM's SpecDecodingStats.
    assert sum(snap.accepted_per_pos.values()) == snap.counters["vllm:spec_decode_num_accepted_tokens_total"]


def test_parse_real_vanilla_metrics_has_no_spec_counters() -> None:
    snap = parse((FIX / "vllm_metrics_vanilla.txt").read_text())
    assert snap.counters == {GENERATION: 68.0}
    w = window(Snapshot(), snap, seconds=2.0)
    assert w.throughput == 34.0
    assert w.mean_acceptance_length is None and w.acceptance_per_position is None
    assert w.tokens_per_step == 1.0


def test_window_derivations() -> None:
    after = parse((FIX / "vllm_metrics_suffix_k8.txt").read_text(), at=12.0)
    before = Snapshot(at=10.0, counters={GENERATION: 56.0, "vllm:spec_decode_num_drafts_total": 3.0,
                                          "vllm:spec_decode_num_accepted_tokens_total": 27.0},
                      accepted_per_pos={0: 4.0})  # fmt: skip
    w = window(before, after)
    assert w.seconds == 2.0
    assert w.generation_tokens == 200.0 and w.drafts == 50.0 and w.accepted_tokens == 150.0
    assert w.throughput == 100.0
    assert w.mean_acceptance_length == pytest.approx(1 + 150 / 50)
    assert w.tokens_per_step == pytest.approx(200 / (200 - 150))
    assert w.accepted_per_pos[0] == 30.0
    assert w.acceptance_per_position[0] == pytest.approx(30 / 50)


def test_counters_sum_over_engines() -> None:
    text = (
        "# TYPE vllm:generation_tokens_total counter\n"
        'vllm:generation_tokens_total{engine="0",model_name="m"} 10.0\n'
        'vllm:generation_tokens_total{engine="1",model_name="m"} 32.0\n'
    )
    assert parse(text).counters[GENERATION] == 42.0


def test_window_needs_vllm_metrics() -> None:
    with pytest.raises(ProbeError, match="generation_tokens"):
        window(Snapshot(), parse("# TYPE other_total counter\nother_total 1.0\n"))


def test_unreadable_metrics() -> None:
    with pytest.raises(ProbeError, match="unreadable"):
        parse("vllm:generation_tokens_total{engine= 3 oops\n")


def test_implied_r() -> None:
    # K̄ 3 tokens per step and 2x throughput: a speculative step costs 1.5 plain steps.
    assert implied_r(3.0, 200.0, 100.0) == pytest.approx(1.5)
    assert implied_r(3.0, 200.0, None) is None
    assert implied_r(None, 200.0, 100.0) is None


# --- failure recognition ------------------------------------------------------------------------


def test_real_max_model_len_log() -> None:
    f = classify(read_tail(FIX / "vllm_log_max_model_len.txt"))
    assert f.code == "max_model_len_exceeds_model"
    assert "User-specified max_model_len (4096)" in f.line


def test_real_bad_argument_log() -> None:
    f = classify((FIX / "vllm_log_bad_argument.txt").read_text())
    assert f.code == "bad_arguments"
    assert f.line == "api_server.py: error: unrecognized arguments: --no-such-flag"


@pytest.mark.parametrize(
    ("line", "code"),
    [
        ("(EngineCore_DP0 pid=7) ValueError: No available memory for the cache blocks. Try increasing "
         "`gpu_memory_utilization` when initializing the engine.", "no_kv_blocks"),
        ("ValueError: To serve at least one request with the model's max seq len (131072), (16.0 GiB KV cache "
         "is needed, which is larger than the available KV cache memory (9.1 GiB).", "max_seq_len_too_long"),
        ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.", "cuda_oom"),
        ("vllm serve: error: argument --gpu-memory-utilization: invalid float value: 'x'", "bad_arguments"),
        ("OSError: [Errno 98] error while attempting to bind on address: address already in use", "port_in_use"),
    ],
)  # fmt: skip
def test_known_boot_failures(line: str, code: str) -> None:
    log = f"INFO 11-29 starting\n(APIServer pid=1) {line}\nRuntimeError: Engine core initialization failed.\n"
    f = classify(log)
    assert f.code == code
    assert not f.line.startswith("(APIServer")


def test_crash_names_the_root_cause_not_the_generic_line() -> None:
    log = (
        "(EngineCore_DP0 pid=3) Traceback (most recent call last):\n"
        "(EngineCore_DP0 pid=3) AssertionError: block size must divide 16\n"
        "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}\n"
    )
    assert classify(log) == ("crash", "AssertionError: block size must divide 16")
    assert classify("RuntimeError: Engine core initialization failed. See root cause above.\n").code == "crash"
    assert classify("INFO all fine\nWARNING `OSError: [Errno 24]` may happen\n") is None


def test_read_tail(tmp_path: Path) -> None:
    p = tmp_path / "log"
    p.write_bytes(b"a" * 100 + b"\nlast line\xff\n")
    assert read_tail(p, max_bytes=12).endswith("last line\ufffd\n")
    assert read_tail(tmp_path / "missing") == ""
