"""What a step costs when a model drafts (EAGLE / EAGLE-3 heads, draft models): shared by their modules.

Mechanism (vLLM V1, vllm/v1/spec_decode/eagle.py EagleProposer.propose, which the draft-model proposer extends):
every step the target verifies 1 + K tokens per sequence (a uniform query length, so the FULL CUDA graph of the
decode path replays: vllm/v1/worker/gpu_model_runner.py uniform_decode), the rejection sampler runs over the K
drafts, then the drafter runs K forwards: the first over every token the target just scheduled (1 + K per
sequence: the accepted ones' hidden states feed it), the K - 1 others over one token per sequence, each ending in
the drafter's LM head and a greedy pick. Where the vLLM line keeps async scheduling on for the method
(``VllmFacts.async_spec_methods``: EAGLE heads everywhere, the draft model from 0.32) the host's per-step work
overlaps the GPU as in a plain step; where it turns it off (the draft model on 0.26: "Async scheduling not supported
with draft_model-based speculative decoding", logged in every draft-model boot of campaigns 15-17) each step also
pays the host profile's async-off cost (:func:`async_off_costs`), the share a plain step with
``--no-async-scheduling`` measured.

Every term is the target's step-cost physics (advisor.predict.stepcost) applied to the drafter's own profile:
its weights streamed once per forward, its own KV read, its LM head over its (draft) vocabulary, its all-reduces
at the target's TP; plus two ASSUMED constants below, which the H100 campaign of issue 41 measures.
"""

from __future__ import annotations

from advisor.domain.prediction import AcceptanceKind, Band
from advisor.predict import stepcost as sc

DRAFT_FORWARD_FIXED_S = 70e-6
"""ASSUMED host-side cost of one drafter forward inside a step (eagle.py's propose loop: position and slot-mapping
updates, attention metadata, a piecewise CUDA-graph replay, the argmax): ~15 small eager kernels at ~5 µs."""
REJECTION_S = 0.1e-3
"""ASSUMED cost of the rejection sampler per speculative step (as advisor.predict.absolute.REJECTION_S for MTP)."""
ACCEPTANCE_SPREAD = 0.35
"""ASSUMED ± share on the extra tokens per step (K̄ - 1) where K̄ comes from a class prior, not the head's own
published acceptance or this host's probe."""
PUBLISHED_SPREAD = 0.15
"""ASSUMED ± share on K̄ - 1 where it comes from the head's published acceptance on a dataset like the traffic
(other traffic, sampling temperature and system prompts move it)."""
SAME_TARGET_SPREAD = 0.25
"""ASSUMED ± share on K̄ - 1 where it comes from another head's published acceptance for the same target and
method (another checkpoint or training run: set before any published speedup was compared)."""


def draft_forward(drafter, gpu, tp: int, seqs: int, tokens_per_seq: float, context: float, *, fc: bool,
                  host: tuple[float, float] = (DRAFT_FORWARD_FIXED_S, 0.0)) -> float:
    """Seconds of one drafter forward over ``seqs`` x ``tokens_per_seq`` tokens at mean context ``context``: the
    drafter's roofline, all-reduces and piecewise launches, plus ``host`` = (fixed, per sequence) seconds of host work."""
    c = sc.step_cost(drafter.profile, gpu, tp, sc.StepShape(seqs=max(1, seqs), tokens_per_seq=max(1.0, tokens_per_seq),
                                                              context=context))  # fmt: skip
    t = c.t_roofline + c.t_allreduce + sc.launch_time(drafter.profile, "piecewise") + host[0] + host[1] * seqs
    if fc and drafter.fc_params:  # EAGLE-3 fuses the target's aux hidden states: fc of (aux x hidden) -> hidden
        tokens = seqs * tokens_per_seq
        bw = gpu.bandwidth_tbs * 1e12 * sc.WEIGHT_MEM_EFFICIENCY
        fc_bytes = drafter.fc_params * sc.bytes_per_param(drafter.profile) / tp
        fc_flops = 2 * drafter.fc_params * tokens / tp
        t += max(fc_bytes / bw, fc_flops / sc.peak_flops(drafter.profile, gpu)) + sc.GEMM_FLOOR_S
    return t


