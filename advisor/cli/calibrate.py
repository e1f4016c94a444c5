"""``advisor calibrate``: refit the predictor with this host's probes, or evaluate it (leave-one-model-out)."""

from __future__ import annotations

import math
import sys

import typer

from advisor.cli._app import app
from advisor.cli.common import JsonOpt, emit_json, settings


def _store_records() -> tuple[list, str]:
    """Probe records of the store, or ([], why) when there is no store module or file."""
    import importlib.util

    if importlib.util.find_spec("advisor.probe.store") is None:
        return [], "no probe store in this build"
    from advisor.probe.store import open_store, store_path

    s = settings()
    if not store_path(s).exists():
        return [], f"no probe store at {store_path(s)} yet (run `advisor probe`)"
    with open_store(s, busy_timeout_s=2.0) as store:
        records = store.list_records()
        for line in store.skipped:
            print(f"warning: {line}", file=sys.stderr)
        return records, str(store_path(s))


def _store_verify_records() -> tuple[list, str]:
    """The verify runs of the user's probe store (advisor verify), or ([], why) without a store."""
    from advisor.probe.store import open_store, store_path

    s = settings()
    if not store_path(s).exists():
        return [], f"no probe store at {store_path(s)} yet"
    with open_store(s, busy_timeout_s=2.0) as store:
        runs = store.list_verify()
        for line in store.skipped:
            print(f"warning: {line}", file=sys.stderr)
    return [r for _, r in runs], str(store_path(s))


def _ln_pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def _print_verify(v: dict) -> None:
    """calibrate --evaluate's verify section: first pass by class, the measured step corrections, leave one model out."""
    if not v.get("available"):
        print("\nverify records: none committed")
        return
    lines = ["", f"verify records ({', '.join(v['sources'])}): {v['records']} run(s), {v['step_points']} with a decode step on a "
             "known host profile", "  first pass (as the answers predicted; ln(measured / predicted): median, median |ln|, runs):"]
    for cls, e in v["first_pass"].items():
        figs = "; ".join(f"{fig.replace(' ms', '')} {f['median_log']:+.3f} / {f['median_abs_log']:.3f} ({f['runs']})"
                         for fig, f in e["figures"].items())
        lines.append(f"    {cls} [{', '.join(e['models'])}]: {figs}")
    lines.append("  step corrections (median ITL / predicted decode step; shipped table "
                 f"{'matches the fit' if v['shipped_matches_fit'] else 'DIFFERS from the fit'}):")
    lo = v["leave_one_model_out"]
    for g in lo["groups"]:
        state = "applied" if g["applied"] else f"NOT applied ({g['why_not']})"
        lomo = g["lomo_empty"] or f"leave-one-model-out median |ln| {_ln_pct(g['lomo_median_abs_log'])}"
        fac = f"x{g['factor_in_sample']:.3f}" if g["factor_in_sample"] else "none"
        lines.append(f"    {g['arch_class']} {g['dtype']} on {g['host_profile']} TP {g['tp']}: {fac} in sample over {g['runs']} run(s), "
                     f"{state}; baseline (no correction) median |ln| {_ln_pct(g['baseline_median_abs_log'])}; {lomo}")  # fmt: skip
    p = lo["pooled"]
    lines.append(f"  leave one model out, pooled over groups with a held-out factor: {p['runs']} run(s)"
                 + (f", median |ln| {_ln_pct(p['lomo_median_abs_log'])} vs baseline {_ln_pct(p['baseline_median_abs_log'])}" if p["runs"]
                    else ": none (every group has one model only)"))  # fmt: skip
    for line in v["left_out"]:
        lines.append(f"  left out: {line}")
    u = v.get("user_store")
    if u:
        lines.append(f"  your store: {u['records']} run(s), {u['step_points']} with a decode step on a known host profile; "
                     f"{len(u['corrections'])} correction(s)")  # fmt: skip
        for g in u["leave_one_model_out"]["groups"]:
            lomo = g["lomo_empty"] or f"leave-one-model-out median |ln| {_ln_pct(g['lomo_median_abs_log'])}"
            lines.append(f"    {g['arch_class']} {g['dtype']} on {g['host_profile']} TP {g['tp']}: x{g['factor_in_sample'] or 0:.3f}; "
                         f"baseline median |ln| {_ln_pct(g['baseline_median_abs_log'])}; {lomo}")  # fmt: skip
        for line in u["left_out"]:
            lines.append(f"    left out: {line}")
    print("\n".join(lines))


