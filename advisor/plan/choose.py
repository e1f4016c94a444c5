"""The one decider (pure): from the scored candidates (layout x method x operating point, each with
its boot verdict and predicted figures), the rules' suffix policy, what probes on this host measured
and the user's query, pick what is launched and write every reason from that choice.

Every threshold comes from the policy table (advisor.rules.policy, rules/policy/decider.yaml).
Lines about the launched configuration name only its method, K and P(win); lines about another
configuration start ``candidate <label>:`` and carry that candidate's own figures.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from advisor import methods as _methods
from advisor.plan.layout import Candidate, LayoutQuery, NoFeasibleLayout, Objective



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
    forced: str | None = None
    """The method ``--spec`` forced (None: the prediction ranked)."""
    trace: list[str]


def request_latency_ms(c: Candidate, output_len: int) -> float:
    """What one user waits for a whole answer: TTFT + output_len x TPOT (queueing included)."""
    return c.figures.ttft_value + output_len * c.figures.tpot_ms.value


def simplicity(c: Candidate) -> int:
    """Tie-break: plain decoding (0) before a K schedule (1) before a fixed K (2)."""
    if c.method == "none":
        return 0
    return 1 if c.spec_schedule else 2


def rank_key(objective: Objective, output_len: int, per_gpu: bool = False):
    """Best first. Ties go to the simpler method (plain, then a K schedule, then a fixed K), then to EP
    (MoE with DP: EP and expert-TP predict alike; EP is vLLM's documented wide-EP layout)."""
    if objective == "latency":
        return lambda c: (round(request_latency_ms(c, output_len), 1), round(c.figures.tpot_ms.value, 2), simplicity(c),
                          not c.layout.ep)  # fmt: skip
    if per_gpu:  # the operating point (advisor.plan.operating_point): output tok/s per GPU the configuration uses
        return lambda c: (round(-c.figures.throughput_tok_s.value / c.layout.gpus, 1), round(c.figures.tpot_ms.value, 2),
                          simplicity(c), not c.layout.ep)  # fmt: skip
    return lambda c: (-round(c.figures.throughput_tok_s.value), round(c.figures.tpot_ms.value, 2), simplicity(c),
                      not c.layout.ep)  # fmt: skip


def _policy_reason(c: Candidate, policy: str) -> str | None:
    """Why the rules (or a probe on this host, which sets required/forbidden) rule ``c`` out (None: they do not).
    Only required and forbidden constrain; default_on / default_off / open leave the ranking to the prediction."""
    if c.method == "suffix":
        if policy == "forbidden":
            return "the rules (or a probe on this host) forbid suffix decoding here"
        if c.load_guard and policy != "required":
            return c.load_guard  # above the load suffix was measured at (advisor.plan.operating_point)
    elif policy == "required":
        return "the rules (or a probe on this host) require suffix decoding"
    return None


def _loses(c: Candidate) -> str | None:
    """Why a speculative candidate is not launched on its own prediction: its point gain is below plain decoding's
    at its own layout (None: it is not)."""
    g = c.figures.gain
    if c.method == "none" or g is None or g.value >= 1.0:
        return None
    return f"predicted to lose to plain decoding at its layout (x{g.value:.2f} [{g.low:.2f}, {g.high:.2f}])"


def _sla_reason(c: Candidate, q: LayoutQuery) -> str | None:
    f = c.figures
    if getattr(f, "stable", True) is False:  # advisor.predict.serving.LoadedFigures under --request-rate
        return f"request rate {q.request_rate:g}/s exceeds what {c.layout_label()} serves ({f.limit})"
    if q.max_tpot_ms and f.tpot_ms.value > q.max_tpot_ms:
        return f"TPOT {f.tpot_ms.value:.1f} ms > --max-tpot-ms {q.max_tpot_ms:g}"
    if q.max_ttft_ms and f.ttft_value > q.max_ttft_ms:
        return f"TTFT {f.ttft_value:.0f} ms > --max-ttft-ms {q.max_ttft_ms:g}"
    return None


def _ttft(f) -> str:
    return f"{f.ttft_ms.value:,.0f}" if f.ttft_ms is not None else "unbounded"


def why_lost(winner: Candidate, other: Candidate, objective: Objective, output_len: int) -> str:
    """One line: how ``other`` compares with the winner (its own figures, at the precision they were ranked at)."""
    if not other.eligible:
        return other.why_not or "ineligible"
    a, b = winner.figures, other.figures
    if objective == "latency":
        la, lb = request_latency_ms(winner, output_len), request_latency_ms(other, output_len)
        if round(la, 1) == round(lb, 1):
            return f"ties the winner's request latency ({lb:,.1f} ms); tie-break: {_tie_break(winner, other)}"
        return (f"request latency {lb:,.0f} ms vs {la:,.0f} ms (TTFT {_ttft(b)} + {output_len} x TPOT "
                f"{b.tpot_ms.value:.1f})")  # fmt: skip
    ta, tb = a.throughput_tok_s.value, b.throughput_tok_s.value
    same = (round(ta) == round(tb), round(a.tpot_ms.value, 2) == round(b.tpot_ms.value, 2), _ttft(a) == _ttft(b))
    if all(same):
        return f"ties the winner ({tb:,.0f} tok/s, same figures); tie-break: {_tie_break(winner, other)}"
    pct = (tb / ta - 1) * 100 if ta else 0.0
    head = (f"{pct:+.0f}% host throughput" if abs(pct) >= 0.5 else f"{pct:+.1f}% host throughput" if round(ta) != round(tb)
            else "same host throughput")  # fmt: skip
    tail = ""
    if round(ta) == round(tb):
        tail = f"; TPOT {b.tpot_ms.value:.2f} vs {a.tpot_ms.value:.2f} ms" + (
            "" if same[2] else f", TTFT {_ttft(b)} vs {_ttft(a)} ms")
    return f"{head} ({tb:,.0f} vs {ta:,.0f} tok/s){tail}"


def _tie_break(winner: Candidate, other: Candidate) -> str:
    if simplicity(winner) != simplicity(other):
        return "the simpler method first (plain, then a K schedule, then a fixed K)"
    if winner.layout.ep != other.layout.ep:
        return "EP preferred"
    return "search order"


def candidate_line(c: Candidate, winner: Candidate, q: LayoutQuery) -> str:
    """``candidate <label>: …`` with the candidate's own figures (P(win) for suffix)."""
    own = []
    if c.method == "suffix" and c.p_win is not None:
        own.append(f"P(win)={c.p_win:.2f}")
    if c.figures is not None and c.figures.gain is not None:
        own.append(f"gain x{c.figures.gain.value:.2f}")
    head = f"candidate {c.label()}" + (f" ({', '.join(own)})" if own else "")
    return f"{head}: {why_lost(winner, c, q.objective, q.output_len)}"


def _rule_out(c: Candidate, why: str | None, kind: str) -> bool:
    if why is None:
        return False
    c.eligible, c.why_not, c.why_kind = False, why, kind  # type: ignore[assignment]
    return True


def choose(cands: list[Candidate], *, policy: str, rule: str | None, query: LayoutQuery,
           forced: str | None = None) -> Choice:  # fmt: skip
    """Rank ``cands`` (from advisor.plan.layout.score) on the objective and pick the one to launch.

    Rules constrain, predictions rank: ``required``/``forbidden`` (a rule's, or a probe on this host for exactly
    a searched suffix deployment: required when it measured a gain, forbidden otherwise) are final;
    ``default_on``/``default_off``/``open`` are advice and never make the predicted-faster candidate ineligible.
    A speculative method whose point prediction loses to plain decoding at its layout is not launched unless the
    user forced it (``forced``: ``--spec METHOD``, which rules the other methods out and keeps the forced one
    however it is predicted). Ties go to the simpler method. Limits (--max-tpot-ms, --max-ttft-ms) rule out what
    misses them; when nothing meets them the best that boots is chosen and ``sla_met`` is False.
    Raises :class:`NoFeasibleLayout` when nothing boots."""
    rule = rule or "default"
    measured_by = None
    effective = policy
    if policy not in ("required", "forbidden") and forced is None:
        measured_by = next((c for c in cands if c.method == "suffix" and c.measured_gain is not None), None)
        if measured_by is not None:
            effective = "required" if measured_by.measured_gain > 1.0 else "forbidden"
    scored = [c for c in cands if c.boots and c.figures is not None]
    for c in scored:
        if forced is not None:
            if _rule_out(c, None if c.method == forced else f"--spec {forced}: only {_methods.get(forced).title} is launched",
                         "forced"):  # fmt: skip
                continue
        else:
            if _rule_out(c, _policy_reason(c, effective), "rule" if measured_by is None else "measured"):
                continue
            if c.method == "suffix" and effective == "required":
                pass  # the rules (or a measurement) require suffix: launched however it is predicted
            elif _rule_out(c, _loses(c), "loses"):
                continue
        if _rule_out(c, _sla_reason(c, query), "sla"):
            continue
        if measured_by is not None and effective == "required" and c is not measured_by:
            # suffix is launched where it was measured, not where it is only predicted
            _rule_out(c, f"probes on this host measured suffix at {measured_by.label()}; this deployment is only predicted",
                      "measured")  # fmt: skip
            continue
        c.eligible, c.why_not, c.why_kind = True, None, None
    key = rank_key(query.objective, query.output_len, query.operating_point)
    elig = [c for c in scored if c.eligible]
    sla_met = None if not (query.max_tpot_ms or query.max_ttft_ms) else True
    missed = None
    if not elig:
        near = [c for c in scored if c.why_kind == "sla"]
        if not near:
            if not scored:
                worst = "; ".join(sorted({c.why_not or "" for c in cands})[:3])
                raise NoFeasibleLayout(f"no searched configuration boots ({worst})")
            raise NoFeasibleLayout("every configuration that boots is ruled out: "
                                   + "; ".join(sorted({c.why_not or "" for c in scored})[:3]))  # fmt: skip
        best = min(near, key=key)
        missed = f"no configuration meets the limits; the best one misses them: {best.why_not}"
        sla_met = False
        best.eligible, best.why_not, best.why_kind = True, None, None
        elig = [best]
    elig.sort(key=key)
    rest = sorted((c for c in cands if not c.eligible), key=lambda c: (c.figures is None, key(c) if c.figures else 0))
    chosen = elig[0]
    trace = _trace(chosen, elig + rest, policy, effective, rule, measured_by, query, len(cands), missed, forced)
    return Choice(chosen=chosen, ranked=elig + rest, searched=len(cands), policy=effective, measured_by=measured_by,
                  sla_met=sla_met, limits_missed=missed, forced=forced, trace=trace)  # fmt: skip


def _trace(c: Candidate, ranked: list[Candidate], policy: str, effective: str, rule: str, measured_by: Candidate | None,
           q: LayoutQuery, searched: int, missed: str | None, forced: str | None) -> list[str]:  # fmt: skip
    """The reasons, written from the choice: what constrained the launched method, the chosen figures, then
    the best candidate of each other method with its own figures."""
    lines: list[str] = []
    spec = c.label()
    what = _methods.get(c.method).title
    if forced is not None:
        g = c.figures.gain
        verdict = (f"; predicted to LOSE to plain decoding at its layout (x{g.value:.2f} [{g.low:.2f}, {g.high:.2f}])"
                   if g is not None and g.value < 1.0 else "")  # fmt: skip
        lines.append(f"--spec {forced}: {what} is launched as asked ({spec}){verdict}")
    elif policy in ("required", "forbidden"):
        lines.append(f"rule {rule} {'requires' if policy == 'required' else 'forbids'} suffix decoding; "
                     f"the prediction does not override it; {what} is launched ({spec})")  # fmt: skip
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
    else:
        advice = ("rules leave suffix open" if policy == "open" else
                  f"rule {rule} sets {policy} for suffix decoding (advice: rules constrain only with required/forbidden)")  # fmt: skip
        pw = f" at P(win)={c.p_win:.2f}" if c.method == "suffix" and c.p_win is not None else ""
        g = c.figures.gain
        gain = f", predicted x{g.value:.2f} over plain decoding at its layout" if g is not None else ""
        lines.append(f"{advice}; the prediction ranks on the objective ({q.objective}): {what} is launched ({spec}{pw}{gain})")
    f = c.figures
    gain = f" (speculative gain x{f.gain.value:.2f} [{f.gain.low:.2f}, {f.gain.high:.2f}])" if f.gain else ""
    busy = getattr(f, "busy_replicas", None)
    idle = (f"; {busy:g} of {c.layout.dp} replicas have requests (host tok/s counts those)"
            if busy is not None and busy < c.layout.dp else "")  # fmt: skip
    searched_methods = "/".join(dict.fromkeys(x.method for x in ranked))
    lines.append(f"layout search: {searched} candidates (TP x DP x EP x {searched_methods}"
                 + (" x max_num_seqs" if any(x.max_num_seqs for x in ranked) else "")
                 + f"), objective {q.objective}; chosen {spec}: {f.throughput_tok_s.value:,.0f} tok/s host, "
                 f"TPOT {f.tpot_ms.value:.1f} ms, TTFT {_ttft(f)} ms{gain}{idle}")  # fmt: skip
    if missed:
        lines.append(f"limits: {missed}")
    for name in _methods.ids():
        best = next((x for x in ranked if x.method == name and x.figures is not None), None)
        if best is not None and best is not c:
            lines.append(candidate_line(best, c, q))
        elif best is None and (first := next((x for x in ranked if x.method == name and x.why_not), None)) is not None:
            lines.append(f"candidate {first.label()}: {first.why_not}")  # a method none of whose candidates has figures
    if q.ngram_k or q.ngram_lookup:
        lo, hi = q.ngram_lookup or (None, None)
        lines.append("n-gram as asked: " + (f"K={q.ngram_k} (--ngram-k) caps tokens per step at {q.ngram_k + 1} and the "
                     "verification step (n-gram's own host-profile step cost) at 1 + min(K, 1.5 x the ASSUMED drafted "
                     "tokens) per sequence, so K moves the price only where drafts are long; " if q.ngram_k else "")
                     + (f"lookup window {lo}..{hi} (--ngram-lookup) is launched as given but NOT priced: n-gram's tokens "
                        "per step stay an ASSUMED share of suffix's" if q.ngram_lookup else ""))  # fmt: skip
    return lines
