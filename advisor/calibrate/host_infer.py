"""Infer a host's speculative-step cost from measured gains (the seed host's profile).

The seed host (8 x B200, the write-up's vLLM 1.7.dev build) was never timed step by step, but its
rows constrain it: one K̄ per corpus and family group is shared by every model, while a fixed host
cost per verification step raises R far more for a small model (a short plain step) than for a
large one. So the cost that best predicts each model's gains from the *other* models' K̄ priors
with K̄ / R alone (no fitted term) is the host's. Every seed row ran at concurrency 32, so only
``per_step + 32 x per_sequence`` is identified; the grid's tie-break takes the smaller per-sequence
share.

``infer(observations, profile_of)`` scores the grid and returns the best pair with the table; a test
checks that the shipped ``seed-b200`` row of calibration/host_profiles.csv is that pair.
"""

from __future__ import annotations

import math
import statistics

from advisor.calibrate import manifests
from advisor.hardware.gpus import get_gpu
from advisor.predict import host_profile as hp
from advisor.predict import kbar_prior as kp
from advisor.predict.dataset import Observation, ProfileFn
from advisor.predict.stepcost import r_ratio
from advisor.probe.record import config_k

GRID_STEP_S = (0.0, 0.25e-3, 0.5e-3, 1e-3, 2e-3, 3.75e-3)
"""Per-step candidates (0 to the H200's measured 3.75 ms)."""
GRID_PER_SEQ_S = (0.0, 10e-6, 20e-6, 60e-6, 120e-6)
"""Per-sequence candidates (0 to the H200's measured 120 us)."""


def _candidate(base: str, a: float, b: float) -> str:
    src = hp.get(base)
    name = f"{src.id}?{a:.6f}/{b:.6f}"
    hp.register(src.model_copy(update={"id": name, "aliases": "", "suffix_step_s": a, "suffix_per_seq_s": b,
                                       "provenance": "candidate", "source": "host_infer"}))  # fmt: skip
    return name


def lomo_error(observations: list[Observation], profile_of: ProfileFn, build: str) -> tuple[float, float]:
    """(median |ln(pred/meas)|, median signed) of the gains predicted by K̄ / R alone, K̄ from the
    other models' implied priors, R with host profile ``build``."""
    rows = [o.model_copy(update={"build": build}) for o in observations if o.corpus]
    implied = [(o.model, o.corpus, o.family, kp.implied_kbar(o, profile_of(o.model))) for o in rows]
    errs = []
    for m in sorted({o.model for o in rows}):
        priors = kp.derive([r for r in implied if r[0] != m], "held out")
        for o in (o for o in rows if o.model == m):
            p = profile_of(m)
            kb, _ = kp.lookup(priors, o.corpus, p.family)
            ctx = kp.shape_for(o.corpus).context(p.family)
            r = r_ratio(p, get_gpu(o.gpu), o.tp, concurrency=o.concurrency, draft_tokens=kp.draft_tokens(kb, o.k),
                        context=ctx, k=o.k, build=build).r  # fmt: skip
            errs.append(math.log(kb / r / o.gain))
    return statistics.median(abs(e) for e in errs), statistics.median(errs)


def infer(observations: list[Observation], profile_of: ProfileFn, base: str = "seed") -> dict:
    """Best (per_step, per_sequence) suffix cost for the host of ``observations`` on the grid."""
    table = []
    for a in GRID_STEP_S:
        for b in GRID_PER_SEQ_S:
            med, bias = lomo_error(observations, profile_of, _candidate(base, a, b))
            table.append({"suffix_step_s": a, "suffix_per_seq_s": b, "median_abs_log_gain": round(med, 4),
                          "median_log_gain": round(bias, 4)})  # fmt: skip
    best = min(table, key=lambda t: (t["median_abs_log_gain"], t["suffix_per_seq_s"], t["suffix_step_s"]))
    return {"best": best, "grid": table,
            "method": "leave-one-model-out K̄/R with no fitted term; K̄ priors from the other models through the "
                      "candidate cost; only per_step + 32 x per_sequence is identified (all rows at concurrency 32)"}  # fmt: skip


