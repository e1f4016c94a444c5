"""``advisor calibrate``'s two jobs over the lab's parts: ``evaluate_all`` (every evaluation, one dict; the CLI
prints it) and ``store_host_profiles`` (a host cost profile per probed GPU host, written to the user's data dir)."""

from __future__ import annotations

from advisor.calibrate import records as rec


def evaluate_all(profile_of, rules_dirs) -> dict:
    """Every evaluation ``advisor calibrate --evaluate`` reports: leave-one-model-out on the seed sweep (the
    predictor, the product's decision, baselines), the GPU step grid, the memory plan against vLLM's logs, the
    published results, the real-weight probes, the host profiles and the MTP drafter costs."""
    from advisor.calibrate import host_infer, published, real_probes
    from advisor.calibrate.evaluate import evaluate as run_eval
    from advisor.calibrate.evaluate import lomo_fits
    from advisor.calibrate.evaluate_product import evaluate_product
    from advisor.paths import data_path
    from advisor.plan.recommend import fact_names
    from advisor.predict.dataset import seed_observations
    from advisor.rules.loader import load_rules

    obs = seed_observations(replicates=True)
    fits = lomo_fits(profile_of, obs)
    res = run_eval(profile_of, observations=obs, fits=fits)
    rules = load_rules(rules_dirs, facts=fact_names())
    res["lomo"]["product"] = evaluate_product(profile_of, observations=obs, fits=fits, rules=rules)
    res["lomo"]["product_own_build"] = evaluate_product(profile_of, observations=obs, fits=fits, rules=rules, own_build=True)
    res["gpu_steps"] = gpu_steps_section(profile_of, run_eval)
    res["gpu_memory"] = gpu_memory_section(profile_of)
    calibration = data_path("calibration")
    res["published"] = published.evaluate(calibration, profile_of)
    committed = rec.calibration_records(calibration)
    real = host_infer.serving_real_fit(calibration, profile_of, rec.reader_with_hosts(committed))
    held_out = {c: v["profile"]["id"] for c, v in real.get("leave_one_corpus_out", {}).items()}
    res["real_probes"] = real_probes.evaluate(committed, calibration, profile_of,
                                              own_kbar=rec.own_output_replays(calibration),
                                              held_out_hosts=held_out)  # fmt: skip
    res["host_profiles"] = {"seed_inferred": host_infer.infer(obs, profile_of)["best"],
                            "profiles": [p.model_dump() for p in host_infer.hp.listed()],
                            "probe_check": probe_check(profile_of),
                            "serving_real_fit": real,
                            "serving_fit": host_infer.serving_fit(calibration, profile_of, rec.read_jsonl_records)}
    res["mtp"] = mtp_check(calibration, profile_of)
    from advisor.calibrate import step_corrections

    res["verify"] = step_corrections.evaluate(calibration)
    return res


def gpu_steps_section(profile_of, run_eval) -> dict:
    """The GPU-step section: real-vLLM step times against the step-cost model, and what the measured
    suffix-step costs would do to the seed's leave-one-model-out if that build had had them."""
    from advisor.paths import data_path
    from advisor.calibrate import gpu_steps
    from advisor.predict.dataset import seed_observations

    section = gpu_steps.evaluate(data_path("calibration"), profile_of)
    moved = [o.model_copy(update={"build": "offline-grid"}) for o in seed_observations(replicates=True)]
    section["release_physics_on_seed"] = {
        "lomo": run_eval(profile_of, observations=moved)["lomo"],
        "note": "the seed rows scored with the suffix-step costs measured on vLLM 0.26.0 (H200) instead of "
                "the seed build's assumed ones; the shipped evaluation above keeps each row's own build",
    }
    return section


def gpu_memory_section(profile_of) -> dict:
    from advisor.paths import data_path
    from advisor.calibrate.memory_measured import evaluate

    return evaluate(data_path("calibration"), profile_of)


def probe_check(profile_of) -> list[dict]:
    """The shipped GPU probe campaigns (calibration/gpu_probes/*/probes.sqlite): the R each measured
    through `vllm serve` against the R the profile its GPU matches predicts, and the profile that
    campaign alone would fit (out-of-sample evidence for the shipped profiles)."""
    from advisor.paths import data_path
    from advisor.calibrate import host_infer
    from advisor.probe.store import ProbeStore

    out = []
    for path in sorted((data_path("calibration") / "gpu_probes").glob("*/probes.sqlite")):
        with ProbeStore(path, busy_timeout_s=2.0, read_only=True) as store:  # committed: read, never switched to WAL
            records = store.list_records()
        for pairs in host_infer.probe_pairs(records).values():
            build = host_infer.hp.match(pairs[0].suf.gpu, None, pairs[0].suf.vllm_version).profiles[0]
            fit = host_infer.profile_from_probes(pairs, profile_of)
            out.append({"store": str(path.relative_to(data_path("calibration").parent)),
                        "against_shipped": host_infer.probe_check(pairs, profile_of, build),
                        "fitted_alone": {k: fit["profile"][k] for k in ("suffix_step_s", "suffix_per_seq_s")},
                        "fitted_at_grid_edge": fit["at_grid_edge"]})  # fmt: skip
    return out