def _print_evaluation(res: dict) -> None:
    lines = ["leave-one-model-out over the seed sweep (fit on 9 models, predict the 10th)",
             "  recommend = the decision `advisor recommend` makes (rules, probe band, memory planner), as shipped",
             "  (suffix-step costs averaged over the release and seed builds); recommend@build = the same with",
             "  the costs of the build each row was measured on;",
             "  predictor = P(win) > 0.5 alone; writeup_tree = the seed's table, written in hindsight", ""]
    head = f"  {'policy':<16} {'OFF geo':>8} {'OFF min':>8} {'OFF acc':>8}   {'ON geo':>7} {'ON min':>7} {'ON acc':>7}"
    lines.append(head)
    policies = [("recommend", res["lomo"]["product"]), ("recommend@build", res["lomo"]["product_own_build"]),
                ("predictor", res["lomo"])]
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
    lines += [f"  recommend's decision equals the hindsight writeup_tree's on OFF {prod['OFF']['agrees_with_writeup_tree']} of "
              f"{prod['OFF']['rows']} rows, ON {prod['ON']['agrees_with_writeup_tree']} of {prod['ON']['rows']} (the rest: "
              f"--json lomo.product.*.differs_from_writeup_tree)"]
    lines += ["", "  frac = throughput of the chosen option / better of suffix and vanilla, same host state"]
    print("\n".join(lines))