FIT_STEP_S = tuple(i * 0.25e-3 for i in range(0, 81))
"""Per-step candidates for a probed host (0-20 ms in 0.25 ms steps)."""
FIT_PER_SEQ_S = tuple(i * 10e-6 for i in range(0, 41))
"""Per-sequence candidates for a probed host (0-400 us in 10 us steps, as gpu_steps.FIT_B_GRID)."""
CARRIED_NGRAM_FROM = "offline-grid"
"""Where a probed host with no n-gram probe takes n-gram's per-sequence cost from: the H200 grid's measurement
(campaign 11, calibration/gpu_steps/h200-vllm0.26.0-c11/: 40 us/seq, NgramProposer's numba loop per request), carried;
its per-step cost is the host's own suffix figure (on the machine that measured both they agreed within 0.25 ms)."""
NO_ASYNC_FLAG = "--no-async-scheduling"
"""A vanilla run with this flag measures what async scheduling off costs a plain step on the host."""


def _no_async(r) -> bool:
    return NO_ASYNC_FLAG in (r.command or [])


class _Pair:
    """One campaign's vanilla + speculative (``suffix:K``, ``ngram:K`` or ``mtp:K``) runs on a GPU host, with the R they imply."""

    def __init__(self, van, suf) -> None:
        self.van, self.suf = van, suf
        self.method = suf.config.split(":", 1)[0]
        self.k = config_k(suf.config)
        self.kbar = suf.tokens_per_step or suf.mean_acceptance_length or 1.0
        self.r_meas = self.kbar * van.throughput_tok_s / suf.throughput_tok_s
        # R is a ratio of step times at one batch. A short load's last wave ramps down, so its steps ran at the
        # requests in flight (Little's law, ProbeRecord.mean_in_flight), not the nominal concurrency: where both
        # runs measured it, the speculative step is priced at its own batch and R is the step-time ratio
        # (K̄ x in-flight / throughput of each run); older records keep the nominal concurrency.
        self.seqs = max(1, round(suf.in_flight))
        self.r_meas *= suf.in_flight / van.in_flight
        acc = (suf.mean_acceptance_length - 1) * suf.spec_drafts / suf.spec_draft_tokens \
            if suf.spec_drafts and suf.spec_draft_tokens and suf.mean_acceptance_length else None  # fmt: skip
        self.draft = min(self.k, kp.max_draft(self.k), (self.kbar - 1) / acc) if acc else kp.draft_tokens(self.kbar, self.k)
        seq_steps = suf.output_tokens / self.kbar if suf.output_tokens else 0
        # share of sequences that drafted in a step: measured (drafts / sequence-steps) where the counters are there
        self.share = min(1.0, suf.spec_drafts / seq_steps) if suf.spec_drafts and seq_steps else \
            (1.0 if getattr(suf, "weights", "real") == "dummy" else 0.6)  # fmt: skip


def probe_pairs(records, methods: tuple[str, ...] = ("suffix", "ngram")) -> dict[str, list[_Pair]]:
    """{host fingerprint: pairs}: ok vanilla + ``METHOD:K`` runs (``methods``: suffix and n-gram, the CPU proposers;
    advisor.calibrate.mtp_cost asks for ``mtp``) of one campaign on a GPU (dummy weights welcome: only the step cost
    is read from them, through R = tokens per step / gain)."""
    prefixes = tuple(f"{m}:" for m in methods)
    by: dict[str, list] = {}
    for r in records:
        if r.outcome == "ok" and r.throughput_tok_s and r.gpu and r.host_fingerprint:
            by.setdefault(r.campaign_id, []).append(r)
    out: dict[str, list[_Pair]] = {}
    for recs in by.values():
        vans = [r for r in recs if r.config == "vanilla" and not _no_async(r)]
        for suf in (r for r in recs if r.config.startswith(prefixes) and "@" not in r.config and r.tokens_per_step):
            if vans:  # the pass's own vanilla: the latest started before the speculative run (else the first)
                before = [v for v in vans if v.started_at <= suf.started_at] or [min(vans, key=lambda v: v.started_at)]
                out.setdefault(suf.host_fingerprint, []).append(_Pair(max(before, key=lambda v: v.started_at), suf))
    return out


def _load_key(r) -> tuple:
    return (r.host_fingerprint, r.model, r.corpus, r.concurrency, r.gpu, r.tensor_parallel_size, r.weights, r.max_tokens)


