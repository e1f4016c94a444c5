"""``advisor calibrate``: refit the predictor with this host's probes, or evaluate it (leave-one-model-out)."""

from __future__ import annotations

import sys

import typer

from advisor.cli.app import app
from advisor.cli.common import JsonOpt, emit_json, settings


def _store_records() -> tuple[list, str]:
    """Probe records of the store, or ([], why) when there is no store module or file."""
    import importlib.util

    if importlib.util.find_spec("advisor.store") is None:
        return [], "no probe store in this build"
    from advisor.store import open_store, store_path

    s = settings()
    if not store_path(s).exists():
        return [], f"no probe store at {store_path(s)} yet (run `advisor probe`)"
    with open_store(s, busy_timeout_s=2.0) as store:
        records = store.list_records()
        for line in store.skipped:
            print(f"warning: {line}", file=sys.stderr)
        return records, str(store_path(s))


def _print_evaluation(res: dict) -> None:
    lines = ["leave-one-model-out over the seed sweep (fit on 9 models, predict the 10th)",
             "  recommend = the decision `advisor recommend` makes (rules, probe band, memory planner);",
             "  predictor = P(win) > 0.5 alone; writeup_tree = the seed's table, written in hindsight", ""]
    head = f"  {'policy':<16} {'OFF geo':>8} {'OFF min':>8} {'OFF acc':>8}   {'ON geo':>7} {'ON min':>7} {'ON acc':>7}"
    lines.append(head)
    policies = [("recommend", res["lomo"]["product"]), ("predictor", res["lomo"])]
    policies += [(k, v) for k, v in res["baselines"].items()]
    for name, sc in policies:
        o, n = sc["OFF"], sc["ON"]
        lines.append(f"  {name:<16} {o['geo_frac']:>8.4f} {o['min_frac']:>8.3f} {o['accuracy']:>8.3f}   "
                     f"{n['geo_frac']:>7.4f} {n['min_frac']:>7.3f} {n['accuracy']:>7.3f}")  # fmt: skip
    ceil = res.get("ceilings") or {}
    if ceil:
        lines += ["", "  ceilings, fitted in hindsight on the scored rows (bounds, not policies):"]
        for name in ("per_model_constant", "additive_in_sample"):
            o, n = ceil[name]["OFF"], ceil[name]["ON"]
            lines.append(f"  {name:<18} {o['geo_frac']:>6.4f} {o['min_frac']:>8.3f} {o['accuracy']:>8.3f}   "
                         f"{n['geo_frac']:>7.4f} {n['min_frac']:>7.3f} {n['accuracy']:>7.3f}")  # fmt: skip
        for f in ceil.get("state_flips", []):
            why = "against the host term" if f["against_host_term"] else "host term can explain"
            lines.append(f"  winner flips with host state: {f['model']} {f['corpus']} "
                         f"OFF {f['gain_OFF']:.2f}x / ON {f['gain_ON']:.2f}x ({why})")  # fmt: skip
    lines += ["", "  per held-out model (geo fraction OFF / ON):"]
    for label, entry in res["per_model"].items():
        off = entry.get("OFF", {}).get("geo_frac")
        on = entry.get("ON", {}).get("geo_frac")
        fmt = lambda v: f"{v:.4f}" if v is not None else "  -   "  # noqa: E731
        lines.append(f"    {label:<26} {fmt(off)} / {fmt(on)}")
    prod = res["lomo"]["product"]
    lines += ["", f"  recommend rows in the 0.30-0.70 probe band (scored as launched without --probe): "
              f"OFF {prod['OFF']['unsure_rows']}, ON {prod['ON']['unsure_rows']}"]
    lines += ["", "  frac = throughput of the chosen option / better of suffix and vanilla, same host state"]
    print("\n".join(lines))


@app.command("calibrate")
def calibrate_cmd(
    evaluate: bool = typer.Option(False, "--evaluate", help="Leave-one-model-out evaluation on the seed sweep, with baselines."),
    json_out: bool = JsonOpt,
) -> None:
    """Refit the K > R predictor with the probe store's records on top of the seed sweep and show how
    its predictions for the probed configurations moved; or, with --evaluate, score it leave-one-model-out."""
    from advisor.predict.dataset import default_profile_of

    profile_of = default_profile_of(settings())
    if evaluate:
        from advisor.plan.evaluate_product import evaluate_product
        from advisor.plan.recommend import fact_names
        from advisor.predict.dataset import seed_observations
        from advisor.predict.evaluate import evaluate as run_eval
        from advisor.predict.evaluate import lomo_fits
        from advisor.rules.loader import load_rules

        obs = seed_observations(replicates=True)
        fits = lomo_fits(profile_of, obs)
        res = run_eval(profile_of, observations=obs, fits=fits)
        res["lomo"]["product"] = evaluate_product(profile_of, observations=obs, fits=fits, rules=load_rules(settings().rules_dirs, facts=fact_names()))
        if json_out:
            emit_json(res)
        else:
            _print_evaluation(res)
        return
    from advisor.predict.refit import refit_report

    records, where = _store_records()
    report = refit_report(records, profile_of, store=where)
    if json_out:
        emit_json(report)
        return
    print(f"calibration: {report['seed_rows']} seed rows + {report['probe_rows']} probe rows ({where})")
    if not report["rows"]:
        print("  no paired suffix/vanilla probe campaigns to refit on; the shipped seed calibration stays in use")
        return
    print(f"  {'model':<34} {'corpus':<12} {'host':<4} {'measured':>8} {'before':>8} {'after':>8}")
    for r in report["rows"]:
        print(f"  {r['model'][:34]:<34} {str(r['corpus'])[:12]:<12} {r['host_state']:<4} {r['measured_gain']:>8.3f} "
              f"{r['gain_before']:>8.3f} {r['gain_after']:>8.3f}")  # fmt: skip