def _print_gpu_steps(g: dict) -> None:
    if not g.get("available"):
        print(f"\nGPU steps: none ({g.get('reason')})")
        return
    goal = g["goal"]
    bias = ", ".join(f"{c} {b:+.0%}" for c, b in g["r_bias_leave_one_model_out_by_class"].items())
    lomo_by = ", ".join(f"{m} {v:.3f}" for m, v in g["r_median_abs_log_leave_one_model_out_by_model"].items() if v is not None)
    lines = ["", f"GPU steps: real vLLM {', '.join(g['vllm_versions'])}, {len(g['models'])} models "
             f"({', '.join(f'{m} [{c}]' for m, c in g['classes'].items())})",
             f"  {g['points']} points ({g['single_rep_points']} of one repetition), {len(g['excluded'])} excluded "
             f"(repetitions disagree, or one is impossible); {', '.join(g['sources'])}",
             f"  constants MEASURED from this grid: SPEC_STEP_FIXED_S {g['constants']['SPEC_STEP_FIXED_S'] * 1e3:.2f} ms, "
             f"SPEC_STEP_PER_SEQ_S {g['constants']['SPEC_STEP_PER_SEQ_S'] * 1e6:.0f} us",
             f"  plain step: median |log(pred/meas)| {g['plain_median_abs_log_step']:.3f}",
             f"  R: median |log(R_pred/R_meas)| before the refit {g['r_median_abs_log_before_refit']:.3f}, "
             f"in sample {g['r_median_abs_log_in_sample']:.3f}, leave-one-concurrency-out "
             f"{g['r_median_abs_log_leave_one_concurrency_out']:.3f}",
             f"  R leave-one-model-out {g['r_median_abs_log_leave_one_model_out'] or float('nan'):.3f} (goal <= "
             f"{goal['median_abs_log_r']}; baseline R = 1: {g['r_median_abs_log_baseline_r_equals_1']:.3f}; per model: {lomo_by})",
             f"  R bias by class, leave-one-model-out: {bias} (goal |bias| <= {goal['class_bias']:.0%}): "
             f"goal {'met' if g['meets_goal'] else 'NOT met'}"
             + (f", biased: {', '.join(g['classes_biased_beyond_goal'])}" if g["classes_biased_beyond_goal"] else "")]
    if g.get("leave_one_model_out_note"):
        lines.append(f"  leave-one-model-out: not available ({g['leave_one_model_out_note']})")
    lines.append(f"  {'model':<22} {'K':>2} {'conc':>4} {'drafts':>6} {'tok/seq':>7} {'meas ms':>8} {'pred ms':>8} "
                 f"{'R meas':>7} {'R pred':>7}  graph")
    for r in g["table"]:
        rm = f"{r['r_meas']:.2f}" if r["r_meas"] else "-"
        rp = f"{r['r_pred']:.2f}" if r["r_pred"] else "-"
        lines.append(f"  {r['model'][:22]:<22} {r['k']:>2} {r['concurrency']:>4} {r['draft_cap']:>6} {r['tokens_per_seq']:>7.2f} "
                     f"{r['step_ms_meas']:>8.2f} {r['step_ms_pred']:>8.2f} {rm:>7} {rp:>7}  {r['graph_mode']}")
    rep = g.get("suffix_other_machines") or {}
    if rep.get("available"):
        lines.append(f"  suffix on another machine of the class ({', '.join(rep['sources'])}): {rep['points']} points, "
                     f"R median |log| {rep['r_median_abs_log']:.3f} with the constants above (out of sample)")
    ng = g.get("ngram") or {}
    if ng.get("available"):
        same = ng.get("suffix_same_machine") or {}
        lines.append(
            f"  n-gram: {ng['points']} points ({', '.join(ng['models'])}); fit {ng['fit']['step_s'] * 1e3:.2f} ms + "
            f"{ng['fit']['per_seq_s'] * 1e6:.0f} us/seq"
            + (f" (suffix on the same machine {same['step_s'] * 1e3:.2f} ms + {same['per_seq_s'] * 1e6:.0f} us/seq)" if same else "")
            + f"; offline-grid profile {ng['profile']['step_s'] * 1e3:.2f} ms + {ng['profile']['per_seq_s'] * 1e6:.0f} us/seq; "
            f"R median |log| profile {ng['r_median_abs_log_profile']:.3f}, with suffix's constants "
            f"{ng['r_median_abs_log_with_suffix_constants']:.3f}, leave-one-model-out "
            f"{ng['r_median_abs_log_leave_one_model_out'] or float('nan'):.3f}, leave-one-concurrency-out "
            f"{ng['r_median_abs_log_leave_one_concurrency_out']:.3f}")  # fmt: skip
    other = g.get("other_gpu") or {}
    for gpu, e in (other.get("by_gpu") or {}).items():
        lines.append(f"  {gpu} (out of sample: constants from the {other['fitted_gpu']}; {', '.join(e['sources'])}): plain step "
                     f"median |log| {e['plain_median_abs_log_step']:.3f} ({e['plain_points']} points, median log "
                     f"{e['plain_median_log_step']:+.3f})")  # fmt: skip
        for method in ("suffix", "ngram"):
            m = e.get(method)
            if m:
                lines.append(
                    f"    {method}: {m['points']} points; R with the {other['fitted_gpu']} profile median |log| "
                    f"{m['r_median_abs_log_shipped_profile']:.3f} (median log {m['r_median_log_shipped_profile']:+.3f}); "
                    f"{gpu}'s own fit {m['fit']['step_s'] * 1e3:.2f} ms + {m['fit']['per_seq_s'] * 1e6:.0f} us/seq, "
                    f"leave-one-model-out {m['r_median_abs_log_leave_one_model_out'] or float('nan'):.3f}")  # fmt: skip
    t = g.get("release_physics_on_seed")
    if t:
        o, n = t["lomo"]["OFF"], t["lomo"]["ON"]
        lines.append(f"  seed rows with the measured (release) suffix-step costs: predictor OFF {o['geo_frac']:.4f} / "
                     f"ON {n['geo_frac']:.4f} (the shipped figures keep each row's own build)")
    print("\n".join(lines))


