"""Boot feasibility: predict vLLM's KV-cache blocks per GPU and find a configuration that boots.

Pure functions over ``ModelProfile``, ``GpuSpec`` and ``Decision``. The terms and their sources are
in :mod:`advisor.plan.memory_terms`; the model is written up in docs/memory.md. Rerun the table
there with ``python -m advisor.calibrate.memory_cli MODEL --gpu B200 --gpus 8 --gmu 0.85 --k 32 --k 0``.
"""

from __future__ import annotations

import math

from advisor.hardware.gpus import GpuSpec
from advisor.model.schema import ModelProfile
from advisor.model.quant_weights import group_overhead_bits
from advisor.plan import memory_terms as t
from advisor.domain.decision import Decision
from advisor.domain.memory import Alternative, MemoryPlan, PlanSummary
from advisor.rules.policy import load_policy
from advisor.vllm_facts import DEFAULT_VERSION
from advisor.vllm_facts import facts as facts_of

# What the alternative search tries (the ladders, the gmu ceiling, the TP sizes) is policy: rules/policy/decider.yaml
# boot_k_ladder, boot_seqs_ladder, boot_gmu_ladder, boot_max_gmu, boot_len_ladder and tp_ladder.


def _gib(n: float) -> float:
    return round(n / t.GiB, 2)


