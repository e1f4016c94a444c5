"""Probe configurations: ``--configs vanilla,suffix:32,ngram:4,suffix:16@gmu=0.8`` and their server flags.

Grammar of one item: ``METHOD[:K][@KEY=VALUE]...`` with METHOD ``vanilla``, ``suffix`` (K defaults to
the decider's, rules/policy/decider.yaml ``num_speculative_tokens``) or ``ngram`` (K defaults to ``ngram_num_speculative_tokens`` there). KEYs override the campaign's settings for this
configuration only: ``gmu``, ``max_model_len``, ``max_num_seqs``, ``tp``, ``cudagraph``; for suffix
``max_tree_depth``, ``max_cached_requests``, ``max_spec_factor``, ``min_token_prob``; for ngram
``prompt_lookup_min``, ``prompt_lookup_max``. ``ngram_gpu[:K]`` is vLLM's GPU n-gram proposer (the same
lookup on the GPU, with async scheduling kept on: vllm/config/vllm.py, 0.26.0 ``NgramGPUTypes``); the
product measures it but does not recommend it yet. ``mtp[:K]`` is the checkpoint's own multi-token
prediction layers (a model whose config has ``num_nextn_predict_layers``; vLLM's method name per version from
``advisor.vllm_facts``, async scheduling kept on), the method ``recommend`` launches for such models. ``eagle3[:K]``,
``eagle[:K]`` and ``draft_model[:K]`` (K of these defaults to decider.yaml ``probe_default_k``) run a drafter model named by ``@draft=DIR_OR_ID`` (an EAGLE
head or a draft model, as ``recommend --draft`` takes it; required). The label (``ProbeRecord.config``) is the normalised
item, overrides sorted by key, so reruns recognise finished configurations.
"""

from __future__ import annotations

import json
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from advisor.errors import UsageError
from advisor.domain.decision import Decision, SuffixParams
from advisor.kbar.ngram import default_k as ngram_default_k
from advisor.rules.policy import load_policy
from advisor.vllm_facts import DEFAULT_VERSION

DRAFTER_METHODS = ("eagle3", "eagle", "draft_model")
"""Methods whose drafter is a model, named with ``@draft=DIR_OR_ID`` (advisor.methods: ``uses_drafter``)."""
NGRAM_METHODS = ("ngram", "ngram_gpu")
"""vLLM's prompt-lookup proposers: on the CPU (``ngram``) and on the GPU (``ngram_gpu``); the same lookup keys."""
_DECISION_KEYS = {
    "gmu": "gpu_memory_utilization",
    "max_model_len": "max_model_len",
    "max_num_seqs": "max_num_seqs",
    "tp": "tensor_parallel_size",
    "cudagraph": "cudagraph_mode",
}
_SUFFIX_KEYS = set(SuffixParams.model_fields)
_NGRAM_KEYS = {"prompt_lookup_min", "prompt_lookup_max"}


class ProbeConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    method: Literal["vanilla", "suffix", "ngram", "ngram_gpu", "mtp", "eagle3", "eagle", "draft_model"]
    k: int | None = None
    overrides: tuple[tuple[str, str], ...] = ()

    @property
    def label(self) -> str:
        head = self.method if self.k is None else f"{self.method}:{self.k}"
        return head + "".join(f"@{k}={v}" for k, v in self.overrides)

    @property
    def is_vanilla(self) -> bool:
        return self.method == "vanilla"


def default_k(method: str) -> int:
    """K of ``METHOD`` written without one, from rules/policy/decider.yaml: ``num_speculative_tokens`` (suffix),
    ``ngram_num_speculative_tokens`` (n-gram), ``probe_default_k`` (the others)."""
    if method == "suffix":
        return load_policy().num_speculative_tokens
    return ngram_default_k() if method in NGRAM_METHODS else load_policy().probe_default_k[method]