def _print_gpu_memory(m: dict) -> None:
    if not m.get("available"):
        print(f"\nGPU memory: none ({m.get('reason')})")
        return
    lines = ["", f"GPU memory: the planner's KV cache against vLLM's 'Available KV cache memory', {m['boots']} boots "
             f"(K {', '.join(map(str, m['ks']))}): median |error| {m['kv_median_abs_rel_err']:.1%}, worst "
             f"{m['kv_max_abs_rel_err']:.1%} (goal {m['goal']:.0%}: {'met' if m['meets_goal'] else 'NOT met'})",
             f"  {'model':<22} {'K':>2} {'KV meas':>8} {'KV plan':>8} {'error':>7} {'graphs meas':>11} {'plan':>5}"]
    for r in m["table"]:
        g = f"{r['graph_estimate_measured']:.2f}" if r["graph_estimate_measured"] is not None else "-"
        lines.append(f"  {r['model'][:22]:<22} {r['k']:>2} {r['kv_measured']:>8.2f} {r['kv_planned']:>8.2f} "
                     f"{r['rel_err']:>+7.1%} {g:>11} {r['graph_planned']:>5.2f}")
    print("\n".join(lines))


def _published_line(m: str, v: dict, goal: dict | None = None) -> str:
    """One method's published-rows score: point error, 90 % coverage with the median band width beside it, and the
    trivial baselines on the same rows."""
    bl = v["baselines"]
    beats = [{"median_of_other_rows": "other rows' median"}.get(n, n.replace("_", " ")) for n, b in bl.items() if b["beaten"]]
    line = (f"{m}: {v['rows']} rows, median |ln(pred/pub)| {v['median_abs_log']:.3f}, 90% interval holds {v['coverage_90']:.0%} "
            f"at median band x{v['median_band_ratio']:.1f} (high/low), median ln(pred/pub) {v['median_log_pred_over_pub']:+.3f}; "
            f"baselines: other rows' median {bl['median_of_other_rows']['median_abs_log']:.3f}, always plain "
            f"{bl['always_plain']['median_abs_log']:.3f} (beats {', '.join(beats) or 'neither'})")  # fmt: skip
    if goal is not None:
        line += f" (goal <= {goal['median_abs_log']}, 80-95%: {'met' if v['meets_goal'] else 'NOT met'})"
    return line


def _print_published(pub: dict) -> None:
    if not pub.get("available"):
        print(f"\npublished results: {pub.get('reason')}")
        return
    teams = ", ".join(f"{t} ({g['gain_rows']} rows; its K̄ held out: {', '.join(g['kbar_rows_held_out']) or 'none of its own'})"
                      for t, g in pub["groups"].items())  # fmt: skip
    print(f"\npublished results ({', '.join(pub['sources'])}; teams {teams}; {pub['groups_file']}):")
    print(f"  {pub['method']}:")
    for m, v in pub["by_method"].items():
        print(f"    {_published_line(m, v, pub['goal'])}")
    print("  held out, apart by the K̄ the product prices each row with (quoted figure, DERIVED, none published):")
    for kind, by in pub["by_kbar_kind"].items():
        if kind != "note":
            for m, v in by.items():
                print(f"    {kind:<8} {_published_line(m, v)}")
    ins = pub["in_sample"]
    print(f"  {ins['label']} ({ins['method']}):")
    for m, v in ins["by_method"].items():
        print(f"    {_published_line(m, v, pub['goal'])}")
    for kind, by in ins["by_kbar_kind"].items():
        for m, v in by.items():
            print(f"    {kind:<8} {_published_line(m, v)}")


def _by_method(figures: dict) -> str:
    """``{"suffix": 0.0988, "ngram": 0.2152}`` as ``suffix 0.099, n-gram 0.215`` (the text output's form)."""
    return ", ".join(f"{'n-gram' if m == 'ngram' else m} {v:.3f}" for m, v in figures.items())


