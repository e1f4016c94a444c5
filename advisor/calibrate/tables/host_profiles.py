"""calibration/host_profiles.csv: each shipped host profile's numbers recomputed from the fit that produced them,
its words from a reviewed spec, written by the runtime's own writer (advisor.predict.host_profile.render_rows).

Descriptive fields (id, aliases, gpu, cpu_model, vllm_version, role, provenance, source) come from
``calibration/host_profiles_rows.yaml``, one entry per row in the table's order, reviewed by hand. They are kept
there, not read back from host_profiles.csv, so the rebuild is a function of its inputs and not of its own output:
an edit of the CSV's text (or a row added by hand) shows up as a difference instead of being copied into the rebuild.

Numeric fields, per row (REBUILT: the fit's value; RULE: a stated rule in code, quoting the row's provenance;
CARRIED: a number no fit produces, read from the spec's ``carried:`` and listed here; every other field is 0, the
schema's "not measured here"):

- ``seed-b200``: suffix_step_s, suffix_per_seq_s REBUILT (advisor.calibrate.host_infer.infer on the seed rows with
  replicates, its ``best``); ngram_step_s RULE (suffix's per-step); ngram_per_seq_s CARRIED (ASSUMED, 10 us).
- ``h200-vllm0.26.0``: suffix_step_s, suffix_per_seq_s REBUILT (gpu_steps.fit_spec_constants on the grid the row
  names as its source); ngram_per_seq_s REBUILT (campaign 11's n-gram fit, gpu_steps.evaluate()["ngram"]["fit"]);
  ngram_step_s RULE (suffix's per-step).
- ``h100-vllm0.26.0``: suffix_* and ngram_* REBUILT (campaign 12's fits, gpu_steps.evaluate()["other_gpu"]).
- ``h200-vllm0.26.0-serving``: suffix_*, ngram_*, async_off_*, plain_floor_*, suffix_run_sigma, ngram_run_sigma
  REBUILT (host_infer.serving_real_fit); mtp_eager_*, mtp_compiled_* REBUILT (mtp_cost.fit of each drafter class's
  committed runs, mtp_cost.FIT_FOLDERS).
- ``h200-vllm0.26.0-serving-dummy``: suffix_*, ngram_*, async_off_*, plain_floor_* and the run sigmas REBUILT
  (host_infer.serving_fit: its 8B dummy-weight runs are GPU-bound, so no plain floor, and no setting was probed in
  two boots, so no sigma: the fit's own zeros).

A fixed point, like the runtime: the lab's fits read the shipped profiles while fitting (gpu_steps.evaluate picks
the grid by ``offline-grid``'s source; host_infer's candidates are copies of a shipped base row with one cost
replaced), so the check is that the shipped table is what the fits make of the committed runs given itself.
"""

from __future__ import annotations

from pathlib import Path

OUTPUTS = ("host_profiles.csv",)
INPUTS = ("calibration/host_profiles_rows.yaml (each row's words and CARRIED numbers), calibration/sweep_b200.csv "
          "(seed-b200), calibration/gpu_steps/ (h200-vllm0.26.0, h100-vllm0.26.0), calibration/gpu_real/h200-vllm0.26.0/ "
          "(the serving rows and their MTP costs), calibration/manifests.yaml (which campaigns each fit reads)")  # fmt: skip
SPEC = "host_profiles_rows.yaml"
DESCRIPTIVE = ("id", "aliases", "gpu", "cpu_model", "vllm_version", "role", "provenance", "source")
CARRIED = {"seed-b200": ("ngram_per_seq_s",)}
"""The only numbers the spec may carry, per row (ASSUMED ones no fit produces)."""


def _numeric() -> tuple[str, ...]:
    from advisor.predict.host_profile import FIELDS

    return tuple(f for f in FIELDS if f not in DESCRIPTIVE)


def seed_b200(cal: Path, spec: dict) -> dict:
    from advisor.calibrate.host_infer import infer
    from advisor.predict.dataset import default_profile_of, seed_observations

    best = infer(seed_observations(replicates=True), default_profile_of())["best"]
    return {"suffix_step_s": best["suffix_step_s"], "suffix_per_seq_s": best["suffix_per_seq_s"],
            # provenance: "n-gram: per-step as suffix (same serialised spec-decode path), per-sequence ASSUMED"
            "ngram_step_s": best["suffix_step_s"],
            "ngram_per_seq_s": spec["carried"]["ngram_per_seq_s"]}  # fmt: skip


def _grids(cal: Path) -> dict:
    from advisor.calibrate import gpu_steps as g
    from advisor.model.load import load_profile

    return g.evaluate(cal, load_profile)


def h200_vllm0_26_0(cal: Path, spec: dict) -> dict:
    from advisor.calibrate import gpu_steps as g
    from advisor.model.load import load_profile

    points = [pt for folder in g.grid_dirs(cal) for pt in g.load_points(folder)]
    mine = [pt for pt in points if pt.source == spec["source"]]
    a, b = g.fit_spec_constants(mine, {m: load_profile(g.MODEL_IDS[m]) for m in {pt.model for pt in mine}})
    ngram = _grids(cal)["ngram"]["fit"]
    return {"suffix_step_s": a, "suffix_per_seq_s": b,
            # provenance: "n-gram: ... per-sequence: that fit; per-step: suffix's, because suffix on the same machine
            # fitted 4.25 ms + 110 us/seq while suffix's own per-step term moved 3.75 -> 4.25 ms between two machines"
            "ngram_step_s": a, "ngram_per_seq_s": ngram["per_seq_s"]}  # fmt: skip


