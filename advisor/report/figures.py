"""The report's figures: matplotlib drawn straight to SVG text (no pyplot, no display, no files).

matplotlib because a Python user already knows it and it writes SVG with the text as paths: the
page needs no font, script or network to look the same everywhere. It is imported here only, so
``recommend`` never pays for it (tests/test_startup.py).
"""

from __future__ import annotations

import io
import re

from advisor.predict.dataset import SEED_K
from advisor.report.evidence import KRPoint, MemoryBar

TERMS = (("weights", "#4c72b0"), ("activation_peak", "#dd8452"), ("spec_decode_extra", "#c44e52"),
         ("cudagraph", "#8172b3"), ("non_torch", "#937860"), ("kv_cache", "#55a868"))  # fmt: skip
"""Stacked memory terms bottom to top (keys of MemoryPlan.terms_gib) with their colours."""
STATE_COLOURS = {"OFF": "#4c72b0", "ON": "#dd8452"}
REC_COLOUR = "#d62728"
PROBE_COLOUR = "#111111"
FONTTYPE = "path"


def _figure(width: float, height: float, cols: int = 1, *, right: float = 0.97, wspace: float = 0.22, bottom: float = 0.12):
    """Fixed margins (``right`` leaves room for an outside legend): a layout engine would redraw the
    figure to measure it, which costs more than the rest of the page."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height))
    fig.subplots_adjust(left=0.065, right=right, top=0.92, bottom=bottom, wspace=wspace)
    axes = fig.subplots(1, cols, squeeze=False)[0]
    return fig, list(axes)


def to_svg(fig, salt: str) -> str:
    """The figure as an inline ``<svg>`` element: no XML prolog, no DOCTYPE (a DTD URL), no RDF
    metadata; ids salted per figure so that several SVGs in one page never share one."""
    import matplotlib

    buf = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": FONTTYPE, "svg.hashsalt": salt}):
        fig.savefig(buf, format="svg", metadata={"Creator": None, "Date": None, "Format": None, "Type": None})
    text = buf.getvalue()
    text = text[text.index("<svg"):]
    text = re.sub(r"<metadata>.*?</metadata>", "", text, flags=re.S)
    return text


def kr_plane(seed: list[KRPoint], probes: list[KRPoint], rec: dict | None) -> str:
    """K̄ against R per host state (log axes: the distance from the break-even line K̄ = R is the
    log gain), the seed rows, the probes, and this recommendation (``page._rec_point`` or None)."""
    from matplotlib import colormaps
    from matplotlib.ticker import FixedLocator, NullLocator, ScalarFormatter

    fig, axes = _figure(10.5, 4.8, cols=2, right=0.79)
    values = [p.r for p in seed + probes] + [p.k_bar for p in seed + probes]
    if rec:
        values += [rec["r_low"], rec["r_high"], rec["k_low"], rec["k_high"], rec["k_bar"]]
    lo, hi = min(values + [1.0]) / 1.08, max(values + [2.0]) * 1.08
    corpora = sorted({p.corpus for p in seed if p.corpus})
    cmap = colormaps["tab10"]
    colour = {c: cmap(i % 10) for i, c in enumerate(corpora)}
    ticks = [t for t in (0.5, 0.75, 1, 1.5, 2, 3, 4, 6, 8, 12, 16, 24, 32) if lo <= t <= hi]
    for ax, state in zip(axes, ("OFF", "ON")):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.fill_between([lo, hi], [lo, hi], [hi, hi], color="#55a868", alpha=0.08, lw=0)
        ax.plot([lo, hi], [lo, hi], color="#333333", lw=1.2, ls="--", label="break-even K̄ = R")
        for c in corpora:
            for arch, marker in (("dense", "o"), ("moe", "^")):
                sel = [p for p in seed if p.host_state == state and p.corpus == c and p.arch == arch]
                if sel:
                    ax.scatter([p.r for p in sel], [p.k_bar for p in sel], s=26, marker=marker, color=colour[c], alpha=0.85,
                               edgecolors="white", linewidths=0.4, label=c if arch == "dense" else None)  # fmt: skip
        mine = [p for p in probes if p.host_state == state]
        if mine:
            ax.scatter([p.r for p in mine], [p.k_bar for p in mine], s=80, marker="P", color=PROBE_COLOUR, zorder=4,
                       label="probe (this host)")  # fmt: skip
        if rec and rec["host_state"] in (state, None):
            r = rec["r"]
            ax.plot([rec["r_low"], rec["r_high"]], [rec["k_eff"]] * 2, color=REC_COLOUR, lw=1, alpha=0.6,
                    label="its R, seed to measured costs")  # fmt: skip
            ax.errorbar([r], [rec["k_eff"]], yerr=[[rec["k_eff"] - rec["k_low"]], [rec["k_high"] - rec["k_eff"]]], fmt="*",
                        ms=16, color=REC_COLOUR, mec="black", mew=0.6, ecolor=REC_COLOUR, elinewidth=2, capsize=5,
                        label=rec.get("label", "this recommendation, 90 %"), zorder=5)  # fmt: skip
            ax.scatter([r], [rec["k_bar"]], s=60, marker="D", facecolors="none", edgecolors=REC_COLOUR, lw=1.4,
                       label="its K̄ before calibration", zorder=5)  # fmt: skip
        n = sum(p.host_state == state for p in seed)
        ax.set_title(f"host DSA queues {state}: {n} seed rows (8xB200, K={SEED_K})", fontsize=10)
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi)
        for axis in (ax.xaxis, ax.yaxis):
            axis.set_major_locator(FixedLocator(ticks))
            axis.set_minor_locator(NullLocator())
            axis.set_major_formatter(ScalarFormatter())
        ax.set_xlabel("R = verification step / plain step (step-cost model)")
        ax.set_ylabel("K̄ = tokens per step (implied: gain × R)")
        box = {"fc": "white", "alpha": 0.75, "lw": 0, "pad": 1.5}
        ax.text(0.03, 0.96, "suffix wins (K̄ > R)", transform=ax.transAxes, va="top", fontsize=8, color="#2d6a3e", bbox=box, zorder=6)
        ax.text(0.97, 0.04, "vanilla wins", transform=ax.transAxes, ha="right", fontsize=8, color="#8b2b2b", bbox=box, zorder=6)
        ax.grid(alpha=0.25)
    axes[1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    return to_svg(fig, "kr")


def predicted_vs_measured(seed_rows: list[dict], probes: list[dict], grid: list[dict]) -> str:
    """Left: gain predicted against measured (seed rows held out, probes); right: R of the GPU step grid."""
    fig, (a, b) = _figure(10.5, 4.6, cols=2, right=0.99)
    vals = [r["gain"] for r in seed_rows + probes] + [r["predicted_gain"] for r in seed_rows + probes] or [1.0]
    lo, hi = min(vals + [0.8]) * 0.92, max(vals + [1.25]) * 1.08
    a.plot([lo, hi], [lo, hi], color="#333333", lw=1.1, ls="--", label="identity")
    a.axhline(1, color="#999999", lw=0.7)
    a.axvline(1, color="#999999", lw=0.7)
    for state in ("OFF", "ON"):
        sel = [r for r in seed_rows if r["host_state"] == state]
        if sel:
            a.scatter([r["gain"] for r in sel], [r["predicted_gain"] for r in sel], s=22, color=STATE_COLOURS[state], alpha=0.75,
                      edgecolors="white", linewidths=0.4, label=f"seed, DSA {state} (held out: {len(sel)})")  # fmt: skip
    if probes:
        a.scatter([r["gain"] for r in probes], [r["predicted_gain"] for r in probes], s=70, marker="P", color=PROBE_COLOUR,
                  label=f"probes on this host ({len(probes)})")  # fmt: skip
    a.set_xlim(lo, hi)
    a.set_ylim(lo, hi)
    a.set_xlabel("measured gain (suffix / vanilla throughput)")
    a.set_ylabel("predicted gain")
    a.set_title("gain: out of sample", fontsize=10)
    a.legend(fontsize=7, loc="upper left", frameon=False)
    a.grid(alpha=0.25)
    pts = [r for r in grid if r.get("r_meas") and r.get("r_pred")]
    if pts:
        rv = [r["r_meas"] for r in pts] + [r["r_pred"] for r in pts]
        rlo, rhi = min(rv) * 0.95, max(rv) * 1.05
        b.plot([rlo, rhi], [rlo, rhi], color="#333333", lw=1.1, ls="--", label="identity")
        sc = b.scatter([r["r_meas"] for r in pts], [r["r_pred"] for r in pts], c=[r["concurrency"] for r in pts], cmap="viridis",
                       s=30, edgecolors="black", linewidths=0.3, label="grid point (colour: concurrency)")  # fmt: skip
        fig.colorbar(sc, ax=b, label="concurrency", shrink=0.8)
        b.set_xlim(rlo, rhi)
        b.set_ylim(rlo, rhi)
        b.legend(fontsize=7, loc="upper left", frameon=False)
    else:
        b.text(0.5, 0.5, "no GPU step grid shipped", ha="center", va="center", transform=b.transAxes)
    b.set_xlabel("measured R (real vLLM step times)")
    b.set_ylabel("predicted R (step-cost model)")
    b.set_title("R: GPU step grid (real vLLM, H200)", fontsize=10)
    b.grid(alpha=0.25)
    return to_svg(fig, "pvm")


def memory(bars: list[MemoryBar], gpu_label: str) -> str:
    """Per-GPU start-up terms stacked per configuration, with the budget line and the verdict."""
    fig, (ax,) = _figure(10.5, 4.4, right=0.80)
    xs = range(len(bars))
    top = 0.0
    seen: set[str] = set()
    for i, bar in enumerate(bars):
        bottom = 0.0
        for name, colour in TERMS:
            v = bar.terms_gib.get(name, 0.0)
            if v > 0:
                ax.bar(i, v, bottom=bottom, color=colour, edgecolor="white", lw=0.5, width=0.62,
                       label=None if name in seen else name)  # fmt: skip
                seen.add(name)
                bottom += v
        top = max(top, bottom, bar.terms_gib.get("budget", 0.0))
        verdict = "boots" if bar.boots else "DOES NOT BOOT"
        sub = f"{bar.kv_cache_tokens:,}\nKV tokens" if bar.boots else f"short\n{bar.terms_gib.get('deficit', 0):g} GiB"
        ax.text(i, bottom, f"{verdict}\n{sub}", ha="center", va="bottom", fontsize=7.5,
                color="#1b5e20" if bar.boots else "#b71c1c", fontweight="bold")  # fmt: skip
    budget = bars[0].terms_gib.get("budget", 0.0) if bars else 0.0
    ax.axhline(budget, color="black", lw=1.4, ls="--", label=f"budget {budget:g} GiB\n(gmu x memory)")
    ax.set_xticks(list(xs), [b.label for b in bars], fontsize=8)
    for tick, bar in zip(ax.get_xticklabels(), bars):
        if bar.chosen:
            tick.set_fontweight("bold")
    ax.set_ylim(0, top * 1.18 + 1)
    ax.set_ylabel(f"GiB per GPU ({gpu_label})")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    ax.grid(axis="y", alpha=0.25)
    return to_svg(fig, "mem")


METHOD_COLOURS = {"plain": "#4c72b0", "suffix": "#55a868", "ngram": "#dd8452", "mtp": "#8172b3"}
"""Layout candidates by speculative method (the chosen one is REC_COLOUR's star)."""
LABEL_PT = 7.5
"""Font size of the candidate labels (points)."""


def _text_box(text: str, size: float = LABEL_PT) -> tuple[float, float]:
    """A generous (width, height) in points of one line of ``text`` in matplotlib's DejaVu Sans
    (average advance below 0.66 em, bold included; ascent+descent about 1.2 em): placement errs on
    the side of space (the drawn labels are 0.76-0.86 of it), and tests/test_report.py checks the
    drawn extents."""
    return 0.66 * size * len(text) + 2, 1.25 * size + 2


def place_labels(points: list[tuple[float, float]], labels: list[str | None], area: tuple[float, float, float, float],
                 *, must: frozenset[int] = frozenset(), gap: float = 5.0) -> list[tuple[float, float] | None]:
    """Offsets (points, from each point to its label's lower-left corner) so that no two labels
    overlap, none covers another point, and all lie inside ``area`` (x0, y0, x1, y1 in points);
    None where no such place is found near the point (the table lists every candidate). Points
    in ``must`` (the chosen one) are placed first and always labelled, inside the area if it can."""
    order = sorted(range(len(points)), key=lambda i: (i not in must, i))
    placed: list[tuple[float, float, float, float]] = []
    out: list[tuple[float, float] | None] = [None] * len(points)
    dot = 4.5  # marker radius in points

    def fits(box, *, strict: bool) -> bool:
        x0, y0, x1, y1 = box
        if x0 < area[0] or y0 < area[1] or x1 > area[2] or y1 > area[3]:
            return False
        if any(x0 < b[2] and b[0] < x1 and y0 < b[3] and b[1] < y1 for b in placed):
            return False
        return not strict or not any(x0 - dot < px < x1 + dot and y0 - dot < py < y1 + dot for px, py in points)

    for i in order:
        if not labels[i]:
            continue
        (px, py), (w, h) = points[i], _text_box(labels[i])
        tries = [(dx, dy) for r in (gap, 2.4 * gap, 4 * gap)
                 for dx, dy in ((r, r * 0.6), (r, -h - r * 0.6), (-w - r, r * 0.6), (-w - r, -h - r * 0.6),
                                (-w / 2, r + 2), (-w / 2, -h - r - 2))]  # fmt: skip
        spot = next((o for strict in (True, False) for o in tries
                     if fits((px + o[0], py + o[1], px + o[0] + w, py + o[1] + h), strict=strict)), None)  # fmt: skip
        if spot is None and i in must:
            spot = tries[0]
        if spot is not None:
            out[i] = spot
            placed.append((px + spot[0], py + spot[1], px + spot[0] + w, py + spot[1] + h))
    return out


def candidates_figure(cands: list[dict]):
    """The matplotlib Figure of :func:`candidates` (None without figures): one colour per method,
    the chosen one starred; the chosen one and the best of each method labelled where a
    label fits without covering another (every candidate is in the table below the figure)."""
    pts = [c for c in cands if c["throughput_tok_s"] is not None and c["tpot_ms"] is not None]
    if not pts:
        return None
    fig, (ax,) = _figure(10.5, 4.4, right=0.83, bottom=0.13)
    xs, ys = [c["tpot_ms"] for c in pts], [c["throughput_tok_s"] for c in pts]
    dx, dy = (max(xs) - min(xs)) or max(xs) * 0.1 or 1.0, (max(ys) - min(ys)) or max(ys) * 0.1 or 1.0
    ax.set_xlim(min(xs) - 0.06 * dx, max(xs) + 0.06 * dx)
    ax.set_ylim(max(0.0, min(ys) - 0.10 * dy), max(ys) + 0.12 * dy)
    methods = [m for m in METHOD_COLOURS if any(c.get("method", "plain") == m for c in pts)]
    methods += sorted({c.get("method", "plain") for c in pts} - set(methods))
    for m in methods:
        sel = [c for c in pts if c.get("method", "plain") == m and not c["chosen"]]
        if sel:
            ax.scatter([c["tpot_ms"] for c in sel], [c["throughput_tok_s"] for c in sel], s=36, color=METHOD_COLOURS.get(m, "#777777"),
                       edgecolors="black", linewidths=0.4, alpha=0.9, zorder=3, label=m)  # fmt: skip
    for c in (c for c in pts if c["chosen"]):
        ax.scatter([c["tpot_ms"]], [c["throughput_tok_s"]], s=200, marker="*", color=REC_COLOUR, edgecolors="black",
                   linewidths=0.6, zorder=5, label=f"chosen ({c.get('method', 'plain')})")  # fmt: skip
    seen: set[str] = set()
    labels: list[str | None] = []
    for c in pts:  # ranked best first: the chosen one, then the best of each method
        m = c.get("method", "plain")
        labels.append(c["label"] if c["chosen"] or m not in seen else None)
        seen.add(m)
    to_pt = 72.0 / fig.dpi
    box = ax.get_window_extent()
    area = (box.x0 * to_pt + 2, box.y0 * to_pt + 2, box.x1 * to_pt - 2, box.y1 * to_pt - 2)
    xy = [tuple(v * to_pt for v in ax.transData.transform((c["tpot_ms"], c["throughput_tok_s"]))) for c in pts]
    must = frozenset(i for i, c in enumerate(pts) if c["chosen"])
    for c, label, off in zip(pts, labels, place_labels(xy, labels, area, must=must)):
        if label and off is not None:
            w, h = _text_box(label)
            far = max(off[0], -off[0] - w, off[1], -off[1] - h) > 9  # a leader line when it sits further off
            ax.annotate(label, (c["tpot_ms"], c["throughput_tok_s"]), xytext=off, textcoords="offset points", fontsize=LABEL_PT,
                        ha="left", va="bottom", fontweight="bold" if c["chosen"] else "normal", zorder=6,
                        arrowprops={"arrowstyle": "-", "color": "#888888", "lw": 0.5} if far else None)  # fmt: skip
    ax.set_xlabel("TPOT, ms per output token (lower is better)")
    ax.set_ylabel("host throughput, output tokens/s")
    ax.grid(alpha=0.25)
    ax.legend(fontsize=7.5, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, title="method", title_fontsize=8)
    return fig


def candidates(cands: list[dict]) -> str | None:
    """Throughput against TPOT of the layout candidates, the chosen one marked; None without figures."""
    fig = candidates_figure(cands)
    return to_svg(fig, "cand") if fig is not None else None


def pareto_figure(front: list[dict]):
    """The operating-point frontier (Recommendation.pareto): tok/s per user against tok/s per GPU, points
    meeting the limits filled, the chosen one a star; None without a frontier."""
    pts = [p for p in front if p.get("tok_s_per_gpu") is not None and p.get("tok_s_per_user") is not None]
    if not pts:
        return None
    fig, (ax,) = _figure(7.5, 4.2, right=0.95)
    xs = [p["tok_s_per_user"] for p in pts]
    ys = [p["tok_s_per_gpu"] for p in pts]
    ax.plot(xs, ys, color="#999999", linewidth=0.8, zorder=1)
    for p in pts:
        ok = p.get("feasible", True)
        ax.scatter([p["tok_s_per_user"]], [p["tok_s_per_gpu"]], s=140 if p.get("chosen") else 36,
                   marker="*" if p.get("chosen") else "o", color=REC_COLOUR if p.get("chosen") else ("#4c72b0" if ok else "white"),
                   edgecolors="black" if ok or p.get("chosen") else "#4c72b0", linewidths=0.6, zorder=3)  # fmt: skip
        if p.get("chosen"):
            ax.annotate(p["label"], (p["tok_s_per_user"], p["tok_s_per_gpu"]), fontsize=7, xytext=(5, 5), textcoords="offset points")
    ax.set_xlabel("tok/s per user (1000 / TPOT ms)")
    ax.set_ylabel("output tok/s per GPU")
    ax.set_title("operating points on the frontier (filled: within the limits; open: misses one)", fontsize=8)
    ax.grid(alpha=0.25)
    return fig


def pareto(front: list[dict]) -> str | None:
    """:func:`pareto_figure` as inline SVG (None without a frontier)."""
    fig = pareto_figure(front)
    return to_svg(fig, "pareto") if fig is not None else None