def _core(profile: ModelProfile, gpu: GpuSpec, d: Decision, block_size: int, build: str = "release",
          version: str = DEFAULT_VERSION) -> dict:
    """All the arithmetic of one plan (no verdict text, no alternative search)."""
    tp = d.tensor_parallel_size
    k = (d.num_speculative_tokens or 0) if d.speculative_method else 0
    mnbt, default_seqs = t.batch_defaults(gpu, version)
    seqs = d.max_num_seqs or default_seqs
    mnbt = max(mnbt, seqs)  # scheduler.py: max_num_batched_tokens must be >= max_num_seqs
    total = gpu.memory_bytes
    budget = math.ceil(total * d.gpu_memory_utilization)
    w = t.weights_per_gpu(profile, tp)
    rows = min(mnbt, seqs)  # gpu_model_runner.py _dummy_run: num_reqs = min(num_tokens, max_num_seqs)
    fwd = t.forward_peak(profile, tp, mnbt)
    act = max(fwd, t.sampler_peak(profile, rows, mnbt, spec=False))
    spec_src = max(fwd, t.sampler_peak(profile, rows, mnbt, spec=True)) - act if k else 0
    spec_fit = t.spec_fitted_bytes(profile, k, seqs, build) if k else 0
    cg, graphs = t.cudagraph_bytes(profile, gpu, tp, d.cudagraph_mode, k, seqs, mnbt, version)
    nt = t.non_torch_bytes(tp)
    avail = budget - w.per_gpu - act - spec_src - spec_fit - cg - nt
    kv_all, _ = t.kv_bytes_per_token_gpu(profile, tp)
    block_bytes = max(1, block_size * kv_all)
    blocks = max(0, avail // block_bytes)
    need = t.kv_needed_one_request(profile, tp, d.max_model_len, block_size, mnbt)
    return {
        "tp": tp, "k": k, "mnbt": mnbt, "seqs": seqs, "total": total, "budget": budget, "w": w,
        "act": act, "spec_src": spec_src, "spec_fit": spec_fit, "cg": cg, "graphs": graphs, "nt": nt,
        "avail": avail, "block_bytes": block_bytes, "blocks": int(blocks), "need": need,
        "usable": avail - block_bytes,  # kv_cache_utils.get_kv_cache_configs reserves the null block
    }


def _boots(c: dict, gpu: GpuSpec, gmu: float, num_gpus: int) -> tuple[bool, str]:
    """(boots, reason) from the arithmetic."""
    if c["tp"] > num_gpus:
        return False, f"tensor_parallel_size {c['tp']} needs {c['tp']} GPUs; the host has {num_gpus}"
    if c["budget"] + t.pre_snapshot_bytes(c["tp"]) > c["total"]:
        return False, (
            f"gpu_memory_utilization {gmu} asks for {_gib(c['budget'])} GiB but only about "
            f"{_gib(c['total'] - t.pre_snapshot_bytes(c['tp']))} GiB is free after the CUDA context and NCCL "
            "(vLLM: 'Free memory on device ... is less than desired GPU memory utilization')"
        )
    if c["w"].per_gpu >= c["budget"]:
        return False, f"the weights alone ({_gib(c['w'].per_gpu)} GiB per GPU) exceed the budget ({_gib(c['budget'])} GiB)"
    if c["blocks"] <= 0:
        return False, (
            f"no memory left for the KV cache: {_gib(-c['avail'])} GiB short per GPU, num_gpu_blocks=0 "
            "(vLLM: 'No available memory for the cache blocks')"
        )
    if c["usable"] < c["need"]:
        return False, (
            f"one request of max_model_len needs {_gib(c['need'])} GiB of KV cache but only {_gib(max(0, c['usable']))} GiB "
            "is left (vLLM: 'To serve at least one request with the model's max seq len')"
        )
    return True, "boots"


def _terms(c: dict) -> dict[str, float]:
    return {
        "budget": _gib(c["budget"]),
        "weights": _gib(c["w"].per_gpu),
        "activation_peak": _gib(c["act"]),
        "spec_decode_extra": _gib(c["spec_src"] + c["spec_fit"]),
        "spec_decode_fitted": _gib(c["spec_fit"]),
        "cudagraph": _gib(c["cg"]),
        "non_torch": _gib(c["nt"]),
        "kv_cache": _gib(max(0, c["avail"])),
        "deficit": _gib(max(0, -c["avail"])),
    }


def _quick(profile: ModelProfile, gpu: GpuSpec, d: Decision, num_gpus: int, block_size: int, build: str = "release",
           version: str = DEFAULT_VERSION) -> PlanSummary:
    c = _core(profile, gpu, d, block_size, build, version)
    ok, _ = _boots(c, gpu, d.gpu_memory_utilization, num_gpus)
    tokens = c["blocks"] * block_size if ok else 0
    return PlanSummary(boots=ok, kv_cache_tokens=tokens, num_gpu_blocks=c["blocks"],
                       max_concurrency_at_max_len=round(max(0, c["avail"]) / c["need"], 2) if ok and c["need"] else 0.0)


def boot_verdict(profile: ModelProfile, gpu: GpuSpec, d: Decision, num_gpus: int, *,
                 block_size: int | None = None, build: str = "release",
                 vllm_version: str = DEFAULT_VERSION) -> tuple[bool, int, str]:
    """(boots, KV tokens, reason) of ``d``: the planner's arithmetic without its alternative search or
    minimum-GPU scan (one call per candidate of the layout search). ``block_size``: the line's default
    (advisor.vllm_facts ``block_size``) unless given."""
    block_size = block_size or facts_of(vllm_version).block_size
    c = _core(profile, gpu, d, block_size, build, vllm_version)
    ok, why = _boots(c, gpu, d.gpu_memory_utilization, num_gpus)
    return ok, c["blocks"] * block_size if ok else 0, why


def _min_gpus(profile: ModelProfile, gpu: GpuSpec, d: Decision, block_size: int) -> int | None:
    """Smallest TP of the policy's ``tp_ladder`` at which the model boots without speculation."""
    for tp in load_policy().tp_ladder:
        plain = d.model_copy(update={"tensor_parallel_size": tp, "speculative_method": None, "num_speculative_tokens": None})
        if _quick(profile, gpu, plain, tp, block_size).boots:
            return tp
    return None


def requantized(profile: ModelProfile, bits: int) -> ModelProfile:
    """The same model with its linear layers stored at ``bits`` (embeddings and LM head kept 16-bit).

    Below 8 bits the layers are planned as a GPTQ/AWQ group-128 checkpoint stores them: one fp16 scale and
    one packed zero point per 128 weights (advisor.model.quant_weights.group_overhead_bits)."""
    db = t.dense_bytes(profile)
    vocab_params = profile.params_embedding_b * (1 if profile.tie_word_embeddings else 2) * 1e9
    linear = max(0.0, profile.params_total_b * 1e9 - vocab_params)
    per_weight = bits + (group_overhead_bits(bits) if bits < 8 else 0.0)
    weight_bytes = int(vocab_params * db + linear * per_weight / 8)
    name = {8: "fp8", 4: "int4"}.get(bits, f"int{bits}")
    quant = profile.quant.model_copy(update={"method": name, "weight_bits": bits, "ignored": []})
    return profile.model_copy(update={"weight_bytes": weight_bytes, "weights_dtype": name, "quant_method": name, "quant": quant})


def _other_quant_hint(profile: ModelProfile, gpu: GpuSpec, d: Decision, num_gpus: int, block_size: int) -> str:
    hints = []
    current = profile.quant.weight_bits if profile.quant.method else 16
    for bits, label in ((8, "an FP8 checkpoint"), (4, "a 4-bit (AWQ/GPTQ/INT4) checkpoint")):
        if bits >= current:
            continue
        q = requantized(profile, bits)
        need = _min_gpus(q, gpu, d, block_size)
        gib = _gib(q.weight_bytes)
        where = f"boots on {need} x {gpu.name}" if need and need <= max(num_gpus, 1) else (
            f"would need {need} x {gpu.name}" if need else f"would still not fit within {max(load_policy().tp_ladder)} GPUs")
        hints.append(f"{label} (~{gib} GiB of weights) {where}")
    return "; ".join(hints) if hints else "no smaller standard quantization than the current one"


def plan_memory(profile: ModelProfile, gpu: GpuSpec, decision: Decision, *, num_gpus: int | None = None,
                block_size: int | None = None, search: bool = True, build: str = "release",
                fixed: frozenset[str] = frozenset(), vllm_version: str = DEFAULT_VERSION) -> MemoryPlan:
    """Predict vLLM's start-up memory per GPU for ``decision`` on ``num_gpus`` x ``gpu``.

    ``num_gpus`` defaults to the decision's tensor_parallel_size. When the configuration does not
    boot and ``search`` is true, ``alternative`` holds :func:`nearest_bootable`'s answer. ``build``
    is ``release`` (vLLM releases, measured on 0.26.0) or ``seed`` (the seed write-up's 1.7.dev build,
    which adds the FITTED K-dependent term; used to reproduce the seed's boot outcomes).
    """
    num_gpus = num_gpus or decision.tensor_parallel_size
    block_size = block_size or facts_of(vllm_version).block_size  # 16 to 0.33, 64 from 0.34 (FLASH_ATTN keeps it)
    c = _core(profile, gpu, decision, block_size, build, vllm_version)
    ok, why = _boots(c, gpu, decision.gpu_memory_utilization, num_gpus)
    terms = _terms(c)
    consumers = {k: v for k, v in terms.items() if k in ("weights", "activation_peak", "spec_decode_extra", "cudagraph", "non_torch")}
    dominant = max(consumers, key=consumers.__getitem__)
    fits = c["w"].per_gpu < c["budget"]
    min_gpus = _min_gpus(profile, gpu, decision, block_size)
    notes = _notes(profile, decision, c, build)
    tokens = c["blocks"] * block_size if ok else 0
    conc = round(max(0, c["avail"]) / c["need"], 2) if ok and c["need"] else 0.0
    if ok:
        reason = (f"boots: {_gib(max(0, c['avail']))} GiB per GPU left for the KV cache = {c['blocks']} blocks of "
                  f"{block_size} tokens ({tokens} tokens, {conc} requests of {decision.max_model_len} tokens); "
                  f"the largest term is {dominant} ({terms[dominant]} GiB)")
    elif not fits:
        reason = (f"does not boot: {why}. With this gpu_memory_utilization the model needs at least "
                  f"{min_gpus or f'more than {max(load_policy().tp_ladder)}'} x {gpu.name}; {_other_quant_hint(profile, gpu, decision, num_gpus, block_size)}")
    else:
        reason = f"does not boot: {why}; the largest term is {dominant} ({terms[dominant]} GiB per GPU)"
    plan = MemoryPlan(
        boots=ok, kv_cache_tokens=tokens, num_gpu_blocks=c["blocks"], max_concurrency_at_max_len=conc,
        dominant_term=dominant, terms_gib=terms, reason=reason, fits_weights=fits, min_gpus_for_weights=min_gpus,
        inputs={"max_num_batched_tokens": c["mnbt"], "max_num_seqs": c["seqs"], "block_size": block_size,
                "tensor_parallel_size": c["tp"], "num_gpus": num_gpus, "cudagraph_graphs": c["graphs"],
                "block_bytes": c["block_bytes"], "num_speculative_tokens": c["k"]},
        notes=notes,
    )
    if not ok and search:
        plan.alternative = nearest_bootable(profile, gpu, decision, num_gpus=num_gpus, block_size=block_size, build=build,
                                            fixed=fixed, vllm_version=vllm_version)
    return plan


def _notes(profile: ModelProfile, d: Decision, c: dict, build: str = "release") -> list[str]:
    notes = []
    tp = c["tp"]
    from advisor.model.tp_rules import tp_refusal

    refusal = tp_refusal(profile, tp)
    if refusal:
        notes.append(f"vLLM rejects tensor_parallel_size {tp}: {refusal}")
    if profile.attention != "mla" and profile.num_kv_heads < tp:
        notes.append(f"{profile.num_kv_heads} KV heads < TP {tp}: each rank keeps one whole KV head (replicated)")
    if d.max_model_len > profile.max_context:
        notes.append(f"max_model_len {d.max_model_len} exceeds the model's context {profile.max_context}; vLLM refuses it "
                     "unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1")
    if profile.sliding_window_layers:
        notes.append("sliding-window layers: blocks counted at the all-layer page size (vLLM's hybrid allocator may fit more)")
    if profile.attention == "mla":
        notes.append("MLA: the KV latent is not split by TP; q_lora_rank taken as 3 x kv_lora_rank for the replicated down-projections")
    if c["k"] and build == "seed":
        notes.append(f"spec_decode_extra includes a FITTED term ({_gib(c['spec_fit'])} GiB) calibrated on the seed write-up's build "
                     "(vLLM 1.7.dev); vLLM releases have no K-dependent start-up allocation (docs/memory.md)")
    elif c["k"]:
        notes.append(f"spec_decode_extra ({_gib(c['spec_src'])} GiB) is the rejection sampler's warm-up, MEASURED on vLLM 0.26.0 "
                     "(H200, Llama-3.1-8B: 2.4 GiB less KV cache with suffix, the same at K=4 and K=32; docs/memory.md)")
    return notes


def _candidates(profile: ModelProfile, gpu: GpuSpec, d: Decision, num_gpus: int, version: str = DEFAULT_VERSION):
    """(decision, field changed, change, reason) in the search order of nearest_bootable (the policy's ladders)."""
    pol = load_policy()
    k = d.num_speculative_tokens if d.speculative_method else None
    if k:
        for nk in (x for x in pol.boot_k_ladder if x < k):
            yield (d.model_copy(update={"num_speculative_tokens": nk}), "num_speculative_tokens", f"num_speculative_tokens {k} -> {nk}",
                   "fewer draft tokens shrink what speculative decoding holds at start-up; suffix stays on")
    seqs = d.max_num_seqs or t.batch_defaults(gpu, version)[1]
    label = f"{seqs}{'' if d.max_num_seqs else ' (default)'}"
    for ns in (x for x in pol.boot_seqs_ladder if x < seqs):
        yield (d.model_copy(update={"max_num_seqs": ns}), "max_num_seqs", f"max_num_seqs {label} -> {ns}",
               "a smaller batch shrinks the sampler and speculative-decoding buffers sized by max_num_seqs")
    for g in (x for x in pol.boot_gmu_ladder if d.gpu_memory_utilization < x <= pol.boot_max_gmu):
        yield (d.model_copy(update={"gpu_memory_utilization": g}), "gpu_memory_utilization",
               f"gpu_memory_utilization {d.gpu_memory_utilization} -> {g}",
               "a larger budget leaves more memory after weights and activations")
    for ln in (x for x in pol.boot_len_ladder if x < d.max_model_len):
        yield (d.model_copy(update={"max_model_len": ln}), "max_model_len", f"max_model_len {d.max_model_len} -> {ln}",
               "a shorter maximum length needs less KV cache for one full-length request")
    from advisor.model.tp_rules import tp_refusal

    for tp in (x for x in pol.tp_ladder if d.tensor_parallel_size < x <= num_gpus and tp_refusal(profile, x) is None):
        yield (d.model_copy(update={"tensor_parallel_size": tp}), "tensor_parallel_size",
               f"tensor_parallel_size {d.tensor_parallel_size} -> {tp}",
               "more GPUs per replica split the weights and the KV cache further")
    if k:
        yield (d.model_copy(update={"speculative_method": None, "num_speculative_tokens": None}), "num_speculative_tokens",
               f"speculative decoding suffix K={k} -> off", "no smaller change boots with speculation on")


def nearest_bootable(profile: ModelProfile, gpu: GpuSpec, decision: Decision, *, num_gpus: int,
                     block_size: int | None = None, build: str = "release",
                     fixed: frozenset[str] = frozenset(), vllm_version: str = DEFAULT_VERSION) -> Alternative | None:
    """The first single change that boots, in this order (the policy table's ladders, rules/policy/decider.yaml):
    lower K (suffix kept: down ``boot_k_ladder``), lower max_num_seqs, higher gmu (<= ``boot_max_gmu``), lower
    max_model_len, higher TP (<= num_gpus), and as a last resort speculation off. Fields named in ``fixed`` (the user's explicit flags) are never
    changed. None when the decision already boots or nothing single does."""
    block_size = block_size or facts_of(vllm_version).block_size
    if _quick(profile, gpu, decision, num_gpus, block_size, build, vllm_version).boots:
        return None
    for cand, field, change, why in _candidates(profile, gpu, decision, num_gpus, vllm_version):
        if field in fixed:
            continue
        s = _quick(profile, gpu, cand, num_gpus, block_size, build, vllm_version)
        if s.boots:
            return Alternative(decision=cand, field=field, plan_summary=s, change=change,
                               reason=f"{why}: predicted to boot with {s.kv_cache_tokens} KV tokens")
    return None