def store_host_profiles(records, profile_of, path) -> dict:
    """Fit a host cost profile for every probed GPU host (vanilla + suffix:K pairs, dummy weights
    welcome) and write them to the data dir's host_profiles.csv, which predictions then use."""
    from advisor.atomic import write_one
    from advisor.calibrate import host_infer
    from advisor.predict import host_profile

    from pydantic import ValidationError

    from advisor.errors import AdvisorError
    from advisor.paths import data_path

    profile_of = host_infer.probed_profile_of(data_path("calibration"), profile_of)  # probed dirs known by name too
    fitted, skipped = [], []
    records, unresolved = _resolvable(records or [], profile_of)
    skipped += unresolved
    asyncs = host_infer.async_off_pairs(records or [])
    paired = host_infer.probe_pairs(records or [])
    mtp_paired = host_infer.probe_pairs(records or [], methods=("mtp",))
    for fp, pairs in paired.items():
        try:
            fit = host_infer.profile_from_probes(pairs, profile_of, async_pairs=asyncs.get(fp))
        except AdvisorError as exc:  # a probed model the catalog cannot resolve: say so, fit the others
            skipped.append(f"host {fp[:12]}: {exc}")
            continue
        except ValidationError as exc:  # costs no host has (HostProfile's bounds): the records say something absurd
            first = exc.errors()[0]
            skipped.append(f"host {fp[:12]}: the fitted profile is out of bounds ({'.'.join(map(str, first['loc']))}: "
                           f"{first['msg']}); check this host's probe records")  # fmt: skip
            continue
        for drafter in ("eager", "compiled"):
            mtp = _mtp_fit(mtp_paired.get(fp, []), profile_of, drafter)
            if mtp.get("available"):
                keys = (f"mtp_{drafter}_step_s", f"mtp_{drafter}_per_draft_s")
                fit["profile"].update({k: mtp[k] for k in keys})
                fit["profile"]["provenance"] += (f"; MTP ({drafter} drafter): MEASURED by advisor probe ({mtp['points']} "
                                                 "vanilla/mtp:K run(s), advisor.calibrate.mtp_cost.fit)")  # fmt: skip
        fitted.append(fit)
    for fp in sorted(set(mtp_paired) - set(paired)):
        skipped.append(f"host {fp[:12]}: its mtp:K runs alone make no host profile; add suffix or ngram runs to the "
                       "campaign (the profile is fitted on their pairs with vanilla), and rerun advisor calibrate")  # fmt: skip
    if fitted:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_one(path, host_profile.render_rows([host_profile.HostProfile(**f["profile"]) for f in fitted]))
    return {"file": str(path), "profiles": fitted, "skipped": skipped}


def _resolvable(records: list, profile_of) -> tuple[list, list[str]]:
    """(records whose model resolves, one line per model that does not): a probed directory since removed, or a path
    that is a device or FIFO, leaves its own rows out of the host profile, not the host's other campaigns."""
    from advisor.errors import AdvisorError
    from advisor.calibrate import host_infer

    bad: dict[str, str] = {}
    for model in {r.model for r in records}:
        try:
            host_infer.profile_for_record(model, profile_of)
        except AdvisorError as exc:
            bad[model] = str(exc)
    lines = [f"{sum(r.model == m for r in records)} record(s) of model {m[:200]!r} left out: {why}" for m, why in sorted(bad.items())]
    return [r for r in records if r.model not in bad], lines


def _mtp_fit(pairs, profile_of, drafter: str) -> dict:
    """advisor.calibrate.mtp_cost.fit on one host's vanilla / mtp:K pairs (host_infer.probe_pairs) of the models whose
    MTP drafter the probed vLLM runs eagerly (VllmFacts.mtp_eager_drafters; ``drafter`` "eager") or compiles
    ("compiled"): each class has its own cost in the profile."""
    from advisor.errors import AdvisorError
    from advisor.calibrate import mtp_cost
    from advisor.vllm_facts import DEFAULT_VERSION, facts, is_supported

    def of_class(r) -> bool:
        try:
            model_type = profile_of(r.model).model_type
        except AdvisorError:
            return False
        version = r.vllm_version if r.vllm_version and is_supported(r.vllm_version) else DEFAULT_VERSION
        return (model_type in facts(version).mtp_eager_drafters) == (drafter == "eager")

    kept = [r for p in pairs if of_class(p.suf) for r in (p.van, p.suf)]
    return mtp_cost.fit(mtp_cost.points(kept), drafter) if kept else {"available": False}


MTP_CONTEXT = 512
"""Tokens of context the MTP check prices its steps at (ASSUMED: the ShareGPT prompts of campaign 9, ~300 tokens in
SmolLM2's tokenizer, plus half of 256 output tokens)."""


def mtp_check(calibration_dir, profile_of) -> dict:
    """advisor.calibrate.mtp_cost.evaluate per drafter class on the committed runs (campaign 9: eager, campaign 10:
    compiled; read here, at the edge) and the shipped serving row."""
    from advisor.calibrate import host_infer, mtp_cost
    from advisor.predict import host_profile as hp

    folder = calibration_dir / host_infer.SERVING_CAMPAIGN
    row = hp.get("h200-vllm0.26.0-serving")
    out = {}
    for drafter, names in mtp_cost.FIT_FOLDERS.items():
        records = [r for name in names if (folder / name).is_dir() for r in rec.read_jsonl_records(folder / name)]
        out[drafter] = mtp_cost.evaluate(records, host_infer.probed_profile_of(calibration_dir, profile_of), row.id,
                                         MTP_CONTEXT, row.mtp_costs(drafter == "eager"), drafter)  # fmt: skip
    return out
