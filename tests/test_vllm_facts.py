"""advisor.vllm_facts against each supported vLLM release's own code: its config defaults, its
get_batch_defaults on stand-in GPUs and its source, read in the vLLM test venv (0.32) or with the
release's wheel beside it (0.26, 0.33, 0.34; tests/vllm_helpers/versions.py). 0.34.0 requires torch
2.14; its config, engine and parser modules import with the venv's torch 2.13 (nothing here runs a kernel)."""

from __future__ import annotations

import json
import subprocess

import pytest

from advisor import vllm_facts
from tests.vllm_helpers.versions import ALL, vllm_env

GPUS = {"B200": (180, "nvidia b200"), "H200": (141, "nvidia h200"), "H100": (80, "nvidia h100 80gb hbm3"),
        "A100": (80, "nvidia a100-sxm4-80gb"), "L40S": (46, "nvidia l40s")}  # fmt: skip
"""Stand-in GPUs (GiB, the name vLLM's platform reports, lower-cased) for get_batch_defaults."""

PROBE = r"""
import dataclasses, importlib, importlib.util, inspect, json, os, re, sys
sys.path.insert(0, os.environ["HELPERS"])
from parse_args import pin_cpu_platform
pin_cpu_platform()
import vllm
import vllm.engine.arg_utils as au
from vllm.config import CacheConfig, SpeculativeConfig, VllmConfig, CompilationConfig
import vllm.envs as envs
from vllm.usage.usage_lib import UsageContext
fields = {f.name: f.default for f in dataclasses.fields(SpeculativeConfig)}
import logging, typing
src_vllm = inspect.getsource(VllmConfig)
src_spec = inspect.getsource(importlib.import_module("vllm.config.speculative"))

class Gpu:  # what get_batch_defaults asks the platform
    def __init__(self, gib, name): self.gib, self.name = gib, name
    def get_device_total_memory(self, device_id=0): return self.gib * (1 << 30)
    def get_device_name(self, device_id=0): return self.name
    def is_device_capability(self, cap, device_id=0): return False
    def is_tpu(self): return False
    def is_cpu(self): return False

def _names(t):
    out = []
    for a in typing.get_args(t):
        out += _names(a) if typing.get_args(a) else [a]
    return out
spec_mod = importlib.import_module("vllm.config.speculative")
mtp_aliases = set(_names(spec_mod.MTPModelTypes)) - {"mtp"}
spec_methods = [m for m in _names(spec_mod.SpeculativeMethod) if m not in mtp_aliases]

def _suffix_config(**kw):
    # SpeculativeConfig(method="suffix", ...) as the release builds it (0.26-0.33 check that arctic_inference
    # imports to validate suffix: a stand-in module answers that check, which reads nothing from it)
    import types
    sys.modules.setdefault("arctic_inference", types.ModuleType("arctic_inference"))
    for mod in ("vllm.config.speculative", "vllm.utils.import_utils"):
        try:
            m = importlib.import_module(mod)
        except ImportError:
            continue
        if hasattr(m, "has_arctic_inference"):
            m.has_arctic_inference = lambda: True
    logging.disable(logging.WARNING)
    return SpeculativeConfig(method="suffix", **kw)

# What the release's suffix proposer reads: the V1 proposer (vllm/v1/spec_decode/suffix_decoding.py) or 0.34's
# GPU speculator (vllm/v1/worker/gpu/spec_decode/suffix/speculator.py)
def _source(mod):
    try:
        found = importlib.util.find_spec(mod)
    except ModuleNotFoundError:  # a parent package the release lacks
        return None
    return open(found.origin).read() if found is not None else None
suffix_proposer = next(m for m in ("vllm.v1.worker.gpu.spec_decode.suffix.speculator", "vllm.v1.spec_decode.suffix_decoding")
                       if _source(m) is not None)
suffix_src = _source(suffix_proposer)
ngram_cfg_src = _source("vllm.v1.worker.gpu.spec_decode.ngram.config") or ""
ngram_spec_src = _source("vllm.v1.worker.gpu.spec_decode.ngram.speculator") or ""

tiers = {}
for gpu, (gib, name) in json.loads(os.environ["GPUS"]).items():
    au.current_platform = Gpu(gib, name)
    tokens, seqs = au.EngineArgs.get_batch_defaults(1)
    tiers[gpu] = [tokens[UsageContext.OPENAI_API_SERVER], seqs[UsageContext.OPENAI_API_SERVER]]
print(json.dumps({
    "version": vllm.__version__,
    "depth": fields["suffix_decoding_max_tree_depth"],
    "cached": fields["suffix_decoding_max_cached_requests"],
    "factor": fields["suffix_decoding_max_spec_factor"],
    "min_prob": fields["suffix_decoding_min_token_prob"],
    "block": CacheConfig.DEFAULT_BLOCK_SIZE,
    "gmu": getattr(*(lambda d: (d, "default", d))({f.name: f.default for f in dataclasses.fields(CacheConfig)}["gpu_memory_utilization"])),
    "cap_sm100": "1024 if current_platform.is_device_capability_family(100) else 512" in src_vllm,
    "cap_512": ", 512)" in src_vllm or "else 512" in src_vllm,
    "rounds_to_qlen": hasattr(CompilationConfig, "adjust_cudagraph_sizes_for_spec_decode"),
    # the async-scheduling fallback names the method: "%s-based " "speculative decoding" (0.26, 0.32),
    # f"{spec_config.method}-based speculative decoding" (0.33), with suffix outside the allowed methods
    "async_off_for_other_methods": bool(re.search(r'-based\s*"?\s*"?speculative decoding', src_vllm)),
    # the method families VllmConfig keeps async scheduling on with (EagleModelTypes holds MTP's names)
    "async_types": sorted(typing.get_args(importlib.import_module("vllm.config.speculative").EagleModelTypes)
                          + typing.get_args(importlib.import_module("vllm.config.speculative").NgramGPUTypes)),
    "names_ngram_gpu_and_dspark": "NgramGPUTypes" in src_vllm and '"dspark"' in src_vllm,
    # the async fallback's exceptions named by string beside the two families, read in the condition just before the
    # "not supported" warning (0.26 names draft_model only where the user asked for async scheduling; 0.32 there too)
    # (0.26, 0.32: `method != "draft_model"` before the warning; 0.33: `method not in ("draft_model", ...)` before
    # its f"{spec_config.method}-based speculative decoding")
    "async_named": sorted(m for m in ("draft_model", "dspark", "dflash")
                          if any(re.search(rf'method != "{m}"|method not in \([^)]*"{m}"', src_vllm[max(0, i - 500):i])
                                 for i in [x.start() for x in re.finditer(r"Async scheduling not supported|-based speculative decoding\"", src_vllm)])),
    "mtp": '"mtp"' in src_spec,
    "profiles_graphs": bool(envs.VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS),
    "parser": hasattr(importlib.import_module(os.environ["ADVISOR_PARSER_MODULE"]), "make_arg_parser"),
    "tiers": tiers,
    "spec_methods": spec_methods,
    "suffix_default_k": _suffix_config().num_speculative_tokens,
    "suffix_default_k_depth4": _suffix_config(suffix_decoding_max_tree_depth=4).num_speculative_tokens,
    "suffix_default_k_depth64": _suffix_config(suffix_decoding_max_tree_depth=64).num_speculative_tokens,
    "corpus_tokens": fields.get("suffix_decoding_corpus_tokens"),
    "suffix_proposer": suffix_proposer,
    # the suffix_decoding_* fields the proposer's source reads (config.suffix_decoding_X / spec.suffix_decoding_X)
    "suffix_reads": sorted(set(re.findall(r"(?:config|spec)\.(suffix_decoding_[a-z_]+)", suffix_src))),
    # 0.34: filler slots (no match) are the last sampled token, stored and verified like drafts
    "suffix_fills_k": "out = tl.where(draft_ok, draft, last_tok)" in suffix_src,
    "ngram_gpu_for_ngram": 'base_method = "ngram"' in ngram_cfg_src and "NgramGPUSpeculator" in ngram_cfg_src,
    "ngram_fills_k": "tl.where(slot_valid, gathered, last_tok)" in ngram_spec_src,
    "block_default": CacheConfig.DEFAULT_BLOCK_SIZE,
    # EAGLE drafts' max_position_embeddings raised to the target's (vLLM #48894, PR #49343)
    "draft_position_override": "_maybe_override_draft_max_position_embeddings(" in (_source("vllm.config.speculative") or "")
                               .split("def _maybe_override_draft_max_position_embeddings")[0]
                               + (_source("vllm.v1.worker.gpu.spec_decode.speculator_config") or ""),
    "gmu_class_default": getattr(CacheConfig, "DEFAULT_GPU_MEMORY_UTILIZATION", None),
    "extensible": "enable_extensible_kv_cache" in {f.name for f in dataclasses.fields(CacheConfig)},
    "v1_runner": _source("vllm.v1.worker.gpu_model_runner") is not None,
    "imports_arctic": "arctic_inference" in src_spec,
    # MTP drafter modules vLLM compiles (@support_torch_compile on a class of the module), read from the source
    "mtp_compiled": {mt: "@support_torch_compile" in open(importlib.util.find_spec(
        f"vllm.model_executor.models.{mod}").origin).read() for mt, mod in
        (("glm4_moe", "glm4_moe_mtp"), ("deepseek_v3", "deepseek_mtp"), ("qwen3_next", "qwen3_next_mtp"))},
}))
"""