def async_off_pairs(records) -> dict[str, list[tuple]]:
    """{host fingerprint: [(vanilla, vanilla with --no-async-scheduling)]} of one load (model, corpus,
    concurrency, GPU, TP, weights): what turning async scheduling off costs a plain step there."""
    ok = [r for r in records if r.outcome == "ok" and r.throughput_tok_s and r.gpu and r.host_fingerprint
          and r.config == "vanilla"]  # fmt: skip
    plain = {}
    for r in ok:
        if not _no_async(r):
            k = _load_key(r)
            if k not in plain or r.started_at > plain[k].started_at:
                plain[k] = r
    out: dict[str, list[tuple]] = {}
    for r in (r for r in ok if _no_async(r)):
        if _load_key(r) in plain:
            out.setdefault(r.host_fingerprint, []).append((plain[_load_key(r)], r))
    return out


def fit_async_off(pairs: list[tuple]) -> tuple[float, float]:
    """(per-step, per-sequence) seconds async scheduling off adds to a plain step: least squares of the
    measured step-time difference (concurrency / throughput, one token per sequence per step) on
    concurrency; one concurrency identifies the per-step part only. The slope is kept >= 0."""
    xs = [float(v.concurrency) for v, _ in pairs]
    ys = [v.concurrency / n.throughput_tok_s - v.concurrency / v.throughput_tok_s for v, n in pairs]
    if len(set(xs)) < 2:
        return max(0.0, statistics.fmean(ys)), 0.0
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    b = max(0.0, sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs))
    return max(0.0, my - b * mx), b


FLOOR_HOST_BOUND = 0.25
"""A vanilla run measures the host's floor when the GPU's own work of its step (the bytes and FLOPs of the modelled
roofline, without the kernels' fixed latency) is under this share of its measured step, so what it measured is the
host's (SmolLM2-135M: 0.06 ms against 2-5 ms measured); an 8B model's is 3.4 ms of a 5-10 ms step, left out."""


def _ctx(r, profile) -> float:
    return kp.shape_for(None if r.corpus.endswith((".jsonl", ".json", ".txt")) else r.corpus).context(profile.family)


def fit_plain_floor(vans, profile_of: ProfileFn) -> dict:
    """The host floor of a plain step (per-step + per-sequence x sequences, seconds) from vanilla runs whose
    GPU work (modelled bytes and FLOPs) is far below the measured step (FLOOR_HOST_BOUND): least squares of the measured step
    (sequences in flight / throughput) on the sequences in flight (the nominal concurrency in records without
    ``mean_in_flight``), slope >= 0. Runs that are GPU-bound say nothing about it."""
    from advisor.predict.stepcost import StepShape, step_cost

    obs, skipped = [], 0
    for v in vans:
        m = profile_for_record(v.model, profile_of)
        seqs = v.in_flight  # the batch the steps ran at (see _Pair)
        c = step_cost(m, get_gpu(v.gpu), v.tensor_parallel_size, StepShape(seqs=max(1, round(seqs)), tokens_per_seq=1, context=_ctx(v, m)))
        g = max(c.t_memory, c.t_compute) + c.t_moe_kernel  # the step's GPU work (its dense kernels' fixed latency aside)
        meas = seqs / v.throughput_tok_s
        if g < FLOOR_HOST_BOUND * meas:
            obs.append((float(seqs), meas))
        else:
            skipped += 1
    if not obs:
        return {"step_s": 0.0, "per_seq_s": 0.0, "runs": 0, "gpu_bound_runs": skipped}
    xs, ys = [x for x, _ in obs], [y for _, y in obs]
    if len(set(xs)) < 2:
        a, b = statistics.fmean(ys), 0.0
    else:
        mx, my = statistics.fmean(xs), statistics.fmean(ys)
        b = max(0.0, sum((x - mx) * (y - my) for x, y in obs) / sum((x - mx) ** 2 for x in xs))
        a = max(0.0, my - b * mx)
    return {"step_s": round(a, 6), "per_seq_s": round(b, 7), "runs": len(obs), "gpu_bound_runs": skipped}


def profile_for_record(model: str, profile_of: ProfileFn):
    """The profile of a probed model: its id, or (for a directory on the GPU machine, e.g.
    ``/root/probe-models/Llama-3.1-8B-Instruct``) the catalog id its folder name is known by."""
    from advisor.errors import AdvisorError
    from advisor.calibrate.gpu_steps import MODEL_IDS

    try:
        return profile_of(model)
    except AdvisorError:
        name = model.rstrip("/").rsplit("/", 1)[-1]
        if name in MODEL_IDS:
            return profile_of(MODEL_IDS[name])
        raise


