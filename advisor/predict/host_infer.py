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

from advisor.hardware.gpus import get_gpu
from advisor.predict import host_profile as hp
from advisor.predict import kbar_prior as kp
from advisor.predict.dataset import Observation, ProfileFn
from advisor.predict.stepcost import r_ratio

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
ASSUMED_NGRAM_PER_SEQ_S = 10e-6
"""n-gram's per-sequence cost where no n-gram probe measured it (NgramProposer's numba loop; ASSUMED)."""


class _Pair:
    """One campaign's vanilla + suffix:K runs on a GPU host, with the R they imply."""

    def __init__(self, van, suf) -> None:
        self.van, self.suf = van, suf
        self.k = int(suf.config.split(":", 1)[1].split("@", 1)[0] or 32)
        self.kbar = suf.tokens_per_step or suf.mean_acceptance_length or 1.0
        self.r_meas = self.kbar * van.throughput_tok_s / suf.throughput_tok_s
        acc = (suf.mean_acceptance_length - 1) * suf.spec_drafts / suf.spec_draft_tokens \
            if suf.spec_drafts and suf.spec_draft_tokens and suf.mean_acceptance_length else None  # fmt: skip
        self.draft = min(self.k, kp.max_draft(self.k), (self.kbar - 1) / acc) if acc else kp.draft_tokens(self.kbar, self.k)
        self.share = 1.0 if getattr(suf, "weights", "real") == "dummy" else 0.6


def probe_pairs(records) -> dict[str, list[_Pair]]:
    """{host fingerprint: pairs}: ok vanilla + suffix:K runs of one campaign on a GPU (dummy weights
    welcome: only the step cost is read from them, through R = tokens per step / gain)."""
    by: dict[str, list] = {}
    for r in records:
        if r.outcome == "ok" and r.throughput_tok_s and r.gpu and r.host_fingerprint:
            by.setdefault(r.campaign_id, []).append(r)
    out: dict[str, list[_Pair]] = {}
    for recs in by.values():
        vans = [r for r in recs if r.config == "vanilla"]
        for suf in (r for r in recs if r.config.startswith("suffix:") and "@" not in r.config and r.tokens_per_step):
            if vans:
                out.setdefault(suf.host_fingerprint, []).append(_Pair(max(vans, key=lambda v: v.started_at), suf))
    return out


def profile_for_record(model: str, profile_of: ProfileFn):
    """The profile of a probed model: its id, or (for a directory on the GPU machine, e.g.
    ``/root/probe-models/Llama-3.1-8B-Instruct``) the catalog id its folder name is known by."""
    from advisor.errors import AdvisorError
    from advisor.predict.gpu_steps import MODEL_IDS

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
    return r_ratio(profile, get_gpu(pair.suf.gpu), pair.suf.tensor_parallel_size, concurrency=pair.suf.concurrency,
                   draft_tokens=pair.draft, context=ctx, draft_share=pair.share, k=pair.k, build=name).r  # fmt: skip


def profile_from_probes(pairs: list[_Pair], profile_of: ProfileFn, base: str = "release") -> dict:
    """The (per-step, per-sequence) suffix cost that reproduces the R these probes measured (least
    summed |ln R_pred / R_meas| on FIT_STEP_S x FIT_PER_SEQ_S; ties: the smaller per-sequence share),
    as a host profile row with its evidence. Probes at one concurrency only identify
    per-step + concurrency x per-sequence: the per-sequence share is then held at ``base``'s."""
    concs = sorted({p.suf.concurrency for p in pairs})
    per_seq = FIT_PER_SEQ_S if len(concs) > 1 else (hp.get(base).suffix_per_seq_s,)
    best = (math.inf, 0.0, 0.0)
    for a in FIT_STEP_S:
        for b in per_seq:
            name = _candidate(base, a, b)
            err = sum(abs(math.log(_r_pred(p, profile_for_record(p.suf.model, profile_of), name) / p.r_meas)) for p in pairs)
            if err < best[0] - 1e-12:
                best = (err, a, b)
    _, a, b = best
    s = pairs[0].suf
    host = s.host or {}
    fit_name = _candidate(base, a, b)
    prof = hp.HostProfile(
        id=f"probe-{s.host_fingerprint[:12]}", gpu=s.gpu, cpu_model=((host.get("cpu") or {}).get("model") or "unknown"),
        vllm_version=s.vllm_version or "unknown", suffix_step_s=round(a, 6), suffix_per_seq_s=round(b, 6),
        ngram_step_s=round(a, 6), ngram_per_seq_s=ASSUMED_NGRAM_PER_SEQ_S,
        provenance=(f"suffix: MEASURED by advisor probe ({len(pairs)} vanilla/suffix pair(s) at concurrency "
                    f"{', '.join(map(str, concs))}; R = tokens per step / gain, fitted by host_infer.profile_from_probes"
                    + (f"; one concurrency: per-sequence held at {base}'s" if len(concs) == 1 else "")
                    + "); n-gram: per-step as suffix, per-sequence ASSUMED"),
        source="probe store: campaigns " + ", ".join(sorted({p.suf.campaign_id for p in pairs})),
    )  # fmt: skip
    table = [{"campaign": p.suf.campaign_id, "model": p.suf.model, "concurrency": p.suf.concurrency, "k_bar": round(p.kbar, 3),
              "gain": round(p.suf.throughput_tok_s / p.van.throughput_tok_s, 4), "r_measured": round(p.r_meas, 4),
              "r_fitted": round(_r_pred(p, profile_for_record(p.suf.model, profile_of), fit_name), 4)} for p in pairs]  # fmt: skip
    edge = a == FIT_STEP_S[-1] or (len(per_seq) > 1 and b == per_seq[-1])
    return {"profile": prof.model_dump(), "pairs": table, "at_grid_edge": edge}


def probe_check(pairs: list[_Pair], profile_of: ProfileFn, build: str) -> list[dict]:
    """R the ``build`` profile predicts for each probe pair against the R it measured."""
    out = []
    for p in pairs:
        pred = _r_pred(p, profile_for_record(p.suf.model, profile_of), build)
        out.append({"campaign": p.suf.campaign_id, "gpu": p.suf.gpu, "vllm": p.suf.vllm_version,
                    "concurrency": p.suf.concurrency, "r_measured": round(p.r_meas, 4), "r_predicted": round(pred, 4),
                    "ln_pred_over_meas": round(math.log(pred / p.r_meas), 4), "profile": hp.get(build).id})  # fmt: skip
    return out
