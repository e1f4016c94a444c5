"""The one decider (pure): from the scored candidates (layout x method x operating point, each with
its boot verdict and predicted figures), the rules' suffix policy, what probes on this host measured
and the user's query, pick what is launched and write every reason from that choice.

Every threshold comes from the policy table (advisor.rules.policy, rules/policy/decider.yaml).
Lines about the launched configuration name only its method, K and P(win); lines about another
configuration start ``candidate <label>:`` and carry that candidate's own figures.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from advisor.plan.layout import Candidate, LayoutQuery, NoFeasibleLayout, Objective
from advisor.rules.policy import Bands

METHOD_NAMES = {"none": "plain decoding", "suffix": "suffix decoding", "ngram": "n-gram (prompt lookup)",
                "mtp": "MTP (the checkpoint's own multi-token-prediction layers)"}  # fmt: skip


class Choice(BaseModel):
    """What :func:`choose` decided: ``chosen`` is ``ranked[0]``."""

    model_config = ConfigDict(extra="forbid")

    chosen: Candidate
    ranked: list[Candidate]
    """Eligible candidates, best first, then the ineligible ones."""
    searched: int
    policy: str
    """The suffix policy applied: the rules', or required/forbidden when a probe on this host decided."""
    measured_by: Candidate | None = None
    """The suffix candidate whose measurement on this host decided (None: none did)."""
    sla_met: bool | None = None
    """None: no --max-tpot-ms / --max-ttft-ms; False: nothing meets them (the best that boots is chosen)."""
    limits_missed: str | None = None
    trace: list[str]


def request_latency_ms(c: Candidate, output_len: int) -> float:
    """What one user waits for a whole answer: TTFT + output_len x TPOT (queueing included)."""
    return c.figures.ttft_ms.value + output_len * c.figures.tpot_ms.value


def rank_key(objective: Objective, output_len: int, per_gpu: bool = False):
    # Ties (MoE with DP: EP and expert-TP predict alike) go to EP, vLLM's documented wide-EP layout.
    if objective == "latency":
        return lambda c: (request_latency_ms(c, output_len), c.figures.tpot_ms.value, not c.layout.ep)
    if per_gpu:  # the operating point (advisor.plan.operating_point): output tok/s per GPU the configuration uses;
        # at a tie a K schedule (plain decoding's figures at the peak, drafts below it) beats a fixed plain one
        return lambda c: (round(-c.figures.throughput_tok_s.value / c.layout.gpus, 1), c.figures.tpot_ms.value,
                          c.spec_schedule is None, not c.layout.ep)  # fmt: skip
    return lambda c: (-c.figures.throughput_tok_s.value, c.figures.tpot_ms.value, not c.layout.ep)


def _policy_reason(c: Candidate, policy: str, bands: Bands) -> str | None:
    """Why the rules' suffix policy rules ``c`` out (None: it does not)."""
    if c.method == "suffix":
        if policy == "forbidden":
            return "the rules (or a probe on this host) forbid suffix decoding here"
        if c.load_guard and policy != "required":
            return c.load_guard  # above the load suffix was measured at (advisor.plan.operating_point)
        need = bands.needed(policy)
        if need is not None and c.p_win is not None:
            low = c.p_win <= need if bands.strict(policy) else c.p_win < need
            if low:
                return f"P(win)={c.p_win:.2f} {'<=' if bands.strict(policy) else '<'} {need:.2f}, which the rules' {policy} policy needs"
    elif policy == "required":
        return "the rules (or a probe on this host) require suffix decoding"
    return None


