#!/usr/bin/env python3
"""The trivial baselines README's evaluation section quotes beside each figure, read from the evaluation's own JSON.

    PYTHONPATH=$PWD python -m advisor calibrate --evaluate --json > eval.json
    python scripts/eval_baselines.py eval.json                 # baselines from the JSON's rows (instant)
    PYTHONPATH=$PWD python scripts/eval_baselines.py eval.json --agreement   # + (a)'s per-row agreement with the
                                                                             #   hindsight tree (~10 s: reruns recommend)

A stop-gap until ``advisor calibrate --evaluate`` prints these itself (issue 42, item 3): it fits nothing and
changes nothing; every figure is computed from the rows the evaluation printed (``--agreement`` runs the same
``recommend()`` path as ``lomo.product``).

- (b) ``real_probes``: how many settings plain decoding is the measured best in (then "always plain" chooses
  within 2 % there too); the median |ln gain error| of predicting x1 for every speculative option, and of
  predicting each option's median measured gain on the other corpus.
- (c) ``published``: per method, the median |ln| of predicting x1, and of predicting the median published figure of
  the other sources' rows of the method; the 90 % band's median width (high / low).
- GPU steps: the median |ln R| of predicting R = 1 over the grid's R points.
"""

from __future__ import annotations

import json
import math
import statistics as st
import sys


def real_probes(d: dict) -> list[str]:
    rows = d["real_probes"]["rows"]
    best = [max(o["measured"] for o in r["options"].values()) for r in rows]
    plain_best = sum(r["options"]["vanilla"]["measured"] >= b for r, b in zip(rows, best))
    plain_2pct = sum(r["options"]["vanilla"]["measured"] >= b / 1.02 for r, b in zip(rows, best))
    opts = [(r, k, v) for r in rows for k, v in r["options"].items() if k != "vanilla"]
    product = st.median(abs(math.log(v["predicted"] / v["measured"])) for _, _, v in opts)
    one = st.median(abs(math.log(v["measured"])) for _, _, v in opts)
    other = []
    for r, k, v in opts:
        o = [x["options"][k]["measured"] for x in rows if x["corpus"] != r["corpus"] and k in x["options"]]
        if o:
            other.append(abs(math.log(st.median(o) / v["measured"])))
    return [f"(b) settings {len(rows)}: plain decoding measured best in {plain_best}; always plain within 2 % in {plain_2pct}",
            f"(b) {len(opts)} speculative options: product median |ln gain error| {product:.4f}; predicting x1 {one:.4f}; "
            f"predicting the option's median measured gain on the other corpus {st.median(other):.4f} ({len(other)} options)"]


def published(d: dict) -> list[str]:
    t = d["published"]["table"]
    out = []
    for m in sorted({x["method"] for x in t}):
        ts = [x for x in t if x["method"] == m]
        other = [abs(math.log(st.median(y["published"] for y in ts if y["source"] != x["source"]) / x["published"]))
                 for x in ts if any(y["source"] != x["source"] for y in ts)]
        out.append(f"(c) {m}: {len(ts)} rows of {len({x['source'] for x in ts})} sources; product median |ln| "
                   f"{st.median(x['abs_log_error'] for x in ts):.4f}; predicting x1 {st.median(abs(math.log(x['published'])) for x in ts):.4f}; "
                   f"predicting the other sources' median {st.median(other):.4f} ({len(other)} rows); "
                   f"90 % band holds {sum(x['inside_90'] for x in ts) / len(ts):.4f}, median width x{st.median(x['high'] / x['low'] for x in ts):.1f}")
    out.append(f"(c) published K̄ rows left out per held-out source: {d['published']['published_kbar_excluded']}")
    return out


def gpu_steps(d: dict) -> list[str]:
    pts = [x for x in d["gpu_steps"]["table"] if x.get("r_meas")]
    return [f"GPU steps: {len(pts)} R points; predicting R = 1: median |ln R| {st.median(abs(math.log(x['r_meas'])) for x in pts):.4f}"]


def agreement() -> list[str]:
    """(a): how many seed rows recommend's held-out decision (lomo.product) and the predictor alone agree with the
    write-up's hindsight tree on."""
    from advisor.calibrate.evaluate import lomo_fits, writeup_tree
    from advisor.calibrate.evaluate_product import product_recommendation
    from advisor.predict.api import decide_p
    from advisor.predict.calibrated import inputs_for
    from advisor.predict.dataset import default_profile_of, seed_observations
    from advisor.rules.loader import load_rules

    profile_of, obs = default_profile_of(), seed_observations(replicates=True)
    fits, rules = lomo_fits(profile_of, obs), load_rules()
    scored = [o for o in obs if o.source == "seed"]
    prod = pred = 0
    for o in scored:
        p = profile_of(o.model)
        tree = writeup_tree(o, p.arch)
        prod += (product_recommendation(o, p, fits[o.model], rules).decision.speculative_method == "suffix") == tree
        row = fits[o.model].predict_row(inputs_for(o, p), model_id=o.model)
        pred += decide_p(0.5 * (1 + math.erf(row.mu / (row.sigma * math.sqrt(2))))) == tree
    return [f"(a) of {len(scored)} seed rows, the hindsight tree's choice equals recommend's (lomo.product) on {prod} "
            f"and the predictor alone's on {pred}"]


def main(argv: list[str]) -> int:
    args = [a for a in argv if not a.startswith("--")]
    if len(args) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    with open(args[0], encoding="utf-8") as fh:
        d = json.load(fh)
    lines = real_probes(d) + published(d) + gpu_steps(d)
    if "--agreement" in argv:
        lines += agreement()
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