@pytest.mark.vllm
@pytest.mark.parametrize("version", ALL)
def test_facts_match_the_release_own_config_defaults(version: str):
    from tests.test_vllm_contract import HELPER

    python, env = vllm_env(version)
    env = {**env, "HELPERS": str(HELPER.parent), "GPUS": json.dumps(GPUS)}
    out = subprocess.run([str(python), "-c", PROBE], capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    f = vllm_facts.facts(version)
    assert got["version"].startswith(f.release)
    assert (f.suffix_max_tree_depth, f.suffix_max_cached_requests, f.suffix_max_spec_factor, f.suffix_min_token_prob) == (
        got["depth"], got["cached"], got["factor"], got["min_prob"])  # fmt: skip
    assert f.block_size == got["block"]
    if f.extensible_kv_cache:  # unset: 1.0 with the extensible KV cache, the class default without it
        assert got["gmu"] is None and got["extensible"] and f.gpu_memory_utilization == got["gmu_class_default"]
    else:
        assert f.gpu_memory_utilization == got["gmu"] and not got["extensible"]
    assert (f.graph_cap_sm100 == 1024) == got["cap_sm100"] and got["cap_512"] and f.graph_cap == 512
    assert f.capture_sizes_multiple_of_qlen == got["rounds_to_qlen"]
    assert f.async_scheduling_with_suffix is not got["async_off_for_other_methods"]
    if f.async_scheduling_with_suffix:  # 0.34: no method turns async scheduling off
        assert set(f.async_spec_methods) == set(got["spec_methods"]) and not got["v1_runner"]
    else:
        assert got["names_ngram_gpu_and_dspark"] and "mtp" in got["async_types"] and "ngram_gpu" in got["async_types"]
        assert set(f.async_spec_methods) <= set(got["async_types"]) | {"dspark"} | set(got["async_named"])
        assert ("draft_model" in f.async_spec_methods) == ("draft_model" in got["async_named"])
        assert not {"suffix", "ngram"} & set(got["async_types"]) and not {"suffix", "ngram"} & set(f.async_spec_methods)
    # the methods and the suffix rules of this release (issue 41)
    assert list(f.spec_methods) == got["spec_methods"] and {"eagle3", "draft_model", "suffix", "ngram", "mtp"} <= set(f.spec_methods)
    assert (got["suffix_default_k"], got["suffix_default_k_depth4"]) == (f.suffix_default_num_tokens, 4)
    assert got["suffix_default_k_depth64"] == (64 if f.suffix_default_k is None else f.suffix_default_k)
    assert f.suffix_corpus_tokens == got["corpus_tokens"]
    assert set(f.suffix_tuning_knobs) == set(got["suffix_reads"]) - {"suffix_decoding_corpus_tokens"}, got["suffix_proposer"]
    assert f.suffix_drafts_full_k == got["suffix_fills_k"] == got["suffix_proposer"].startswith("vllm.v1.worker.gpu.")
    assert f.ngram_drafts_full_k == (got["ngram_gpu_for_ngram"] and got["ngram_fills_k"])
    assert f.block_size == got["block_default"]
    assert f.draft_position_override == got["draft_position_override"]
    assert (f.arctic_inference is None) is not got["imports_arctic"]
    assert got["mtp"] and f.mtp_method == "mtp"
    # the MTP drafters this release runs eagerly (no @support_torch_compile in the module: priced as host work,
    # advisor.predict.absolute.mtp_gain) are exactly the catalogued MTP model types without it
    assert set(f.mtp_eager_drafters) == {mt for mt, compiled in got["mtp_compiled"].items() if not compiled}
    assert f.profiles_cudagraph_memory == got["profiles_graphs"]
    assert got["parser"], f"{f.parser_module} has no make_arg_parser in vLLM {got['version']}"
    for gpu, (gib, name) in GPUS.items():
        assert list(f.batch_defaults(gib * 1024, name)) == got["tiers"][gpu], gpu


def test_facts_table_is_per_version_with_sources_and_unknown_versions_name_the_supported():
    assert vllm_facts.versions() == ["0.26", "0.32", "0.33", "0.34"]
    assert vllm_facts.facts("0.26").graph_cap_sm100 == 512 and vllm_facts.facts("0.32.0").graph_cap_sm100 == 1024
    for v in vllm_facts.versions():
        f = vllm_facts.facts(v)
        assert f.suffix_draft_cap == 12  # depth 24, factor 1.0
        assert set(f.sources) >= {"suffix_*", "block_size", "graph_cap", "async_scheduling_with_suffix", "batch_tiers",
                                  "parser_module", "profiles_cudagraph_memory", "mtp_method", "suffix_default_k",
                                  "suffix_drafts_full_k", "suffix_tuning_knobs", "spec_methods"}  # fmt: skip
        assert all(f"({f.release}" in src for src in f.sources.values()), v
    with pytest.raises(KeyError, match="supported: 0.26, 0.32, 0.33, 0.34"):
        vllm_facts.facts("0.99")


def test_batch_defaults_differ_where_the_releases_do():
    b200, gb10 = 180 * 1024, 128 * 1024
    assert vllm_facts.facts("0.26").batch_defaults(b200, "nvidia b200") == (8192, 1024)  # no 160 GiB tier yet
    assert vllm_facts.facts("0.32").batch_defaults(b200, "nvidia b200") == (16384, 1024)
    assert vllm_facts.facts("0.32").batch_defaults(gb10, "nvidia gb10") == (8192, 1024)
    assert vllm_facts.facts("0.33").batch_defaults(gb10, "nvidia gb10") == (2048, 256)  # GB10 kept small
    assert vllm_facts.facts("0.34").batch_defaults(gb10, "nvidia gb10") == (2048, 256)


def test_the_suffix_rules_per_line():
    """issue 41: 0.34's GPU suffix speculator drafts all K, defaults K to min(8, depth) and reads neither
    max_spec_factor nor min_token_prob; 0.26-0.33 default K to the depth and read all four knobs."""
    old_knobs = {"suffix_decoding_max_tree_depth", "suffix_decoding_max_cached_requests",
                 "suffix_decoding_max_spec_factor", "suffix_decoding_min_token_prob"}  # fmt: skip
    for v in ("0.26", "0.32", "0.33"):
        f = vllm_facts.facts(v)
        assert (f.suffix_default_k, f.suffix_default_num_tokens, f.suffix_drafts_full_k) == (None, 24, False)
        assert set(f.suffix_tuning_knobs) == old_knobs and f.arctic_inference and not f.extensible_kv_cache
    new = vllm_facts.facts("0.34")
    assert (new.suffix_default_k, new.suffix_default_num_tokens, new.suffix_drafts_full_k, new.ngram_drafts_full_k) == (8, 8, True, True)
    assert set(new.suffix_tuning_knobs) == old_knobs - {"suffix_decoding_max_spec_factor", "suffix_decoding_min_token_prob"}
    assert new.arctic_inference is None and new.async_scheduling_with_suffix and new.block_size == 64
    for v in vllm_facts.versions():
        assert {"eagle3", "draft_model"} <= set(vllm_facts.facts(v).spec_methods)


def test_version_choice_ranks_flag_setting_installed_default():
    from advisor.errors import UsageError

    none = lambda: None  # noqa: E731
    assert vllm_facts.choose_version("0.33.0", "0.26", none).version == "0.33"
    assert vllm_facts.choose_version(None, "0.26", none).why.startswith("ADVISOR_VLLM_VERSION")
    c = vllm_facts.choose_version(None, None, lambda: "0.26.0")
    assert (c.version, c.why, c.note) == ("0.26", "vLLM 0.26.0 installed here", None)
    c = vllm_facts.choose_version(None, None, lambda: "0.30.1")
    assert c.version == vllm_facts.DEFAULT_VERSION and "0.30.1 is not supported" in c.note
    assert vllm_facts.choose_version(None, None, none).why.startswith("default")
    with pytest.raises(UsageError, match=r"--vllm-version 0.31: vLLM 0.31 is not supported; supported: 0.26, 0.32, 0.33, 0.34"):
        vllm_facts.choose_version("0.31", None, none)


def test_consumers_read_the_table():
    from advisor.kbar.replay import ReplayConfig
    from advisor.plan import memory_terms as t
    from advisor.domain.decision import SuffixParams
    from advisor.plan.recommend import MAX_DRAFT_AT_DEFAULTS

    f = vllm_facts.facts()
    assert MAX_DRAFT_AT_DEFAULTS == f.suffix_draft_cap
    assert t.DEFAULT_BLOCK_SIZE == f.block_size
    assert t.DEFAULT_GRAPH_CAP == {"sm100": f.graph_cap_sm100, "other": f.graph_cap}
    s, r = SuffixParams(), ReplayConfig()
    assert (s.max_tree_depth, s.max_cached_requests, s.max_spec_factor, s.min_token_prob) == (
        r.max_tree_depth, r.max_cached_requests, r.max_spec_factor, r.min_token_prob) == (
        f.suffix_max_tree_depth, f.suffix_max_cached_requests, f.suffix_max_spec_factor, f.suffix_min_token_prob)  # fmt: skip


def test_the_graph_mechanism_uses_the_table_cap_per_gpu_family():
    from advisor.predict import mechanisms as mech

    f = vllm_facts.facts()
    qlen = 33  # K = 32
    top, top_sm100 = f.graph_cap // qlen * qlen, f.graph_cap_sm100 // qlen * qlen  # 495, 1023 on 0.32
    assert mech.spec_step_graph_mode(top, "uniform_batch", k=32) == "piecewise"
    assert mech.spec_step_graph_mode(top + 1, "uniform_batch", k=32) == "none"
    assert mech.spec_step_graph_mode(top_sm100, "uniform_batch", k=32, sm100=True) == "piecewise"
    assert mech.spec_step_graph_mode(top_sm100 + 1, "uniform_batch", k=32, sm100=True) == "none"
    assert mech.DEFAULT_MAX_NUM_SEQS == f.batch_tiers[-1].max_num_seqs