def _sla_reason(c: Candidate, q: LayoutQuery) -> str | None:
    f = c.figures
    if getattr(f, "stable", True) is False:  # advisor.predict.serving.LoadedFigures under --request-rate
        return f"request rate {q.request_rate:g}/s exceeds what {c.layout.label()} serves ({f.limit})"
    if q.max_tpot_ms and f.tpot_ms.value > q.max_tpot_ms:
        return f"TPOT {f.tpot_ms.value:.1f} ms > --max-tpot-ms {q.max_tpot_ms:g}"
    if q.max_ttft_ms and f.ttft_ms.value > q.max_ttft_ms:
        return f"TTFT {f.ttft_ms.value:.0f} ms > --max-ttft-ms {q.max_ttft_ms:g}"
    return None


def why_lost(winner: Candidate, other: Candidate, objective: Objective, output_len: int = 512) -> str:
    """One line: how ``other`` compares with the winner (its own figures)."""
    if not other.eligible:
        return other.why_not or "ineligible"
    a, b = winner.figures, other.figures
    if objective == "latency":
        la, lb = request_latency_ms(winner, output_len), request_latency_ms(other, output_len)
        return (f"request latency {lb:,.0f} ms vs {la:,.0f} ms (TTFT {b.ttft_ms.value:,.0f} + {output_len} x TPOT "
                f"{b.tpot_ms.value:.1f})")  # fmt: skip
    pct = (b.throughput_tok_s.value / a.throughput_tok_s.value - 1) * 100
    if abs(pct) < 0.5:
        tie = "EP preferred" if winner.layout.ep != other.layout.ep else "lower TPOT or fewer drafts first"
        return f"ties the winner ({b.throughput_tok_s.value:,.0f} tok/s, same figures); tie-break: {tie}"
    return f"{pct:+.0f}% host throughput ({b.throughput_tok_s.value:,.0f} vs {a.throughput_tok_s.value:,.0f} tok/s)"


def candidate_line(c: Candidate, winner: Candidate, q: LayoutQuery) -> str:
    """``candidate <label>: …`` with the candidate's own figures (P(win) for suffix)."""
    own = []
    if c.method == "suffix" and c.p_win is not None and "P(win)" not in (c.why_not or ""):
        own.append(f"P(win)={c.p_win:.2f}")
    if c.figures is not None and c.figures.gain is not None:
        own.append(f"gain x{c.figures.gain.value:.2f}")
    head = f"candidate {c.label()}" + (f" ({', '.join(own)})" if own else "")
    return f"{head}: {why_lost(winner, c, q.objective, q.output_len)}"