def _r_pred(pair: _Pair, profile, name: str) -> float:
    from advisor.hardware.gpus import get_gpu

    ctx = kp.shape_for(None if pair.suf.corpus.endswith((".jsonl", ".json", ".txt")) else pair.suf.corpus).context(profile.family)
    return r_ratio(profile, get_gpu(pair.suf.gpu), pair.suf.tensor_parallel_size, concurrency=pair.seqs,
                   draft_tokens=pair.draft, context=ctx, draft_share=pair.share, k=pair.k, build=name,
                   method=pair.method).r  # fmt: skip


def _method_candidate(base: str, method: str, a: float, b: float) -> str:
    if method == "suffix":
        return _candidate(base, a, b)
    src = hp.get(base)
    name = f"{src.id}?ngram{a:.6f}/{b:.6f}"
    hp.register(src.model_copy(update={"id": name, "aliases": "", "ngram_step_s": a, "ngram_per_seq_s": b,
                                       "provenance": "candidate", "source": "host_infer"}))  # fmt: skip
    return name


def _fit_method(pairs: list[_Pair], profile_of: ProfileFn, base: str, method: str) -> tuple[float, float, list[int]]:
    """Least summed |ln R_pred / R_meas| over ``pairs`` (one method) on FIT_STEP_S x FIT_PER_SEQ_S."""
    concs = sorted({p.suf.concurrency for p in pairs})
    held = hp.get(base).costs(method)[1]  # type: ignore[arg-type]
    per_seq = FIT_PER_SEQ_S if len(concs) > 1 else (held,)
    # A speculative step's cost is linear in the profile's pair (stepcost.step_cost adds per-step +
    # per-sequence x sequences), so R(a, b) = R(0, 0) + (a + b x sequences) / plain step: one r_ratio per pair.
    from advisor.hardware.gpus import get_gpu

    zero = _method_candidate(base, method, 0.0, 0.0)
    base_r = []
    for p in pairs:
        m = profile_for_record(p.suf.model, profile_of)
        ctx = kp.shape_for(None if p.suf.corpus.endswith((".jsonl", ".json", ".txt")) else p.suf.corpus).context(m.family)
        rb = r_ratio(m, get_gpu(p.suf.gpu), p.suf.tensor_parallel_size, concurrency=p.seqs, draft_tokens=p.draft,
                     context=ctx, draft_share=p.share, k=p.k, build=zero, method=p.method)  # fmt: skip
        base_r.append((rb.r, rb.plain.total, p.seqs, p.r_meas))
    best = (math.inf, 0.0, 0.0)
    for a in FIT_STEP_S:
        for b in per_seq:
            err = sum(abs(math.log((r0 + (a + b * n) / plain) / rm)) for r0, plain, n, rm in base_r)
            if err < best[0] - 1e-12:
                best = (err, a, b)
    return best[1], best[2], concs


SOURCE_CAMPAIGNS = 20
"""Campaign ids a fitted profile's ``source`` names; the rest are counted (25,000 campaigns made a field past the csv
module's 128 KiB limit, and every later read of host_profiles.csv failed)."""


def _campaigns_source(ids: list[str]) -> str:
    shown = [i if len(i) <= 64 else i[:61] + "..." for i in ids[:SOURCE_CAMPAIGNS]]
    more = f" and {len(ids) - SOURCE_CAMPAIGNS:,} more ({len(ids):,} in all)" if len(ids) > SOURCE_CAMPAIGNS else ""
    return "probe store: campaigns " + ", ".join(shown) + more