def plain_step(p, gpu, lay, n: int, context: float) -> float:
    """Seconds of a plain decode step of the target (advisor.predict.absolute.decode_step)."""
    from advisor.predict.absolute import decode_step

    return decode_step(p, gpu, lay, n, context)[0]


def host_costs(gpu) -> tuple[tuple[float, float], str, bool]:
    """((fixed, per-sequence) seconds of host work per drafter forward, where from, measured on this host?): the host
    profile matching ``gpu`` in calibration/drafter_costs.csv (MEASURED there), else the median of the measured
    ones carried (ASSUMED within x2 here), else DRAFT_FORWARD_FIXED_S alone (ASSUMED)."""
    from advisor.methods import _acceptance_table as table
    from advisor.predict import host_profile as hp

    rows = table.drafter_costs()
    match = hp.match(gpu.name).profiles
    own = [r for r in rows if r["host_profile"] in match]
    if len(match) == 1 and own:
        r = own[0]
        return (r["fixed"], r["per_seq"]), f"MEASURED on host profile {r['host_profile']} ({r['source'].split(' (')[0]})", True
    if rows:
        fixed = sorted(r["fixed"] for r in rows)[len(rows) // 2]
        per = sorted(r["per_seq"] for r in rows)[len(rows) // 2]
        ids = ", ".join(r["host_profile"] for r in rows)
        return (fixed, per), f"carried: MEASURED on {ids}, not on this host (ASSUMED within x2)", False
    return (DRAFT_FORWARD_FIXED_S, 0.0), f"ASSUMED {DRAFT_FORWARD_FIXED_S * 1e6:.0f} us", False


def async_off_costs(gpu) -> tuple[tuple[float, float], str]:
    """((fixed, per-sequence) seconds a step adds when vLLM turns async scheduling off, where from): the host profile
    matching ``gpu`` where it measured them (``HostProfile.async_off_step_s``: vanilla with and without
    ``--no-async-scheduling``), else the median of the profiles a prediction may use that measured them (reference
    rows excluded; carried, ASSUMED to hold here), else nothing (ASSUMED 0)."""
    from advisor.predict import host_profile as hp

    match = hp.match(gpu.name).profiles
    own = [hp.get(pid) for pid in match if hp.get(pid).async_off_step_s > 0]
    if len(match) == 1 and own:
        p = own[0]
        return (p.async_off_step_s, p.async_off_per_seq_s), f"MEASURED on host profile {p.id}"
    rows = sorted((p for p in hp.listed() if p.async_off_step_s > 0), key=lambda p: p.async_off_step_s)
    if rows:
        p = rows[len(rows) // 2]
        return (p.async_off_step_s, p.async_off_per_seq_s), f"carried: MEASURED on {p.id}, not on this host (ASSUMED)"
    return (0.0, 0.0), "not measured on any host profile (ASSUMED 0)"


def drafted_step(p, drafter, gpu, lay, n: int, context: float, k: int, host: tuple[float, float] | None = None,
                 where: str = "given", async_off: bool = False) -> tuple[float, float, float, list[str]]:  # fmt: skip
    """(plain step, verification step, drafting, notes) seconds at ``n`` running sequences per replica; ``host``:
    (fixed, per-sequence) host seconds per drafter forward (None: :func:`host_costs` for this GPU), ``where`` its source;
    ``async_off``: the vLLM line turns async scheduling off for this method, so the step adds :func:`async_off_costs`
    (counted in the drafting time)."""
    from advisor.predict.absolute import decode_step

    if host is None:
        host, where, _ = host_costs(gpu)
    plain = plain_step(p, gpu, lay, n, context)
    verify, _ = decode_step(p, gpu, lay, n, context, tokens_per_seq=1 + k)
    first = draft_forward(drafter, gpu, lay.tp, n, 1 + k, context, fc=True, host=host)
    rest = (k - 1) * draft_forward(drafter, gpu, lay.tp, n, 1, context, fc=False, host=host) if k > 1 else 0.0
    draft = first + rest + REJECTION_S
    notes = [f"drafter {drafter.id}: {k} forwards {draft * 1e3:.2f} ms per step (its weights, KV and LM head on the "
             f"step-cost physics; host work per forward {host[0] * 1e6:.0f} us + {host[1] * 1e6:.1f} us per sequence, "
             f"{where}; ASSUMED {REJECTION_S * 1e3:.1f} ms rejection sampler), verification of {1 + k} tokens per "
             f"sequence {verify * 1e3:.2f} ms against a plain step {plain * 1e3:.2f} ms"]  # fmt: skip
    if async_off:
        (fixed, per), src = async_off_costs(gpu)
        extra = fixed + per * n
        draft += extra
        notes.append(f"async scheduling off for this method on this vLLM line (VllmFacts.async_spec_methods): "
                     f"+{extra * 1e3:.2f} ms per step ({fixed * 1e3:.2f} ms + {per * 1e6:.1f} us per sequence, {src})")
    return plain, verify, draft, notes


def kbar_of(rates: list[float], k: int) -> float:
    """Tokens per step from per-position (unconditional) acceptance rates: 1 + the rates of the first K positions;
    positions beyond the published ones continue the last published conditional rate (ASSUMED)."""
    rs = list(rates[:k])
    while len(rs) < k and rs:
        cond = rs[-1] / rs[-2] if len(rs) >= 2 and rs[-2] > 0 else rs[-1]
        rs.append(rs[-1] * min(cond, 1.0))
    return 1.0 + sum(rs)


def gain_band(kbar: float, r: float, spread: float) -> Band:
    """Gain K̄ / R with ± ``spread`` on K̄ - 1 (the acceptance's uncertainty) and the step band on R."""
    from advisor.predict.absolute import STEP_BAND

    lo = (1 + (kbar - 1) * (1 - spread)) / (r * (1 + STEP_BAND / 2))
    hi = (1 + (kbar - 1) * (1 + spread)) / (r * (1 - STEP_BAND / 2))
    return Band(value=kbar / r, low=min(lo, kbar / r), high=max(hi, kbar / r))


def geometric(rate: float, k: int) -> list[float]:
    """Unconditional per-position acceptance of a chain whose every draft is accepted with conditional ``rate``."""
    return [rate ** i for i in range(1, k + 1)]


CLASS_PRIOR_RATE = {"eagle3": (0.55, 0.70, 0.85), "eagle": (0.45, 0.60, 0.75), "draft_model": (0.50, 0.65, 0.80)}
"""ASSUMED (low, mid, high) conditional acceptance of each draft by drafter kind, set before any published row was
read for this file (issue 41's freeze): EAGLE-3 chains of K = 3 on chat are commonly quoted at 2.5-3 tokens per
step, i.e. about 0.7 per draft; EAGLE-1/2 heads lower; a same-family draft model in between."""

CORPUS_CLASS = {"sharegpt": "chat", "wildchat": "chat", "lmsys": "chat", "specbench": "chat", "mix": "chat",
                "humaneval": "code", "mbpp": "code", "swebench": "code", "blazedit": "code", "agenticsql": "code"}
"""The published-acceptance dataset class nearest each known corpus (MT-bench-like chat, HumanEval-like code)."""


PROBE_SPREAD = 0.10
"""ASSUMED ± share on K̄ - 1 where it was measured by the user's own probe (run-to-run and traffic drift)."""


def probed_rates(probes, drafter, target_id: str) -> tuple[list[float], str] | None:
    """Per-position acceptance the user's probes measured for this drafter on this target with real weights (the
    records of ``METHOD:K@draft=ID`` configurations; the one with the most positions, then the latest)."""
    best = None
    for r in probes or ():
        label = r.config
        if r.weights != "real" or not r.acceptance_per_position or r.model.lower() != target_id.lower():
            continue
        head = label.split("@", 1)[0]  # METHOD:K (advisor.probe.record's label grammar; that floor is above this one)
        method, _, k_text = head.partition(":")
        draft = dict(x.split("=", 1) for x in label.split("@")[1:] if "=" in x).get("draft")
        if method != drafter.kind or draft != drafter.id or not k_text.isdigit():
            continue
        key = (len(r.acceptance_per_position), r.started_at)
        if best is None or key > best[0]:
            best = (key, r)
    if best is None:
        return None
    r = best[1]
    return list(r.acceptance_per_position), f"your probe (campaign {r.campaign_id}, {r.config}, corpus {r.corpus})"


def acceptance(drafter, k: int, workload, target_id: str = "", probes=()) -> tuple[float, float, str, AcceptanceKind]:
    """(K̄ at K, ± share on K̄ - 1, where from): the user's probe of this drafter on this model (real weights), else
    the head's published per-position acceptance on the traffic's dataset class (calibration/drafter_acceptance.csv),
    else another head's for the same target and method, else the class prior of its kind."""
    from advisor.methods import _acceptance_table as table

    probed = probed_rates(probes, drafter, target_id) if target_id else None
    if probed is not None:
        return kbar_of(probed[0], k), PROBE_SPREAD, probed[1], "probe"

    corpus = getattr(workload, "corpus", None) if workload is not None else None
    cls = CORPUS_CLASS.get((corpus or "").lower())
    unknown = "" if cls else ", the traffic unknown: its median dataset"
    row = table.lookup(drafter.id, cls)
    if row is not None:
        return (kbar_of(row.rates, k), PUBLISHED_SPREAD,
                f"{drafter.id}'s published acceptance on {row.dataset.split(' (')[0]} ({row.source}){unknown}", "published")
    row = table.lookup_same_target(target_id, drafter.kind, cls) if target_id else None
    if row is not None:
        return kbar_of(row.rates, k), SAME_TARGET_SPREAD, (f"another {drafter.kind} head for {target_id}: {row.drafter}'s "
                                                           f"published acceptance on {row.dataset.split(' (')[0]} ({row.source}){unknown}; "
                                                           f"{drafter.id}'s own is not published"), "same_target"  # fmt: skip
    lo, mid, hi = CLASS_PRIOR_RATE[drafter.kind]
    kb = kbar_of(geometric(mid, k), k)
    spread = max(ACCEPTANCE_SPREAD, (kbar_of(geometric(hi, k), k) - 1) / max(kb - 1, 1e-9) - 1)
    return kb, spread, (f"class prior of {drafter.kind} drafters: {mid:.2f} per draft [{lo:.2f}, {hi:.2f}] "
                        "(ASSUMED; no published acceptance for this drafter and traffic)"), "prior"


GPU_SPECULATOR_S = 0.1e-3
"""ASSUMED GPU time of a lookup speculator's own kernels per step (vLLM 0.34's suffix and n-gram speculators:
vllm/v1/worker/gpu/spec_decode/suffix/speculator.py, ngram/speculator.py: Triton kernels over the batch), on top of
the rejection sampler. Not measured: vLLM 0.34 needs torch 2.14 and the lent GPU machine has 2.11."""


def full_k_step(p, gpu, lay, n: int, context: float, k: int) -> tuple[float, list[str]]:
    """R of a lookup speculator that drafts all K tokens every step (VllmFacts suffix_drafts_full_k /
    ngram_drafts_full_k): every sequence verifies 1 + K tokens (a uniform batch: the FULL CUDA graph replays), the
    speculator's kernels run on the GPU and async scheduling stays on, so no CPU drafting cost is paid. DERIVED from
    the release's code (advisor.vllm_facts sources), the speculator's own GPU time ASSUMED."""
    from advisor.predict.absolute import decode_step

    plain = plain_step(p, gpu, lay, n, context)
    verify, _ = decode_step(p, gpu, lay, n, context, tokens_per_seq=1 + k)
    r = (verify + GPU_SPECULATOR_S + REJECTION_S) / plain
    return r, [f"all {k} drafts verified every step (GPU speculator, vLLM drafts filler tokens past the match): "
               f"verification of {1 + k} tokens per sequence {verify * 1e3:.2f} ms + ASSUMED {GPU_SPECULATOR_S * 1e3:.1f} ms "
               f"speculator kernels + {REJECTION_S * 1e3:.1f} ms rejection sampler against a plain step {plain * 1e3:.2f} ms "
               "(DERIVED from the release's code; not measured)"]