def choose(cands: list[Candidate], *, policy: str, rule: str | None, query: LayoutQuery, bands: Bands) -> Choice:
    """Rank ``cands`` (from advisor.plan.layout.score) and pick the one to launch.

    The suffix policy: ``required``/``forbidden`` are final; a probe on this host for exactly a
    searched suffix deployment outranks the prediction (suffix required when it measured a gain,
    forbidden otherwise); else a suffix candidate needs the P(win) the policy's band asks
    (:meth:`Bands.needed`), and while one qualifies under ``default_on``/``default_off`` plain
    decoding is not launched at that candidate's layout: the rules' default (or a confident prediction)
    keeps suffix on there; the layouts and the other methods compete on the objective. Limits (--max-tpot-ms, --max-ttft-ms) rule out what
    misses them; when nothing meets them the best that boots is chosen and ``sla_met`` is False.
    Raises :class:`NoFeasibleLayout` when nothing boots."""
    rule = rule or "default"
    measured_by = None
    effective = policy
    if policy not in ("required", "forbidden"):
        measured_by = next((c for c in cands if c.method == "suffix" and c.measured_gain is not None), None)
        if measured_by is not None:
            effective = "required" if measured_by.measured_gain > 1.0 else "forbidden"
    scored = [c for c in cands if c.boots and c.figures is not None]
    for c in scored:
        c.why_not = _policy_reason(c, effective, bands) or _sla_reason(c, query)
        if c.why_not is None and measured_by is not None and effective == "required" and c is not measured_by:
            # suffix is launched where it was measured, not where it is only predicted
            c.why_not = f"probes on this host measured suffix at {measured_by.label()}; this deployment is only predicted"
        c.eligible = c.why_not is None
    # default_on / default_off decide suffix against plain decoding at each layout (what the seed measured: the
    # two at one deployment, TP 8): plain decoding is not launched at a layout where a suffix candidate qualifies;
    # the layouts then compete on the objective, so a layout where suffix does not qualify can launch plain decoding.
    keeper = None
    if effective in ("default_on", "default_off"):
        rank = rank_key(query.objective, query.output_len, query.operating_point)
        keepers = [c for c in scored if c.method == "suffix" and c.eligible]
        keeper = min(keepers, key=rank, default=None)
        blocked = []  # the layouts where plain decoding is kept off
        if keeper is not None:
            for c in scored:
                here = [x for x in keepers if x.layout == c.layout]
                if c.method != "none" or not c.eligible or not here:
                    continue
                # Under the operating-point search a plain candidate at a batch no qualifying suffix candidate
                # reaches (the limits or suffix's measured load stop it) is another operating point, not the
                # same deployment without suffix: it competes on tok/s per GPU (advisor.plan.operating_point).
                if query.operating_point and c.figures.running_per_replica > max(x.figures.running_per_replica for x in here):
                    continue
                best = min(here, key=rank)
                c.eligible = False
                c.why_not = (f"plain decoding is not launched at this layout while a suffix candidate there qualifies "
                             f"under the rules' {effective} policy ({best.label()}: P(win)={best.p_win:.2f})")  # fmt: skip
                blocked.append(c.layout)
            # The rules' default keeps *suffix* on; it does not make another method that is predicted to lose to
            # plain decoding at its own layout worth launching in plain decoding's place (where plain is kept off).
            for c in scored:
                gain = c.figures.gain.value if c.figures.gain is not None else None
                if c.method not in ("none", "suffix") and c.eligible and gain is not None and gain < 1.0 and c.layout in blocked:
                    c.eligible = False
                    c.why_not = (f"predicted to lose to plain decoding at its layout (x{gain:.2f}); the rules' {effective} "
                                 "policy keeps suffix decoding on, not this method")  # fmt: skip
    key = rank_key(query.objective, query.output_len, query.operating_point)
    elig = [c for c in scored if c.eligible]
    sla_met = None if not (query.max_tpot_ms or query.max_ttft_ms) else True
    missed = None
    if not elig:
        near = [c for c in scored if (c.why_not or "").startswith(("TPOT ", "TTFT "))]
        if not near:
            if not scored:
                worst = "; ".join(sorted({c.why_not or "" for c in cands})[:3])
                raise NoFeasibleLayout(f"no searched configuration boots ({worst})")
            raise NoFeasibleLayout("every configuration that boots is ruled out: "
                                   + "; ".join(sorted({c.why_not or "" for c in scored})[:3]))  # fmt: skip
        best = min(near, key=key)
        missed = f"no configuration meets the limits; the best one misses them: {best.why_not}"
        sla_met = False
        best.eligible, best.why_not = True, None
        elig = [best]
    elig.sort(key=key)
    rest = sorted((c for c in cands if not c.eligible), key=lambda c: (c.figures is None, key(c) if c.figures else 0))
    chosen = elig[0]
    trace = _trace(chosen, elig + rest, policy, effective, rule, measured_by, query, bands, len(cands), missed, keeper)
    return Choice(chosen=chosen, ranked=elig + rest, searched=len(cands), policy=effective, measured_by=measured_by,
                  sla_met=sla_met, limits_missed=missed, trace=trace)  # fmt: skip