def profile_from_probes(pairs: list[_Pair], profile_of: ProfileFn, base: str = "release",
                        async_pairs: list[tuple] | None = None, plain_floor: bool = True) -> dict:  # fmt: skip
    """The (per-step, per-sequence) cost of each probed method (suffix, n-gram) that reproduces the R
    these probes measured (least summed |ln R_pred / R_meas| on FIT_STEP_S x FIT_PER_SEQ_S; ties: the
    smaller per-sequence share), with the async-scheduling-off share where ``--no-async-scheduling``
    vanilla runs measured it, as a host profile row with its evidence. Probes at one concurrency only
    identify per-step + concurrency x per-sequence: the per-sequence share is then held at ``base``'s."""
    from advisor.errors import DataError

    by = {m: [p for p in pairs if p.method == m] for m in ("suffix", "ngram")}
    if not pairs:
        raise DataError("no vanilla + suffix:K / ngram:K probe pairs to fit a host profile from")
    notes = []
    floor = {"step_s": 0.0, "per_seq_s": 0.0, "runs": 0}
    if plain_floor:
        vans = list({id(p.van): p.van for p in pairs}.values())
        floor = fit_plain_floor(vans, profile_of)
        if floor["runs"]:
            src = hp.get(base)
            base = f"{src.id}?floor{floor['step_s']:.6f}/{floor['per_seq_s']:.7f}"
            hp.register(src.model_copy(update={"id": base, "aliases": "", "plain_floor_step_s": floor["step_s"],
                                               "plain_floor_per_seq_s": floor["per_seq_s"], "provenance": "candidate",
                                               "source": "host_infer"}))  # fmt: skip
            notes.append(f"plain-step host floor: MEASURED ({floor['runs']} host-bound vanilla run(s), "
                         "host_infer.fit_plain_floor; async scheduling overlaps it with the GPU's step)")  # fmt: skip
    fits = {m: _fit_method(ps, profile_of, base, m) for m, ps in by.items() if ps}
    for m, (a, b, concs) in fits.items():
        notes.append(f"{m}: MEASURED by advisor probe ({len(by[m])} vanilla/{m} pair(s) at concurrency "
                     f"{', '.join(map(str, concs))}; R = tokens per step / gain, fitted by host_infer.profile_from_probes"
                     + (f"; one concurrency: per-sequence held at {base}'s" if len(concs) == 1 else "") + ")")  # fmt: skip
    if "suffix" not in fits:
        fits["suffix"] = fits["ngram"]
        notes.append("suffix: per-step and per-sequence as n-gram (INFERRED: no suffix probe)")
    if "ngram" not in fits:
        carried = hp.spec_costs(CARRIED_NGRAM_FROM, "ngram")[1]
        fits["ngram"] = (fits["suffix"][0], carried, [])
        notes.append(f"n-gram: per-step as suffix (INFERRED; equal within 0.25 ms where both were measured on one "
                     f"machine), per-sequence {carried * 1e6:.0f} us CARRIED from {CARRIED_NGRAM_FROM} (MEASURED there, "
                     "campaign 11)")  # fmt: skip
    dummy = [p for p in by["suffix"] if getattr(p.suf, "weights", "real") == "dummy"]
    if dummy:
        drafted = statistics.median(p.draft for p in dummy)
        notes.append(f"CAVEAT: dummy weights drafted {drafted:.1f} tokens per sequence per step; held out, the H200 "
                     "serving fit of such probes overstated the R of real-weight traffic (docs/predictor.md)")  # fmt: skip
    (sa, sb, _), (na, nb, _) = fits["suffix"], fits["ngram"]
    aa = ab = 0.0
    if async_pairs:
        aa, ab = fit_async_off(async_pairs)
        aa, ab = round(min(aa, sa, na), 6), round(min(ab, max(sb, nb)), 7)
        notes.append(f"async scheduling off: MEASURED ({len(async_pairs)} vanilla pair(s) with and without "
                     f"{NO_ASYNC_FLAG}, host_infer.fit_async_off), a labelled share of each method's cost")  # fmt: skip
    noise = run_to_run_sigma(pairs)
    for m, v in noise.items():
        notes.append(f"{m} run to run: sigma(ln R) {v['sigma']:.2f} MEASURED over {v['settings']} setting(s) probed in "
                     f"more than one boot ({v['dof']} degrees of freedom, host_infer.run_to_run_sigma), in the interval")  # fmt: skip
    s = pairs[0].suf
    host = s.host or {}
    prof = hp.HostProfile(
        id=f"probe-{s.host_fingerprint[:12]}", gpu=s.gpu, cpu_model=((host.get("cpu") or {}).get("model") or "unknown"),
        vllm_version=s.vllm_version or "unknown", suffix_step_s=round(sa, 6), suffix_per_seq_s=round(sb, 6),
        ngram_step_s=round(na, 6), ngram_per_seq_s=round(nb, 6), async_off_step_s=aa, async_off_per_seq_s=ab,
        plain_floor_step_s=floor["step_s"], plain_floor_per_seq_s=floor["per_seq_s"],
        suffix_run_sigma=noise.get("suffix", {}).get("sigma", 0.0), ngram_run_sigma=noise.get("ngram", {}).get("sigma", 0.0),
        provenance="; ".join(notes), source=_campaigns_source(sorted({p.suf.campaign_id for p in pairs})),
    )  # fmt: skip
    fit_name = {"suffix": _method_candidate(base, "suffix", sa, sb), "ngram": _method_candidate(base, "ngram", na, nb)}
    table = [{"campaign": p.suf.campaign_id, "model": p.suf.model, "method": p.method, "concurrency": p.suf.concurrency,
              "k_bar": round(p.kbar, 3), "drafted_per_seq_step": round(p.draft, 2),
              "gain": round(p.suf.throughput_tok_s / p.van.throughput_tok_s, 4),
              "r_measured": round(p.r_meas, 4),
              "r_fitted": round(_r_pred(p, profile_for_record(p.suf.model, profile_of), fit_name[p.method]), 4)}
             for p in pairs]  # fmt: skip
    edge = any(a == FIT_STEP_S[-1] or (len(c) > 1 and b == FIT_PER_SEQ_S[-1]) for a, b, c in fits.values() if c)
    return {"profile": prof.model_dump(), "pairs": table, "at_grid_edge": edge}


