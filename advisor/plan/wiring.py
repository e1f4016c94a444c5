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

    records, skipped = None, []
    if store_path(settings).is_file():
        from advisor.store import open_store

        with open_store(settings, busy_timeout_s=2.0) as store:  # a read: never wait on a writer for long
            records = [r for r in store.list_records() if r.outcome == "ok"] or None
            skipped = store.skipped
    cache_dir = settings.data_dir / "cache"

    seen: list[str | None] = []

    def _fingerprint() -> str | None:
        """This machine's host fingerprint (what a probe here records), computed at most once."""
        if not seen:
            from advisor.hardware.host import collect_host

            try:
                seen.append(collect_host(settings).fingerprint)
            except Exception:  # noqa: BLE001 - unknown fingerprint: no measurement counts as exact
                seen.append(None)
        return seen[0]

    def _predict(profile: ModelProfile, host: HostContext, workload: Workload, k: int, tp: int) -> dict | None:
        return predictor(profile, host, workload, k, tp, cache_dir=cache_dir, records=records, fingerprint=_fingerprint)

    _predict.skipped = skipped  # rows of the store left out (named): the CLI shows them as warnings

    return _predict


def predictor(profile: ModelProfile, host: HostContext, workload: Workload, k: int, tp: int, *,
              cache_dir: Path | None = None, records=None, fingerprint=None) -> dict | None:  # fmt: skip
    """The K > R prediction at tensor_parallel_size ``tp`` and K as a plain dict (None when the
    predictor declines, e.g. no data), with what probes measured for exactly this deployment
    (``measured``) and for nearly this one (``measured_near``: not used to decide)."""
    from advisor.hardware.gpus import get_gpu
    from advisor.predict.api import predict

    state = None if host.dsa_enabled is None else ("ON" if host.dsa_enabled else "OFF")
    pred = predict(profile, get_gpu(host.gpu), tp, workload, host_state=state, k=k, cache_dir=cache_dir, records=records)
    if pred is None:
        return None
    out = pred.model_dump(mode="json")
    scope = Scope(model=profile.id, corpus=workload.corpus, k=k, gpu=host.gpu, tp=tp, concurrency=workload.concurrency)
    out["measured"], out["measured_near"] = measured_gain(records or [], scope, fingerprint)
    return out


def _same_corpus(a: str | None, b: str | None) -> bool:
    if a is None or b is None:
        return False
    if a == b:
        return True
    pa, pb = Path(a).expanduser(), Path(b).expanduser()
    return pa.is_file() and pb.is_file() and pa.resolve() == pb.resolve()


class Scope:
    """The deployment a measurement must match to decide: model, traffic, K, GPU, TP, concurrency,
    this host's fingerprint and no per-configuration overrides."""

    def __init__(self, *, model: str, corpus: str | None, k: int, gpu: str, tp: int, concurrency: int) -> None:
        self.model, self.corpus, self.k, self.gpu, self.tp, self.concurrency = model, corpus, k, gpu, tp, concurrency


def _split(label: str) -> tuple[str, str]:
    base, _, overrides = label.partition("@")
    return base, overrides


def measured_gain(records, scope: Scope, fingerprint) -> tuple[dict | None, list[dict]]:
    """(exact, near): what probes measured for this model, traffic and K (vanilla and suffix:K of one
    campaign, both ok). ``exact`` pools the campaigns that match every part of ``scope`` (None when
    none does); a measurement on the user's host outranks the prediction
    (advisor.plan.recommend._speculate). ``near`` lists the others with what differs; they are not
    used to decide. ``fingerprint`` is called (once, only when there is a candidate) for this host's."""
    import math

    by_campaign: dict[str, list] = {}
    for r in records:
        if r.outcome == "ok" and r.throughput_tok_s and r.model == scope.model and _same_corpus(r.corpus, scope.corpus):
            by_campaign.setdefault(r.campaign_id, []).append(r)
    exact, near, here = [], [], None
    for cid, recs in sorted(by_campaign.items()):
        for rec in recs:
            base, overrides = _split(rec.config)
            if base != f"suffix:{scope.k}":
                continue
            vans = [v for v in recs if _split(v.config) == ("vanilla", overrides)]
            if not vans:
                continue
            van = max(vans, key=lambda v: v.started_at)
            if here is None:
                here = fingerprint() if callable(fingerprint) else fingerprint
            differs = []
            if (rec.gpu or "none (CPU)").upper() != scope.gpu.upper():
                differs.append(f"GPU {rec.gpu or 'none (CPU)'} vs {scope.gpu}")
            if rec.tensor_parallel_size != scope.tp:
                differs.append(f"TP {rec.tensor_parallel_size} vs {scope.tp}")
            if rec.concurrency != scope.concurrency:
                differs.append(f"concurrency {rec.concurrency} vs {scope.concurrency}")
            if overrides:
                differs.append(f"overrides {overrides}")
            if not here or rec.host_fingerprint != here:
                differs.append("another host (fingerprint differs)" if here else "this host's fingerprint is unknown")
            hit = {"campaign": cid, "gain": rec.throughput_tok_s / van.throughput_tok_s,
                   "k_bar": rec.tokens_per_step or rec.mean_acceptance_length,
                   "fitted": bool(rec.gpu) and getattr(rec, "weights", "real") != "dummy"}  # fmt: skip
            (near if differs else exact).append(hit | ({"differs": differs} if differs else {}))
    near = [n | {"gain": round(n["gain"], 4)} for n in near]
    exact = [{k: v for k, v in h.items() if k != "fitted"} for h in exact]
    if not exact:
        return None, near
    gain = math.exp(sum(math.log(h["gain"]) for h in exact) / len(exact))
    kbars = [h["k_bar"] for h in exact if h["k_bar"]]
    return {
        "gain": round(gain, 4),
        "k_bar": round(sum(kbars) / len(kbars), 4) if kbars else None,
        "runs": len(exact),
        "campaigns": sorted({h["campaign"] for h in exact}),
    }, near


FLAG_OF = {"num_speculative_tokens": "--k", "gpu_memory_utilization": "--gmu", "tensor_parallel_size": "--tp",
           "max_model_len": "--max-model-len"}
"""The command-line flag that sets each Decision field the memory planner may change."""


def planner(profile: ModelProfile, host: HostContext, decision: Decision, fixed: frozenset[str] = frozenset(),
            *, build: str = "release"):  # fmt: skip
    """Boot feasibility: keep the decision when it boots, else take the nearest bootable one that
    leaves the user's explicit flags (``fixed``: Decision field names) as given. When only changing
    a flag would boot, the user's value is kept and reported as not booting, naming the flag.
    ``build``: whose start-up memory terms apply (memory_terms: ``seed`` = the write-up's build)."""
    from advisor.hardware.gpus import get_gpu
    from advisor.plan.memory import nearest_bootable, plan_memory

    gpu = get_gpu(host.gpu)
    plan = plan_memory(profile, gpu, decision, num_gpus=host.gpus, fixed=fixed, build=build)
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
        plan = plan_memory(profile, gpu, decision, num_gpus=host.gpus, build=build)
    else:
        trace.append(f"memory: {plan.reason}")
        free = nearest_bootable(profile, gpu, decision, num_gpus=host.gpus, build=build) if fixed else None
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