def _trace(c: Candidate, ranked: list[Candidate], policy: str, effective: str, rule: str, measured_by: Candidate | None,
           q: LayoutQuery, bands: Bands, searched: int, missed: str | None, keeper: Candidate | None) -> list[str]:  # fmt: skip
    """The reasons, written from the choice: the policy's verdict on the launched method, the
    chosen figures, then the best candidate of each other method with its own figures."""
    lines: list[str] = []
    spec = c.label()
    if policy in ("required", "forbidden"):
        lines.append(f"rule {rule} {'requires' if policy == 'required' else 'forbids'} suffix decoding; "
                     "the prediction does not override it")  # fmt: skip
    elif measured_by is not None:
        g = measured_by.measured_gain
        if measured_by is c:
            lines.append(f"rule {rule} sets {policy}; probes on this host measured the launched {spec} at x{g:.2f} "
                         "vanilla: suffix on (the measurement outranks the prediction)")  # fmt: skip
        else:
            lines.append(f"rule {rule} sets {policy}; the measurement below outranks the prediction: suffix "
                         f"{'on' if g > 1.0 else 'off'}")  # fmt: skip
            lines.append(f"candidate {measured_by.label()}: probes on this host measured x{g:.2f} vanilla for exactly "
                         "this deployment")  # fmt: skip
    elif c.method == "suffix":
        need = bands.needed(policy)
        if policy == "default_on":
            lines.append(f"rule {rule} sets default_on; the launched {spec} is predicted P(win)={c.p_win:.2f} "
                         f">= {need:.2f}: the rules' default keeps suffix on")  # fmt: skip
        elif policy == "default_off":
            lines.append(f"rule {rule} sets default_off; the launched {spec} is predicted P(win)={c.p_win:.2f} "
                         f"> {need:.2f}: the prediction turns suffix on")  # fmt: skip
        else:
            lines.append(f"rules leave suffix open; the prediction decides: the launched {spec} has "
                         f"P(win)={c.p_win:.2f} >= {need:.2f}")  # fmt: skip
    else:
        what = METHOD_NAMES[c.method]
        ok = any(x.method == "suffix" and x.eligible for x in ranked)
        head = ("rules leave suffix open; the prediction decides:" if policy == "open" else
                f"rule {rule} sets {policy} for suffix decoding;")  # fmt: skip
        lines.append(f"{head} {what} is launched ({spec}): "
                     + ("it ranks above every suffix candidate that qualifies (below)" if ok else
                        "no suffix candidate qualifies (below)"))  # fmt: skip
    f = c.figures
    gain = f" (speculative gain x{f.gain.value:.2f} [{f.gain.low:.2f}, {f.gain.high:.2f}])" if f.gain else ""
    lines.append(f"layout search: {searched} candidates (TP x DP x EP x none/suffix/ngram/MTP"
                 + (" x max_num_seqs" if any(x.max_num_seqs for x in ranked) else "")
                 + f"), objective {q.objective}; chosen {spec}: {f.throughput_tok_s.value:,.0f} tok/s host, "
                 f"TPOT {f.tpot_ms.value:.1f} ms, TTFT {f.ttft_ms.value:.0f} ms{gain}")  # fmt: skip
    if missed:
        lines.append(f"limits: {missed}")
    for name in ("none", "mtp", "suffix", "ngram"):
        best = next((x for x in ranked if x.method == name and x.figures is not None), None)
        if best is not None and best is not c:
            lines.append(candidate_line(best, c, q))
    if q.ngram_k or q.ngram_lookup:
        lo, hi = q.ngram_lookup or (None, None)
        lines.append("n-gram as asked: " + (f"K={q.ngram_k} (--ngram-k) caps tokens per step at {q.ngram_k + 1} and the "
                     "verification step (n-gram's own host-profile step cost) at 1 + min(K, 1.5 x the ASSUMED drafted "
                     "tokens) per sequence, so K moves the price only where drafts are long; " if q.ngram_k else "")
                     + (f"lookup window {lo}..{hi} (--ngram-lookup) is launched as given but NOT priced: n-gram's tokens "
                        "per step stay an ASSUMED share of suffix's" if q.ngram_lookup else ""))  # fmt: skip
    return lines