def run_to_run_sigma(pairs: list[_Pair]) -> dict[str, dict]:
    """{method: {"sigma", "dof", "settings"}}: the pooled standard deviation of ln R (each pass against its own
    vanilla) over the settings (campaign: model, corpus, load, host; and configuration) measured in more than one
    boot. Only methods with at least one repeated setting appear."""
    groups: dict[tuple, list[float]] = {}
    for p in pairs:
        groups.setdefault((p.suf.campaign_id, p.suf.config), []).append(math.log(p.r_meas))
    out: dict[str, dict] = {}
    for (_, config), xs in groups.items():
        if len(xs) < 2:
            continue
        m = statistics.fmean(xs)
        acc = out.setdefault(config.split(":", 1)[0], {"ss": 0.0, "dof": 0, "settings": 0})
        acc["ss"] += sum((x - m) ** 2 for x in xs)
        acc["dof"] += len(xs) - 1
        acc["settings"] += 1
    return {k: {"sigma": round(math.sqrt(v["ss"] / v["dof"]), 3), "dof": v["dof"], "settings": v["settings"]}
            for k, v in out.items()}  # fmt: skip


def probe_check(pairs: list[_Pair], profile_of: ProfileFn, build: str) -> list[dict]:
    """R the ``build`` profile predicts for each probe pair against the R it measured."""
    out = []
    for p in pairs:
        pred = _r_pred(p, profile_for_record(p.suf.model, profile_of), build)
        out.append({"campaign": p.suf.campaign_id, "gpu": p.suf.gpu, "vllm": p.suf.vllm_version,
                    "concurrency": p.suf.concurrency, "r_measured": round(p.r_meas, 4), "r_predicted": round(pred, 4),
                    "ln_pred_over_meas": round(math.log(pred / p.r_meas), 4), "profile": hp.get(build).id})  # fmt: skip
    return out


SERVING_CAMPAIGN = manifests.root("serving_campaign")
"""calibration/manifests.yaml ``serving_campaign``."""
SERVING_FIT = manifests.folders("serving_fit")
"""calibration/manifests.yaml ``serving_fit``."""
SERVING_CHECK = manifests.folders("serving_check")
"""calibration/manifests.yaml ``serving_check``."""


def _check(pairs: list[_Pair], profile_of: ProfileFn, name: str) -> dict:
    """R and gain (with the measured K̄) that profile ``name`` predicts for ``pairs``, per method."""
    rows, by = [], {}
    for p in pairs:
        r = _r_pred(p, profile_for_record(p.suf.model, profile_of), name)
        gain = p.suf.throughput_tok_s / p.van.throughput_tok_s
        rows.append({"campaign": p.suf.campaign_id, "method": p.method, "corpus": p.suf.corpus.rsplit("/", 1)[-1],
                     "concurrency": p.suf.concurrency, "k_bar": round(p.kbar, 3), "r_measured": round(p.r_meas, 3),
                     "r_predicted": round(r, 3), "gain_measured": round(gain, 3), "gain_predicted": round(p.kbar / r, 3)})  # fmt: skip
        by.setdefault(p.method, []).append(abs(math.log(r / p.r_meas)))
    return {"median_abs_log_r": {m: round(statistics.median(v), 4) for m, v in by.items()}, "rows": rows}