def _parse_one(item: str) -> ProbeConfig:
    head, *pairs = item.strip().split("@")
    method, _, k_text = head.partition(":")
    method = method.strip().lower()
    if method not in ("vanilla", "suffix", *NGRAM_METHODS, "mtp", *DRAFTER_METHODS):
        raise UsageError(f"unknown probe configuration {item!r}: expected vanilla, suffix[:K], ngram[:K], ngram_gpu[:K], "
                         "mtp[:K], or eagle3[:K] / eagle[:K] / draft_model[:K] with @draft=DIR_OR_ID")
    if method == "vanilla" and k_text:
        raise UsageError(f"{item!r}: vanilla takes no K")
    k = None
    if method != "vanilla":
        try:
            k = int(k_text) if k_text else default_k(method)
        except ValueError:
            raise UsageError(f"{item!r}: K must be an integer") from None
        if not 1 <= k <= 64:
            raise UsageError(f"{item!r}: K must be in 1..64")
    allowed = set(_DECISION_KEYS) | (_SUFFIX_KEYS if method == "suffix" else set()) | (_NGRAM_KEYS if method in NGRAM_METHODS else set())
    allowed |= {"draft"} if method in DRAFTER_METHODS else set()
    overrides: dict[str, str] = {}
    for pair in pairs:
        key, eq, value = pair.partition("=")
        key = key.strip()
        if not eq or key not in allowed:
            raise UsageError(f"{item!r}: unknown override {pair!r}; allowed: {', '.join(sorted(allowed))}")
        overrides[key] = value.strip()
    if method in DRAFTER_METHODS and not overrides.get("draft"):
        raise UsageError(f"{item!r}: {method} needs its drafter: add @draft=DIR_OR_ID (an EAGLE head or a draft model, "
                         f"e.g. {method}:3@draft=yuhuili/EAGLE3-LLaMA3.1-Instruct-8B)")
    return ProbeConfig(method=method, k=k, overrides=tuple(sorted(overrides.items())))


def parse_configs(text: str) -> list[ProbeConfig]:
    """Parse a comma-separated list; duplicates (same label) are dropped."""
    seen: dict[str, ProbeConfig] = {}
    for item in text.split(","):
        if item.strip():
            cfg = _parse_one(item)
            seen.setdefault(cfg.label, cfg)
    if not seen:
        raise UsageError("--configs is empty")
    configs = list(seen.values())
    for cfg in configs:
        probe_flags(cfg, Decision())  # validate the override values now, not at boot
    return configs


def probe_decision(cfg: ProbeConfig, base: Decision) -> Decision:
    """The Decision this configuration runs: ``base`` plus the overrides (ngram: the vanilla part)."""
    update = base.model_dump()
    suffix = dict(update["suffix"])
    for key, value in cfg.overrides:
        if key in _DECISION_KEYS:
            update[_DECISION_KEYS[key]] = value
        elif key in _SUFFIX_KEYS:
            suffix[key] = value
    update["suffix"] = suffix
    if cfg.method in ("suffix", "mtp", *DRAFTER_METHODS):
        update.update(speculative_method=cfg.method, num_speculative_tokens=cfg.k,
                      speculative_model=dict(cfg.overrides).get("draft"))
    else:
        update.update(speculative_method=None, num_speculative_tokens=None)
    try:
        return Decision(**update)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise UsageError(f"configuration {cfg.label!r}: {'.'.join(map(str, first['loc']))}: {first['msg']}") from None


def probe_flags(cfg: ProbeConfig, base: Decision, version: str = DEFAULT_VERSION) -> list[str]:
    """Server flags (no program, no model) for ``cfg`` on top of the campaign's ``base`` Decision."""
    from advisor.render.flags import serve_flags

    flags = serve_flags(probe_decision(cfg, base), version)
    if cfg.method in NGRAM_METHODS:
        spec: dict = {"method": cfg.method, "num_speculative_tokens": cfg.k}
        for key, value in cfg.overrides:
            if key in _NGRAM_KEYS:
                try:
                    spec[key] = int(value)
                except ValueError:
                    raise UsageError(f"configuration {cfg.label!r}: {key} must be an integer") from None
        flags += ["--speculative-config", json.dumps(spec, separators=(",", ":"))]
    return flags