def h100_vllm0_26_0(cal: Path, spec: dict) -> dict:
    h100 = _grids(cal)["other_gpu"]["by_gpu"][spec["gpu"]]
    suf, ng = h100["suffix"]["fit"], h100["ngram"]["fit"]
    return {"suffix_step_s": suf["step_s"], "suffix_per_seq_s": suf["per_seq_s"],
            "ngram_step_s": ng["step_s"], "ngram_per_seq_s": ng["per_seq_s"]}  # fmt: skip


_PROBE_FIELDS = ("suffix_step_s", "suffix_per_seq_s", "ngram_step_s", "ngram_per_seq_s", "async_off_step_s",
                 "async_off_per_seq_s", "plain_floor_step_s", "plain_floor_per_seq_s", "suffix_run_sigma",
                 "ngram_run_sigma")  # fmt: skip
"""The numbers host_infer.profile_from_probes fits (the probe path, what ``advisor calibrate`` runs)."""


def _available(res: dict, what: str) -> dict:
    from advisor.errors import DataError

    if not res.get("available"):
        raise DataError(f"host_profiles: {what} cannot be refitted: {res.get('reason')}")
    return res


def h200_vllm0_26_0_serving(cal: Path, spec: dict) -> dict:
    from advisor.calibrate import host_infer, mtp_cost
    from advisor.calibrate.records import calibration_records, read_jsonl_records, reader_with_hosts
    from advisor.predict.dataset import default_profile_of

    res = _available(host_infer.serving_real_fit(cal, default_profile_of(), reader_with_hosts(calibration_records(cal))),
                     "serving_real_fit")  # fmt: skip
    out = {f: res["fit"]["profile"][f] for f in _PROBE_FIELDS}
    folder = cal / host_infer.SERVING_CAMPAIGN
    for drafter, names in mtp_cost.FIT_FOLDERS.items():
        records = [r for name in names if (folder / name).is_dir() for r in read_jsonl_records(folder / name)]
        fit = _available(mtp_cost.fit(mtp_cost.points(records), drafter), f"mtp_cost.fit ({drafter})")
        out.update({k: fit[k] for k in (f"mtp_{drafter}_step_s", f"mtp_{drafter}_per_draft_s")})
    return out


def h200_vllm0_26_0_serving_dummy(cal: Path, spec: dict) -> dict:
    from advisor.calibrate import host_infer
    from advisor.calibrate.records import read_jsonl_records
    from advisor.predict.dataset import default_profile_of

    res = _available(host_infer.serving_fit(cal, default_profile_of(), read_jsonl_records), "serving_fit")
    return {f: res["fit"]["profile"][f] for f in _PROBE_FIELDS}


ROWS = {"seed-b200": seed_b200, "h200-vllm0.26.0": h200_vllm0_26_0, "h100-vllm0.26.0": h100_vllm0_26_0,
        "h200-vllm0.26.0-serving": h200_vllm0_26_0_serving,
        "h200-vllm0.26.0-serving-dummy": h200_vllm0_26_0_serving_dummy}  # fmt: skip
"""Row id -> the function that refits its numbers."""


def spec_rows(cal: Path) -> list[dict]:
    """The reviewed descriptive rows (calibration/host_profiles_rows.yaml), checked against ROWS and CARRIED."""
    from advisor.errors import DataError
    from advisor.yamlfast import safe_load

    path = Path(cal) / SPEC
    rows = (safe_load(path.read_text(encoding="utf-8")) or {}).get("rows")
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise DataError(f"{path}: expected 'rows:', a list of mappings")
    if [r.get("id") for r in rows] != list(ROWS):
        raise DataError(f"{path}: rows {[r.get('id') for r in rows]} are not the rows rebuilt here {list(ROWS)}")
    for r in rows:
        extra = set(r) - set(DESCRIPTIVE) - {"carried"}
        carried = tuple(sorted(r.get("carried") or {}))
        if extra or set(DESCRIPTIVE) - set(r) or carried != tuple(sorted(CARRIED.get(r["id"], ()))):
            raise DataError(f"{path}: row {r['id']}: fields {sorted(r)} (carried {list(carried)}): expected "
                            f"{list(DESCRIPTIVE)} and carried {list(CARRIED.get(r['id'], ()))}")  # fmt: skip
    return rows


def build(cal: Path) -> dict[str, str]:
    """{file name: text} of the table advisor.predict.host_profile reads."""
    from advisor.predict.host_profile import HostProfile, render_rows

    out = []
    for spec in spec_rows(cal):
        numbers = dict.fromkeys(_numeric(), 0.0)  # 0: not measured on this row (the schema's meaning of 0)
        made = ROWS[spec["id"]](Path(cal), spec)
        assert set(made) <= set(numbers), (spec["id"], sorted(set(made) - set(numbers)))
        numbers.update(made)
        out.append(HostProfile(**{k: str(spec[k]) for k in DESCRIPTIVE}, **numbers))
    return {OUTPUTS[0]: render_rows(out)}
