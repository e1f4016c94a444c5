"""The search grids, ladders and cut-offs live in rules/policy/decider.yaml (issue 42 item 1), and the search reads them.

Each test copies the bundled policy table, changes one value and checks that what the search tries follows it: the
operating point's max_num_seqs x max_num_batched_tokens grid, the drafter K grid, suffix's lower K on full-K lines,
the suffix load cut-off, the nearest-bootable ladders and the TP sizes. A policy value no code reads fails too."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from advisor.rules.policy import Policy, load_policy

ROOT = Path(__file__).resolve().parent.parent
DECIDER = ROOT / "rules" / "policy" / "decider.yaml"
LLAMA_8B = "meta-llama/Llama-3.1-8B-Instruct"
LLAMA_405B_FP8 = "meta-llama/Llama-3.1-405B-Instruct-FP8"


@pytest.fixture
def policy_with(tmp_path, monkeypatch):
    """``policy_with(name=value, …)``: a copy of the bundled rules whose decider.yaml has those top-level values
    replaced, installed as the rules directory load_policy reads (as tests/test_k_default.py installs its K)."""
    import shutil

    import advisor.paths

    real = advisor.paths.data_path
    rules = tmp_path / "rules"
    shutil.copytree(real("rules"), rules)
    monkeypatch.setattr(advisor.paths, "data_path", lambda name: rules if name == "rules" else real(name))

    def install(**values) -> Policy:
        text = DECIDER.read_text(encoding="utf-8")
        for name, value in values.items():
            line = f"{name}: {list(value) if isinstance(value, tuple) else value}"
            text, n = re.subn(rf"^{name}: .*$", line, text, flags=re.M)
            assert n == 1, name
        (rules / "policy" / "decider.yaml").write_text(text, encoding="utf-8")
        load_policy.cache_clear()
        return load_policy()

    yield install
    load_policy.cache_clear()


def test_every_policy_value_is_read_by_the_code():
    """A value in decider.yaml that no module reads is a default nobody applies (``pol.name`` / ``policy.name``)."""
    code = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "advisor").rglob("*.py"))
    unread = [name for name in Policy.model_fields if name != "sources" and not re.search(rf"\.{name}\b", code)]
    assert not unread, unread


def test_the_operating_point_grid_follows_seqs_grid_and_batched_tokens_grid(policy_with):
    from advisor.plan import operating_point as op
    from advisor.predict.absolute import ReplicaLayout

    q = op.PointQuery(prompt_len=1024, output_len=512)
    bundled = op.grid(q, ReplicaLayout(tp=1), kv_slots=10_000, tokens_per_seq=1)
    assert {b for b, _ in bundled} == set(load_policy().seqs_grid)
    pol = policy_with(seqs_grid=(8, 100, 300), batched_tokens_grid=(1024, 32768))
    pairs = op.grid(q, ReplicaLayout(tp=1), kv_slots=10_000, tokens_per_seq=1)
    assert pairs == [(8, 1024), (8, 32768), (100, 1024), (100, 32768), (300, 1024), (300, 32768)]
    # the K-by-batch-size schedule is decided at the grid's sizes too
    ranges = op.schedule_ranges(lambda n: None, 4, max(pol.seqs_grid))
    assert ranges == [[1, 300, 0]]


def test_the_layout_search_tries_the_tables_max_num_seqs(policy_with):
    """Through recommend's own path: with --max-tpot-ms every candidate's max_num_seqs comes from seqs_grid."""
    from advisor.cli import options as o
    from advisor.cli.recommend import build_recommendation

    def seqs() -> set[int]:
        rec = build_recommendation(LLAMA_8B, o.RecommendOptions(gpu="H200", gpus=1, max_tpot_ms=30.0, spec="none"))
        return {c.max_num_seqs for c in rec.candidates if c.max_num_seqs}

    assert seqs() <= set(load_policy().seqs_grid) and not seqs() <= {8, 40, 200}
    policy_with(seqs_grid=(8, 40, 200))
    assert seqs() and seqs() <= {8, 40, 200}


def test_the_drafter_k_grid_and_the_full_k_fallback_follow_the_table(policy_with):
    from advisor.methods import get
    from advisor.plan.layout import LayoutQuery
    from advisor.vllm_facts import facts

    def ks(method: str, vf=None, query=None) -> list[int]:
        return get(method).ks(None, None, k_fixed=None, k_rules=32, policy=load_policy(), query=query or LayoutQuery(), vf=vf)

    full_k = next(facts(v) for v in ("0.34",) if facts(v).suffix_drafts_full_k)
    top = full_k.suffix_default_num_tokens
    assert ks("eagle3") == list(load_policy().drafter_k_grid)
    assert ks("suffix", full_k) == [top, *(x for x in load_policy().suffix_full_k_fallback if x < top)]
    policy_with(drafter_k_grid=(2, 6), suffix_full_k_fallback=(3,), suffix_k_fallback=(20,))
    assert ks("eagle3") == [2, 6] and ks("draft_model") == [2, 6]
    assert ks("eagle3", query=LayoutQuery(draft_k=5)) == [5]  # --draft-k still fixes it
    assert ks("suffix", full_k) == [top, 3]
    assert ks("suffix") == [32, 20]


def test_the_suffix_load_cut_off_follows_suffix_max_running(policy_with):
    from advisor.plan.operating_point import suffix_load_guard
    from advisor.vllm_facts import facts

    vf = facts()
    cut = load_policy().suffix_max_running
    assert suffix_load_guard(cut, 0.6, vf, 1) is None and suffix_load_guard(cut + 1, 0.6, vf, 1) is not None
    policy_with(suffix_max_running=128)
    assert suffix_load_guard(cut + 1, 0.6, vf, 1) is None
    guard = suffix_load_guard(129, 0.6, vf, 1)
    assert guard is not None and "past the 128 running sequences it was measured at" in guard


def test_the_nearest_bootable_search_walks_the_tables_ladders(policy_with):
    """The seed build's 405B-FP8 at K=32 on 8xB200 does not boot; the first K of boot_k_ladder that boots is proposed
    (bundled 24, 16, …: 16), and the minimum GPU count is searched over tp_ladder."""
    from advisor.domain.decision import Decision
    from advisor.hardware.gpus import get_gpu
    from advisor.model.load import load_profile
    from advisor.plan import memory_terms as t
    from advisor.plan.memory import plan_memory

    profile, b200 = load_profile(LLAMA_405B_FP8), get_gpu("B200")
    d = Decision(speculative_method="suffix", num_speculative_tokens=32, gpu_memory_utilization=0.85, tensor_parallel_size=8,
                 max_model_len=16384, cudagraph_mode="FULL_AND_PIECEWISE")  # fmt: skip
    assert plan_memory(profile, b200, d, num_gpus=8, build=t.SEED_BUILD).alternative.change == "num_speculative_tokens 32 -> 16"
    policy_with(boot_k_ladder=(20, 12))
    assert plan_memory(profile, b200, d, num_gpus=8, build=t.SEED_BUILD).alternative.change == "num_speculative_tokens 32 -> 20"
    policy_with(boot_k_ladder=(28,), boot_seqs_ladder=(600, 300))  # no K on it boots: the next move, fewer sequences
    alt = plan_memory(profile, b200, d, num_gpus=8, build=t.SEED_BUILD).alternative
    assert alt.change == "max_num_seqs 1024 (default) -> 600"

    one = Decision(gpu_memory_utilization=0.85, tensor_parallel_size=1)
    assert plan_memory(profile, b200, one, num_gpus=1, search=False).min_gpus_for_weights == 4
    policy_with(tp_ladder=(1, 3, 6, 12))
    assert plan_memory(profile, b200, one, num_gpus=1, search=False).min_gpus_for_weights == 6


def test_a_grid_out_of_order_is_refused_naming_the_file(policy_with):
    from advisor.errors import DataError

    with pytest.raises(DataError, match=r"decider\.yaml.*seqs_grid: need strictly ascending"):
        policy_with(seqs_grid=(64, 8))


def test_the_ngram_k_default_follows_the_table(policy_with):
    """n-gram's K default is one value in decider.yaml: the probe's bare ``ngram``, the replay's NgramConfig and the
    layout search read it."""
    from advisor.kbar.ngram import NgramConfig
    from advisor.probe.configs import parse_configs

    assert NgramConfig().num_speculative_tokens == load_policy().ngram_num_speculative_tokens == 4
    policy_with(ngram_num_speculative_tokens=6)
    assert NgramConfig().num_speculative_tokens == 6
    assert [c.k for c in parse_configs("vanilla,ngram") if c.method == "ngram"] == [6]