def serving_fit(calibration_dir, profile_of: ProfileFn, read) -> dict:
    """The H200 serving profile refitted from SERVING_FIT through the probe path (profile_from_probes,
    what `advisor calibrate` does with a user's --dummy-weights probes), and held out on SERVING_CHECK:
    the R and gains (measured K̄) it predicts for a 135M model with real weights, next to what the
    offline-engine grid's profile predicts. Plain steps of the held-out model: measured against modelled."""
    from advisor.errors import AdvisorError
    from advisor.hardware.gpus import get_gpu
    from advisor.predict.stepcost import StepShape, step_cost

    profile_of = probed_profile_of(calibration_dir, profile_of)
    root = calibration_dir / SERVING_CAMPAIGN
    if not (root / SERVING_FIT[0] / "records.jsonl").is_file():
        return {"available": False, "reason": f"no {SERVING_CAMPAIGN}/{SERVING_FIT[0]}/records.jsonl under calibration/"}
    recs = [r for f in SERVING_FIT if (root / f / "records.jsonl").is_file() for r in read(root / f)]
    pairs = [p for ps in probe_pairs(recs).values() for p in ps]
    asyncs = [a for ps in async_off_pairs(recs).values() for a in ps]
    fit = profile_from_probes(pairs, profile_of, base="offline-grid", async_pairs=asyncs)
    prof = hp.HostProfile(**{**fit["profile"], "id": "serving-fit?"})
    hp.register(prof)
    passes = [read(root / f) for f in SERVING_CHECK if (root / f / "records.jsonl").is_file()]
    held = [r for recs in passes for r in recs]
    # each pass against its own vanilla (the two passes share campaign ids)
    hpairs = [p for recs in passes for ps in probe_pairs(recs).values() for p in ps]
    try:
        plain = []
        for r in (r for r in held if r.config == "vanilla" and not _no_async(r)):
            m = profile_for_record(r.model, profile_of)
            ctx = kp.shape_for(None).context(m.family)
            pred = step_cost(m, get_gpu(r.gpu), r.tensor_parallel_size, StepShape(seqs=r.concurrency, tokens_per_seq=1, context=ctx)).total
            plain.append({"corpus": r.corpus.rsplit("/", 1)[-1], "concurrency": r.concurrency,
                          "step_ms_measured": round(r.concurrency / r.throughput_tok_s * 1e3, 3),
                          "step_ms_modelled": round(pred * 1e3, 3)})  # fmt: skip
        held_out = {"available": bool(hpairs), "folders": [f"{SERVING_CAMPAIGN}/{f}" for f in SERVING_CHECK],
                    "serving_profile": _check(hpairs, profile_of, prof.id) if hpairs else None,
                    "offline_grid_profile_as_shipped": _check(hpairs, profile_of, "offline-grid") if hpairs else None,
                    "plain_steps": plain}  # fmt: skip
    except AdvisorError as exc:  # the held-out model's config is not here (scripts/build_smollm2.py builds it)
        held_out = {"available": False, "reason": str(exc)}
    return {"available": True, "fitted_on": [f"{SERVING_CAMPAIGN}/{f}" for f in SERVING_FIT], "fit": fit,
            "held_out": held_out}


SERVING_REAL_FIT = manifests.folders("serving_real_fit")
"""calibration/manifests.yaml ``serving_real_fit``."""
SERVING_REAL_ASYNC = manifests.folders("serving_real_async")
"""calibration/manifests.yaml ``serving_real_async``."""
SERVING_DUMMY_WARM = manifests.folders("serving_dummy_warm")
"""calibration/manifests.yaml ``serving_dummy_warm``."""


def probed_profile_of(calibration_dir, profile_of: ProfileFn) -> ProfileFn:
    """``profile_of`` that also knows the model directories probed on a GPU machine (``/root/models/<name>``), by
    folder name: the ``config.json`` committed under ``calibration/gpu_real/models/<name>/`` (the probed directory's
    own, so a fresh checkout evaluates without building anything), else ``.cache/models/<name>/``
    (scripts/build_smollm2.py builds SmolLM2-135M-Instruct there)."""
    from pathlib import Path

    from advisor.errors import AdvisorError

    def local(model: str, _of=profile_of):
        try:
            return _of(model)
        except AdvisorError:
            name = model.rstrip("/").rsplit("/", 1)[-1]
            root = Path(calibration_dir)
            for here in (root / "gpu_real" / "models" / name, root.parent / ".cache" / "models" / name):
                if (here / "config.json").is_file():
                    return _of(str(here))
            raise

    return local


