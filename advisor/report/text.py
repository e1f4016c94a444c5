"""The plain-text view of a recommendation's chosen figures (what ``advisor recommend`` prints under "Predicted"):
the chosen operating point, the next best candidates and the labelled terms. A view of the Recommendation; it
decides nothing."""

from __future__ import annotations

SHOWN = 3
"""Runners-up shown in text (``--json`` carries every candidate)."""


def band_note(gpu: str, layout: str | None, cls: str) -> str:
    """Where the plain step's band was measured, for this GPU, architecture class and layout (computed from
    calibration/class_accuracy.csv: advisor.predict.class_accuracy)."""
    from advisor.predict.class_accuracy import plain_note

    tp1 = (layout or "").split(" x ")[0].split(" + ")[0] == "TP 1"
    note = plain_note(gpu, cls)
    return note + ("" if tp1 else f"; {gpu} {layout} is not measured")


def _rec_class(rec) -> str:
    m = rec.model
    return "dense" if m.get("arch") != "moe" else ("mla-moe" if m.get("attention") == "mla" else "gqa-moe")


def text_lines(rec) -> list[str]:
    """The plain-text block: chosen figures, the next best three, and the labelled terms."""
    p = rec.prediction
    if p is None or p.throughput_tok_s is None:
        return []
    fmt = lambda b, d=0: f"{b.value:,.{d}f} [{b.low:,.{d}f}, {b.high:,.{d}f}]" if b is not None else "unbounded"  # noqa: E731
    fmt_d = lambda b, d=0: f"{b['value']:,.{d}f} [{b['low']:,.{d}f}, {b['high']:,.{d}f}]"  # noqa: E731
    lines = [f"Predicted ({p.layout}, {p.method}; prompt {p.prompt_len}, output {p.output_len} tokens):",
             f"  host output throughput {fmt(p.throughput_tok_s)} tok/s",
             f"  TPOT {fmt(p.tpot_ms, 1)} ms   TTFT " + (f"{fmt(p.ttft_ms)} ms" if p.ttft_ms is not None else "unbounded (no steady state)")
             + (" (Poisson arrivals)" if p.max_num_batched_tokens is not None else ""),
             f"  decode step {fmt(p.step_ms, 2)} ms at {p.running_per_replica} running/replica, "
             f"prefill {fmt(p.prefill_ms, 1)} ms per prompt"]
    if p.speculative_gain:
        lines.append(f"  speculative gain x{fmt(p.speculative_gain, 2)}")
    if p.max_num_batched_tokens is not None:
        load = (f"{p.offered_concurrency:,} requests in flight" if p.offered_concurrency is not None else "the offered load")
        lines.append(f"  operating point: max_num_seqs {p.max_num_seqs}, max_num_batched_tokens {p.max_num_batched_tokens} "
                     f"(chunked prefill), {load}, {p.request_rate or 0:,.1f} requests/s on {p.gpus_used} GPUs: "
                     f"{p.tok_s_per_gpu:,.0f} tok/s per GPU, {p.tok_s_per_user:,.1f} tok/s per user")
        if p.ttft_ms is None:
            lines.append(f"  TTFT under load: no figure: {p.ttft_unbounded or 'the queue grows without bound'}; "
                         f"unloaded lower bound {p.ttft_unloaded_ms:,.0f} ms")
        else:
            prefill = p.ttft_ms.value - (p.ttft_prefill_wait_ms or 0) - (p.ttft_slot_wait_ms or 0)
            lines.append(f"  TTFT under load {p.ttft_ms.value:,.0f} ms = prefill {prefill:,.0f}"
                         f" + wait for the prefill budget {p.ttft_prefill_wait_ms or 0:,.0f} + wait for a slot {p.ttft_slot_wait_ms or 0:,.0f} ms"
                         f" (rounded terms); unloaded lower bound {p.ttft_unloaded_ms:,.0f} ms")
    cl = p.closed_loop
    if cl:
        lines.append(f"  closed loop at {cl['concurrency']:,} in flight (the benchmark below, simulated): mean TTFT "
                     f"{fmt_d(cl['mean_ttft_ms'])} ms (median {cl['median_ttft_ms']['value']:,.0f}), mean TPOT "
                     f"{fmt_d(cl['mean_tpot_ms'], 1)} ms, {fmt_d(cl['output_tok_s'])} tok/s")
    if p.judged_on:
        lines.append(f"  limits judged on: {'the closed loop (--arrival closed, what the benchmark runs)' if p.judged_on == 'closed' else 'Poisson arrivals (--arrival poisson; the TTFT above)'}")
    if p.schedule_reason:
        lines.append(f"  speculation by load: {p.schedule_reason}")
    lines.append(f"  intervals: step ±10% and prefill ±25% (ASSUMED bands; {band_note(rec.host.gpu, p.layout, _rec_class(rec))}), "
                 "times the predictor's 90% gain interval for speculative methods")
    for n in p.figure_notes or []:
        lines.append(f"  term: {n}")
    runners = [c for c in rec.candidates if not c.chosen][:SHOWN]
    if runners:
        lines.append("Next best:")
        for c in runners:
            q = c.prediction
            ttft = f"{q.ttft_ms.value:.0f} ms" if q and q.ttft_ms is not None else "unbounded"
            figs = (f"{q.throughput_tok_s.value:,.0f} tok/s, TPOT {q.tpot_ms.value:.1f} ms, "
                    f"TTFT {ttft}") if q else "no figures"
            lines.append(f"  {c.label}: {figs} — lost: {c.why_lost or c.why_not}")
    return lines
