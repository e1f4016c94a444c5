"""Adapters that plug the memory planner, the predictor and the K̄ estimator into
:func:`advisor.plan.recommend.recommend` (which stays pure and takes them as arguments)."""

from __future__ import annotations

from pathlib import Path

from advisor.errors import UsageError
from advisor.model.schema import ModelProfile
from advisor.plan.decision import Decision
from advisor.plan.host import HostContext
from advisor.plan.workload import SEED_CORPORA, Workload


def workload_for(corpus: str | None, concurrency: int, tokenizer: str, k: int, *, on_progress=None,
                 allow_fallback: bool = True) -> Workload:  # fmt: skip
    """A seed corpus name, a trace file (K̄ measured with ``advisor kbar``'s estimator), or unknown.

    ``allow_fallback``: when ``tokenizer`` (the model's, by default) cannot be loaded, measure with
    the labelled built-in fallback and say so in ``notes``; False (the user named ``--tokenizer``)
    fails like ``advisor kbar`` does."""
    if corpus is None:
        return Workload(concurrency=concurrency)
    if corpus in SEED_CORPORA:
        return Workload(corpus=corpus, concurrency=concurrency)
    path = Path(corpus).expanduser()
    if not path.is_file():
        raise UsageError(f"--corpus {corpus!r} is neither a seed corpus ({', '.join(SEED_CORPORA)}) nor a file")
    from advisor.kbar.estimate import estimate_kbar

    # No early stop: a still-warming shared cache biases an early K̄ low (docs/kbar.md).
    result = estimate_kbar(path, tokenizer, k=k, allow_fallback=allow_fallback, on_progress=on_progress)
    notes = []
    if result.tokenizer_fallback:
        notes.append(f"K̄ of {path.name} was measured with a substituted tokenizer: {result.tokenizer} "
                     f"({tokenizer!r} could not be loaded); pass --tokenizer for the model's own")  # fmt: skip
    return Workload(
        corpus=str(path), corpus_is_file=True, concurrency=concurrency, notes=notes,
        k_bar=result.tokens_per_step, k_bar_k=k,
        k_bar_source=f"measured on {path.name} ({result.requests} requests, advisor kbar, tokenizer {result.tokenizer})",
    )  # fmt: skip


def make_predictor(settings):
    """A predictor for :func:`recommend`: fitted on the seed sweep plus this user's probe records
    (the SQLite store, when it exists), with the fitted coefficients kept as JSON in the data dir."""
    from advisor.store import store_path

    records = None
    if store_path(settings).is_file():
        from advisor.store import open_store

        with open_store(settings) as store:
            records = [r for r in store.list_records() if r.outcome == "ok"] or None
    cache_dir = settings.data_dir / "cache"

    def _predict(profile: ModelProfile, host: HostContext, workload: Workload, k: int, tp: int) -> dict | None:
        return predictor(profile, host, workload, k, tp, cache_dir=cache_dir, records=records)

    return _predict


def predictor(profile: ModelProfile, host: HostContext, workload: Workload, k: int, tp: int, *,
              cache_dir: Path | None = None, records=None) -> dict | None:  # fmt: skip
    """The K > R prediction at tensor_parallel_size ``tp`` and K as a plain dict (None when the
    predictor declines, e.g. no data)."""
    from advisor.hardware.gpus import get_gpu
    from advisor.predict.api import predict

    state = None if host.dsa_enabled is None else ("ON" if host.dsa_enabled else "OFF")
    pred = predict(profile, get_gpu(host.gpu), tp, workload, host_state=state, k=k, cache_dir=cache_dir, records=records)
    if pred is None:
        return None
    out = pred.model_dump(mode="json")
    out["measured"] = measured_gain(records or [], profile.id, workload, k, host.gpu)
    return out


def _same_corpus(a: str | None, b: str | None) -> bool:
    if a is None or b is None:
        return False
    if a == b:
        return True
    pa, pb = Path(a).expanduser(), Path(b).expanduser()
    return pa.is_file() and pb.is_file() and pa.resolve() == pb.resolve()


def measured_gain(records, model_id: str, workload: Workload, k: int, gpu: str) -> dict | None:
    """What probes on this host measured for exactly this model, traffic and K (vanilla and
    suffix:K of one campaign, both ok), or None. A measurement on the user's host outranks the
    prediction (advisor.plan.recommend._speculate)."""
    from advisor.predict.dataset import probe_observations

    hits = [o for o in probe_observations(records)
            if o.model == model_id and o.k == k and _same_corpus(o.corpus, workload.corpus)
            and (o.gpu or gpu).upper() == gpu.upper()]  # fmt: skip
    if not hits:
        return None
    import math

    gain = math.exp(sum(math.log(o.gain) for o in hits) / len(hits))
    kbars = [o.k_bar for o in hits if o.k_bar]
    return {
        "gain": round(gain, 4),
        "k_bar": round(sum(kbars) / len(kbars), 4) if kbars else None,
        "runs": len(hits),
        "campaigns": sorted({o.source.split(":", 1)[1] for o in hits}),
    }


FLAG_OF = {"num_speculative_tokens": "--k", "gpu_memory_utilization": "--gmu", "tensor_parallel_size": "--tp",
           "max_model_len": "--max-model-len"}
"""The command-line flag that sets each Decision field the memory planner may change."""


def planner(profile: ModelProfile, host: HostContext, decision: Decision, fixed: frozenset[str] = frozenset()):
    """Boot feasibility: keep the decision when it boots, else take the nearest bootable one that
    leaves the user's explicit flags (``fixed``: Decision field names) as given. When only changing
    a flag would boot, the user's value is kept and reported as not booting, naming the flag."""
    from advisor.hardware.gpus import get_gpu
    from advisor.plan.memory import nearest_bootable, plan_memory

    gpu = get_gpu(host.gpu)
    plan = plan_memory(profile, gpu, decision, num_gpus=host.gpus, fixed=fixed)
    trace: list[str] = []
    warnings: list[str] = []
    if plan.boots:
        trace.append(f"memory: {plan.reason}")
    elif plan.alternative is not None:
        alt = plan.alternative
        trace.append(f"memory: the rules' choice {plan.reason}")
        trace.append(f"memory: using the nearest configuration that boots: {alt.change} ({alt.reason})")
        warnings.append(f"the configuration the rules chose does not boot on {host.gpus}x{host.gpu}; changed {alt.change}")
        decision = alt.decision
        plan = plan_memory(profile, gpu, decision, num_gpus=host.gpus)
    else:
        trace.append(f"memory: {plan.reason}")
        free = nearest_bootable(profile, gpu, decision, num_gpus=host.gpus) if fixed else None
        given = ", ".join(f"{FLAG_OF[f]} {getattr(decision, f)}" for f in sorted(fixed) if f in FLAG_OF)
        if free is not None and free.field in fixed:
            flag = FLAG_OF[free.field]
            warnings.append(f"does not boot with your {given} (kept as given): {plan.reason}; "
                            f"it would boot with {free.change} (change or drop {flag})")  # fmt: skip
        elif given:
            warnings.append(f"does not boot with your {given} (kept as given): {plan.reason}")
        else:
            warnings.append(f"does not fit: {plan.reason}")
    return decision, plan.model_dump(mode="json", exclude={"alternative"}), trace, warnings