calibrate_app = typer.Typer(
    help="Refit the K > R predictor with the probe store's records, evaluate it (--evaluate), or rebuild a shipped "
    "calibration table from its committed inputs (rebuild TABLE).",
    no_args_is_help=False,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
app.add_typer(calibrate_app, name="calibrate")


@calibrate_app.command("rebuild")
def rebuild_cmd(
    table: str = typer.Argument(..., metavar="TABLE", help="A shipped table (see --list) or 'all'."),
    check: bool = typer.Option(False, "--check", help="Compare a rebuild with the shipped files; write nothing; exit 1 when one differs."),
    calibration_dir: str = typer.Option(None, "--calibration-dir", help="The calibration folder to read and write (default: the shipped one)."),
    json_out: bool = JsonOpt,
) -> None:
    """Rebuild a shipped calibration table from the committed inputs it is made of (each table's builder:
    advisor/calibrate/tables/), or check that the shipped files are exactly that rebuild. TABLE 'list' lists them."""
    from pathlib import Path

    from advisor.calibrate import tables
    from advisor.paths import data_path

    cal = Path(calibration_dir) if calibration_dir else data_path("calibration")
    if table == "list":
        rows = [{"table": n, "files": list(tables.outputs(n)), "holds": what, "inputs": tables.module(n).INPUTS}
                for n, what in tables.TABLES.items()]  # fmt: skip
        if json_out:
            emit_json({"tables": rows})
        else:
            for r in rows:
                print(f"{r['table']:<20} {', '.join(r['files'])}: {r['holds']}\n{'':<20} from {r['inputs']}")
        return
    names = list(tables.TABLES) if table == "all" else [table]
    tables.module(names[0])  # an unknown name is a usage error before anything is built
    out = []
    for n in names:
        if check:
            diff = tables.differing(n, cal)
            out.append({"table": n, "files": list(tables.outputs(n)), "differs": diff, "matches": not diff})
        else:
            written = tables.write(n, cal)
            out.append({"table": n, "files": [str(p) for p in written], "written": True})
    if json_out:
        emit_json({"calibration_dir": str(cal), "check": check, "tables": out})
    else:
        for r in out:
            if check:
                print(f"{r['table']}: " + ("matches a rebuild" if r["matches"] else f"DIFFERS from a rebuild: {', '.join(r['differs'])} "
                                           f"(advisor calibrate rebuild {r['table']} rewrites it)"))  # fmt: skip
            else:
                print(f"{r['table']}: wrote {', '.join(r['files'])}")
    if check and any(not r["matches"] for r in out):
        raise typer.Exit(1)


@calibrate_app.callback(invoke_without_command=True)
def calibrate_cmd(
    ctx: typer.Context,
    evaluate: bool = typer.Option(False, "--evaluate", help="Leave-one-model-out evaluation on the seed sweep, with baselines."),
    json_out: bool = JsonOpt,
) -> None:
    """Refit the K > R predictor with the probe store's records on top of the seed sweep and show how
    its predictions for the probed configurations moved; or, with --evaluate, score it leave-one-model-out."""
    if ctx.invoked_subcommand:
        return
    from advisor.predict.dataset import default_profile_of

    profile_of = default_profile_of(settings())
    if evaluate:
        from advisor.calibrate.suite import evaluate_all

        from advisor.calibrate.real_probes import MISS_NOISE_Z

        res = evaluate_all(profile_of, settings().rules_dirs)
        user_verify, _ = _store_verify_records()
        if user_verify:
            from advisor.calibrate.step_corrections import user_section

            res["verify"]["user_store"] = user_section(user_verify)
        if json_out:
            emit_json(res)
        else:
            _print_evaluation(res)
            _print_gpu_steps(res["gpu_steps"])
            _print_gpu_memory(res["gpu_memory"])
            _print_published(res["published"])
            sf = res["host_profiles"]["serving_fit"]
            if sf.get("available"):
                pr, ho = sf["fit"]["profile"], sf["held_out"]
                print(f"\nH200 serving fit ({', '.join(sf['fitted_on'])}; reference row serving-dummy): suffix "
                      f"{pr['suffix_step_s'] * 1e3:.2f} ms + {pr['suffix_per_seq_s'] * 1e6:.0f} us/seq, n-gram "
                      f"{pr['ngram_step_s'] * 1e3:.2f} ms + {pr['ngram_per_seq_s'] * 1e6:.0f} us/seq, of which async "
                      f"scheduling off {pr['async_off_step_s'] * 1e3:.2f} ms + {pr['async_off_per_seq_s'] * 1e6:.0f} us/seq; "
                      + (f"held out on {', '.join(ho['folders'])}: median |ln R| "
                         f"{ho['serving_profile']['median_abs_log_r']} (serving) vs "
                         f"{ho['offline_grid_profile_as_shipped']['median_abs_log_r']} (offline grid, shipped)"
                         if ho.get("available") else f"held out: {ho.get('reason', 'no pairs')}"))  # fmt: skip
            sr = res["host_profiles"]["serving_real_fit"]
            if sr.get("available"):
                pr = sr["fit"]["profile"]
                loco = "; ".join(f"{c} held out {_by_method(v['held_out']['median_abs_log_r'])}" for c, v in sr["leave_one_corpus_out"].items())
                dt = sr.get("dummy_transfer") or {}
                print(f"\nH200 serving profile, real weights ({', '.join(sr['fitted_on'])}; row h200-vllm0.26.0-serving): "
                      f"plain-step host floor {pr['plain_floor_step_s'] * 1e3:.2f} ms + {pr['plain_floor_per_seq_s'] * 1e6:.0f} us/seq, "
                      f"suffix {pr['suffix_step_s'] * 1e3:.2f} ms + {pr['suffix_per_seq_s'] * 1e6:.0f} us/seq, n-gram "
                      f"{pr['ngram_step_s'] * 1e3:.2f} ms + {pr['ngram_per_seq_s'] * 1e6:.0f} us/seq; run to run sigma(ln R) "
                      f"suffix {pr['suffix_run_sigma']:.2f}, n-gram {pr['ngram_run_sigma']:.2f}; median |ln R| by corpus: {loco}"
                      + (f"; a warmed dummy-weight probe ({', '.join(dt['fitted_on'])}) on the real pairs: "
                         f"{_by_method(dt['on_real_pairs']['median_abs_log_r'])}" if dt else ""))  # fmt: skip
            else:
                print(f"\nH200 serving profile, real weights: {sr.get('reason')}")
            for drafter, mt in res["mtp"].items():
                if not mt.get("available"):
                    continue
                lo, f = mt["leave_one_concurrency_out"], mt["fit"]
                print(f"\nMTP, {drafter} drafter ({mt['build']}): {f[f'mtp_{drafter}_step_s'] * 1e3:.2f} ms for the first draft + "
                      f"{f[f'mtp_{drafter}_per_draft_s'] * 1e3:.2f} ms per further draft ({f['points']} runs; shipped row "
                      f"{'matches' if mt['shipped_matches_fit'] else 'DIFFERS'}); held out by concurrency: step excess median "
                      f"|ln| {lo['median_abs_log_excess']}, R {lo['median_abs_log_r']} (GPU-only drafter: {lo['gpu_only_median_abs_log_r']})")  # fmt: skip
            rp = res["real_probes"]
            print("\nreal-weight probes: " + (f"{rp['campaigns']} setting(s)" if rp["available"] else rp["reason"]))
            b = rp.get("baselines") or {}
            if b:
                print(f"  baselines: plain decoding measured best in {b['plain_measured_best']} of {b['settings']} settings "
                      f"(always plain within 2% in {b['always_plain_within_2pct']}); gain error over {b['options']} speculative "
                      f"options: product {b['product_median_abs_log_gain_error']:.4f}, predicting x1 "
                      f"{b['x1_median_abs_log_gain_error']:.4f}, predicting the option's median on the other corpus "
                      f"{b['other_corpus_median_abs_log_gain_error']:.4f}")
            for mode, m in (rp.get("modes") or {}).items():
                if m["settings"]:
                    by = _by_method(m["median_abs_log_gain_error_by_method"])
                    print(f"  K̄ from {mode}: chosen option within 2% of the best measured in {m['chosen_within_2pct_share']:.0%}, "
                          f"median |ln gain error| {m['median_abs_log_gain_error']:.3f} ({by})")
            noise = rp.get("pass_to_pass") or {}
            if noise.get("passes"):
                print(f"  the measurement's own noise: {noise['passes']} passes of settings measured more than once land "
                      f"median |ln| {noise['median_abs_log_from_setting_median']:.3f} (max "
                      f"{noise['max_abs_log_from_setting_median']:.3f}) from their setting's median gain")
            for miss in rp.get("misses") or []:
                print(f"  missed: {miss['corpus']} at {miss['concurrency']}: chose {miss['chosen']}, {miss['best']} measured "
                      f"x{math.exp(miss['margin_ln']):.2f} better over {miss['passes']} pass(es)"
                      + (f" (within the noise: {MISS_NOISE_Z:g} standard errors are x{math.exp(miss['noise_bound_ln']):.2f})"
                         if miss["within_noise"] else ""))  # fmt: skip
            _print_verify(res["verify"])
        return
    from advisor.calibrate.refit import refit_report

    records, where = _store_records()
    report = refit_report(records, profile_of, store=where)
    for line in report["skipped"]:
        print(f"warning: {line}", file=sys.stderr)
    from advisor.calibrate.suite import store_host_profiles
    from advisor.predict.host_profile import USER_FILE

    report["host_profiles"] = store_host_profiles(records, profile_of, settings().data_dir / USER_FILE)
    from advisor.calibrate.step_corrections import store_user
    from advisor.cli.wiring import load_user_profiles
    from advisor.predict.step_correction import USER_FILE as STEP_FILE

    load_user_profiles(settings())  # the profiles just fitted: a verify run on a probed host matches its own
    verify_records, _ = _store_verify_records()
    report["step_corrections"] = store_user(verify_records, settings().data_dir / STEP_FILE, where)
    from advisor.probe import hostcpu

    report["host_cpu"] = hostcpu.summary(records)
    if json_out:
        emit_json(report)
        return
    if report["host_cpu"]:
        print(hostcpu.summary_text(report["host_cpu"]))
    for h in report["host_profiles"]["profiles"]:
        pr = h["profile"]
        print(f"host profile {pr['id']} ({pr['gpu']}, {pr['cpu_model']}, vLLM {pr['vllm_version']}): suffix step "
              f"{pr['suffix_step_s'] * 1e3:.2f} ms + {pr['suffix_per_seq_s'] * 1e6:.0f} us/seq, n-gram step "
              f"{pr['ngram_step_s'] * 1e3:.2f} ms + {pr['ngram_per_seq_s'] * 1e6:.0f} us/seq"
              + (f" (of which async scheduling off {pr['async_off_step_s'] * 1e3:.2f} ms + {pr['async_off_per_seq_s'] * 1e6:.0f} us/seq)"
                 if pr["async_off_step_s"] else "")
              + "".join(f"; MTP ({d} drafter) {pr[f'mtp_{d}_step_s'] * 1e3:.2f} ms + {pr[f'mtp_{d}_per_draft_s'] * 1e3:.2f} ms "
                        "per further draft" for d in ("eager", "compiled") if pr.get(f"mtp_{d}_step_s"))
              + (" (AT THE FIT GRID'S EDGE)" if h["at_grid_edge"] else "") + f" -> {report['host_profiles']['file']}")
    for line in report["host_profiles"]["skipped"]:
        print(f"host profile not fitted: {line}")
    sc = report["step_corrections"]
    for c in sc["corrections"]:
        state = "applied where measured" if c["applied"] else f"NOT applied: {c['why_not']}"
        print(f"step correction x{c['factor']:.3f} for {c['arch_class']} {c['dtype']} on host profile {c['host_profile']} at TP "
              f"{c['tp']} ({c['points']} verify run(s) of {c['models'].replace(';', ', ')}; {state}) -> {sc['file']}")  # fmt: skip
    if sc["records"] and not sc["corrections"]:
        print(f"step corrections: none from {sc['records']} verify run(s) in the store")
    for line in sc["left_out"]:
        print(f"verify run left out of the step corrections: {line}")
    print(f"calibration: {report['seed_rows']} seed rows + {report['probe_rows']} probe rows ({where})")
    if not report["rows"]:
        print("  no paired suffix/vanilla probe campaigns to refit on; the shipped seed calibration stays in use")
        return
    print(f"  {'model':<34} {'corpus':<12} {'host':<4} {'measured':>8} {'before':>8} {'after':>8}")
    for r in report["rows"]:
        print(f"  {r['model'][:34]:<34} {str(r['corpus'])[:12]:<12} {r['host_state']:<4} {r['measured_gain']:>8.3f} "
              f"{r['gain_before']:>8.3f} {r['gain_after']:>8.3f}")  # fmt: skip