def _stem(r) -> str:
    return r.corpus.rsplit("/", 1)[-1].rsplit(".", 1)[0]


def serving_real_fit(calibration_dir, profile_of: ProfileFn, read) -> dict:
    """The H200 serving profile of real-weight traffic: ``profile_from_probes`` (what ``advisor calibrate`` does
    with a user's probes) on SERVING_REAL_FIT, with the plain-step host floor its vanilla runs measure and the
    async-off share of SERVING_REAL_ASYNC. Out of sample:

    - ``leave_one_corpus_out``: for each corpus, the profile fitted on the other corpus's runs, and the R it
      predicts for the held corpus's pairs (measured K̄: the R check alone);
    - ``dummy_transfer``: the speculative-step costs fitted on SERVING_DUMMY_WARM (an 8B shape, dummy weights)
      with the floor of the real runs, checked on every real-weight pair: how far a dummy probe lands.

    Returns ``{"available": False, ...}`` without the folders or the model's config (scripts/build_smollm2.py)."""
    from advisor.errors import AdvisorError

    profile_of = probed_profile_of(calibration_dir, profile_of)
    root = calibration_dir / SERVING_CAMPAIGN
    folders = [f for f in SERVING_REAL_FIT if (root / f / "records.jsonl").is_file()]
    if not folders:
        return {"available": False, "reason": f"no {SERVING_CAMPAIGN}/{SERVING_REAL_FIT[0]}/records.jsonl under calibration/"}
    recs = [r for f in folders for r in read(root / f)]
    asy = [a for ps in async_off_pairs(recs + [r for f in SERVING_REAL_ASYNC if (root / f / "records.jsonl").is_file()
                                              for r in read(root / f)]).values() for a in ps]  # fmt: skip
    pairs = [p for ps in probe_pairs(recs).values() for p in ps]
    # records.jsonl files leave the host to the probe store: the host class is the one a stored record names
    host = next((r.host for r in recs if r.host), None) or {}
    who = {"cpu_model": (host.get("cpu") or {}).get("model") or "unknown"}
    try:
        fit = profile_from_probes(pairs, profile_of, base="offline-grid", async_pairs=asy)
        fit["profile"].update(who)
        loco = {}
        for held in sorted({_stem(p.suf) for p in pairs}):
            train = [p for p in pairs if _stem(p.suf) != held]
            f = profile_from_probes(train, profile_of, base="offline-grid",
                                    async_pairs=[a for a in asy if _stem(a[0]) != held])  # fmt: skip
            prof = hp.HostProfile(**{**f["profile"], **who, "id": f"serving-real-without-{held}", "role": "exact"})
            hp.register(prof)
            loco[held] = {"profile": prof.model_dump(), "held_out": _check([p for p in pairs if _stem(p.suf) == held], profile_of, prof.id)}
        dummy = [r for f in SERVING_DUMMY_WARM if (root / f / "records.jsonl").is_file() for r in read(root / f)]
        transfer = None
        if dummy:
            dp = [p for ps in probe_pairs(dummy).values() for p in ps]
            d = profile_from_probes(dp, profile_of, base="offline-grid")
            fp = fit["profile"]
            prof = hp.HostProfile(**{**d["profile"], "id": "serving-dummy-warm", "role": "reference",
                                     "plain_floor_step_s": fp["plain_floor_step_s"],
                                     "plain_floor_per_seq_s": fp["plain_floor_per_seq_s"]})  # fmt: skip
            hp.register(prof)
            transfer = {"fitted_on": [f"{SERVING_CAMPAIGN}/{f}" for f in SERVING_DUMMY_WARM], "profile": prof.model_dump(),
                        "dummy_pairs": d["pairs"], "on_real_pairs": _check(pairs, profile_of, prof.id)}  # fmt: skip
    except AdvisorError as exc:
        return {"available": False, "reason": str(exc)}
    return {"available": True, "fitted_on": [f"{SERVING_CAMPAIGN}/{f}" for f in folders], "fit": fit,
            "leave_one_corpus_out": loco, "dummy_transfer": transfer}
