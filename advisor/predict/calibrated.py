"""The calibrated model: physics offset + a robust linear correction, refit from CSV at load.

    log gain = log K̄ − log R_physics + δ
    δ = b0 + b1·ON·overhead_share + b2·reasoning·log(params_total/30B)
        + b3·instruct·llama + b4·log R_physics + u_model

- K̄: measured, or the prior of its corpus × family group derived from the training rows
  (kbar_prior.derive over implied K̄ = gain × R).
- ``overhead_share``: share of host-side time (launch, fixed, all-reduce) in the physics plain
  step; the seed's host state moved vanilla throughput by +33–54 % for small models and ~0 % at
  405B, i.e. in proportion to how host-bound the step is (no ON main effect: a purely
  device-bound step would not see the host state).
- ``u_model``: one indicator per training model (absorbs what is peculiar to a measured model so
  the population terms are estimated within models). A model that was not measured gets
  u = 0 and a wider interval (σ² = σ_residual² + σ_model²).
- Huber loss (scikit-learn HuberRegressor): the seed has outliers (Qwen2.5-72B humaneval van_off
  806 tok/s; DeepSeek-R1 humaneval suf_on 1219 vs 606 OFF) that a squared loss would chase.

No pickle: ``fit`` runs on the shipped CSV (and probe records) in well under a second.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

from advisor.domain.prediction import KBAR_SOURCE_ORDER, KbarKind
from advisor.hardware.gpus import GpuSpec, get_gpu
from advisor.model.schema import ModelProfile
from advisor.predict import host_profile as hp
from advisor.predict import kbar_prior as kp
from advisor.predict.dataset import KBAR_FLOOR, Observation, ProfileFn
from advisor.predict.stepcost import Build, RBreakdown, r_ratio

FEATURES = ("host_on_x_overhead", "reasoning_x_logsize", "instruct_x_llama", "log_r")
"""Population features of δ, in coefficient order."""
HUBER_ALPHA = 1.0
"""L2 penalty of the Huber regression (also shrinks the per-model indicators toward 0)."""
HUBER_EPSILON = 1.35
SIZE_REF_B = 30.0
"""Reference size (billions) the size term is centred on."""
OWN_PRIORS_HOSTS = "unfitted"
"""Where K̄ priors from own outputs apply by default (CalibratedModel.own_priors_hosts)."""
MIN_SIGMA = 0.08
"""Floor on the predictive standard deviation of log gain (run-to-run noise of a throughput ratio)."""


class RowInputs(BaseModel):
    """What the model needs to predict one configuration."""

    model_config = ConfigDict(extra="forbid")

    profile: ModelProfile
    gpu: GpuSpec
    tp: int
    corpus: str | None
    host_state: str
    concurrency: int
    k: int
    k_bar: float | None = None
    """Measured K̄, if any (else the prior is used)."""
    k_bar_k: int | None = None
    """K at which ``k_bar`` was measured (None: at ``k``)."""
    build: Build = "release"
    """Host profile whose speculative-step costs apply (calibration/host_profiles.csv): ``seed`` for seed rows."""
    host_class: str | None = None
    """The host the prediction is for, when it is not ``build``'s (a host no profile matches, priced with each
    known profile's R): the fitted terms and the seed-implied K̄ priors apply only when it is their host class.
    None: ``build``'s host."""


class RowPrediction(BaseModel):
    """Mean and spread of log gain with the parts that made it."""

    model_config = ConfigDict(extra="forbid")

    mu: float
    sigma: float
    k_bar: float
    k_bar_source: str
    k_bar_kind: KbarKind
    """Which source of KBAR_SOURCE_ORDER ``k_bar`` came from (kbar_choice)."""
    k_bar_published_source_id: str | None = None
    """The publication of a published (or derived) K̄ prior (KbarChoice.published_source_id)."""
    k_bar_sigma: float = 0.0
    """σ of ln K̄ its prior's band carries (kbar_choice)."""
    k_bar_host: float | None = None
    """The seed host's gain-implied K̄ where the ``seed_host_kbar`` term applies (None: ``k_bar``)."""
    r: RBreakdown
    context: float
    offset: float
    """log K̄ − log R."""
    delta: float
    """Calibrated correction δ (sum of terms below)."""
    terms: dict[str, float]
    model_seen: bool
    fitted_applied: bool = True
    """False when the host profile is not one the terms were fitted on (δ = 0 there)."""


def overhead_share(p: ModelProfile, gpu: GpuSpec, tp: int, concurrency: int, context: float) -> float:
    """Share of a plain decode step the physics model spends on host-side costs."""
    c = r_ratio(p, gpu, tp, concurrency=concurrency, draft_tokens=0.0, context=context).plain
    return (c.t_launch + c.t_fixed + c.t_allreduce) / c.total


def population_features(p: ModelProfile, host_state: str, ov_share: float, log_r: float) -> list[float]:
    """The FEATURES vector."""
    on = 1.0 if host_state == "ON" else 0.0
    reasoning = 1.0 if kp.family_group(p.family) == "reasoning" else 0.0
    size = math.log(max(p.params_total_b, 0.1) / SIZE_REF_B)
    llama = 1.0 if p.arch_family == "llama" else 0.0
    instruct = 1.0 if p.family == "instruct" else 0.0  # base models are their own class: no Llama-instruct term
    return [on * ov_share, reasoning * size, instruct * llama, log_r]


class KbarPick(BaseModel):
    """K̄ at the K predicted for, as :meth:`CalibratedModel.kbar_choice` took it: value, where it came from (prose and
    typed kind), and the σ of ln K̄ its source carries (0 for measured and seed-implied K̄)."""

    model_config = ConfigDict(extra="forbid")

    k_bar: float
    source: str
    kind: KbarKind
    published_source_id: str | None = None
    sigma: float = 0.0


class CalibratedModel(BaseModel):
    """A fitted model: priors, coefficients, per-model effects and residual spread."""

    model_config = ConfigDict(extra="forbid")

    priors: list[kp.KbarPrior]
    coef: list[float]
    intercept: float
    model_effects: dict[str, float]
    sigma_residual: float
    sigma_model: float
    n_obs: int
    sources: list[str]
    """What it was fitted on (``seed``, ``seed-dsa``, ``probe:<campaign>`` …, deduplicated)."""
    fitted_hosts: list[str] = []
    """Host profile ids the training rows were measured on: the fitted terms apply only there."""
    features: list[str] = list(FEATURES)
    """The population features kept (the rest are fixed at 0)."""

    own_priors: list[kp.OwnKbarPrior] | None = None
    """K̄ priors from the model's own outputs (calibration/kbar_own_priors.csv when None; [] turns them
    off): the ``own_output`` source of KBAR_SOURCE_ORDER for the models and corpora of their class
    (kbar_prior.own_prior), with their spread in the interval."""
    own_priors_hosts: str = OWN_PRIORS_HOSTS
    """Where the traffic's K̄ stands alone: ``all`` host profiles, or ``unfitted`` (on a host the terms were fitted
    on, the seed sweep's gain-implied K̄ of a corpus it covers adds the ``seed_host_kbar`` term: :meth:`seed_kbar`)."""
    published_priors: list[kp.PublishedKbar] | None = None
    """Published acceptance figures (calibration/kbar_published.csv when None; [] turns them off): the
    ``published`` and ``published_derived`` sources of KBAR_SOURCE_ORDER for instruct models
    (kbar_prior.published_quoted, published_derived); their band in the interval. Evaluation (c) leaves out the rows of the
    team whose gain rows it predicts (calibration/published/holdout_groups.yaml)."""

    def kbar_for(self, inputs: RowInputs) -> tuple[float, str]:
        """K̄ at ``inputs.k``: measured or the prior (at the seed's K, kbar_prior.PRIOR_K), carried to this K (kbar_at_k)."""
        pick = self.kbar_choice(inputs)
        return pick.k_bar, pick.source

    def _host(self, inputs: RowInputs) -> str:
        return inputs.host_class if inputs.host_class is not None else hp.get(inputs.build).id

    def _own_applies(self, inputs: RowInputs) -> bool:
        if self.own_priors_hosts == "all":
            return True
        return bool(self.fitted_hosts) and self._host(inputs) not in self.fitted_hosts

    def seed_kbar(self, inputs: RowInputs) -> tuple[float, str] | None:
        """The K̄ the seed host's gains imply for this corpus and family (K̄ = gain x R over its rows), where the fit
        applies that host's terms (a fitted host, or the fit itself) and the traffic's own K̄ is a prior, not a
        measurement; None elsewhere. What it adds over the traffic's K̄ is a seed-host term (``seed_host_kbar``),
        never a different K̄: K̄ is a property of traffic and model (issue 42)."""
        if inputs.k_bar or self._own_applies(inputs):
            return None
        pick = self.kbar_choice(inputs, order=("seed",))  # None where the seed priors have no row of the corpus
        return (pick.k_bar, pick.source) if pick is not None else None

    def kbar_source(self, kind: KbarKind, inputs: RowInputs) -> kp.KbarChoice | None:
        """The K̄ one source of KBAR_SOURCE_ORDER gives for ``inputs`` at the K it states (None: it has none here)."""
        corpus, family = inputs.corpus, inputs.profile.family
        if kind == "measured":
            m = inputs.k_bar
            return kp.KbarChoice(k_bar=m, low=m, high=m, k=inputs.k_bar_k or inputs.k, source="measured", kind=kind) if m else None
        if kind == "own_output":
            return kp.own_prior(corpus, family, "suffix", self.own_priors, k=inputs.k)
        if kind == "published":
            return kp.published_quoted(corpus, family, "suffix", self.published_priors)
        if kind == "published_derived":
            return kp.published_derived(corpus, family, self.published_priors)
        if kind == "seed":
            return kp.seed_prior(self.priors, corpus, family)
        return kp.fallback_prior(self.priors, corpus, family, own=self.own_priors, published=self.published_priors)

    def kbar_choice(self, inputs: RowInputs, *, order: tuple[KbarKind, ...] = KBAR_SOURCE_ORDER) -> KbarPick | None:
        """K̄ at ``inputs.k`` from the first source of ``order`` that has one, carried from the K it states (kbar_at_k),
        with the σ of ln K̄ its band carries (0 for measured and seed priors). ``order``: KBAR_SOURCE_ORDER (advisor.
        domain.prediction), the one ordered list of sources, the same on every host; it ends with the fallback, which
        always has a K̄. :meth:`seed_kbar` asks the seed-implied source alone (None where it has no row)."""
        choice = next((c for c in (self.kbar_source(kind, inputs) for kind in order) if c is not None), None)
        if choice is None:
            return None
        k_bar, source = choice.k_bar, choice.source
        if kp.max_draft(choice.k) != kp.max_draft(inputs.k):
            scaled = kp.kbar_at_k(k_bar, choice.k, inputs.k)
            source += (f"; {k_bar:.2f} at K={choice.k} carried to K={inputs.k}: {scaled:.2f} "
                       f"(bound K̄ <= 1 + K; ASSUMED constant per-token acceptance)")  # fmt: skip
            k_bar = scaled
        return KbarPick(k_bar=k_bar, source=source, kind=choice.kind, published_source_id=choice.published_source_id,
                        sigma=choice.log_sigma)  # fmt: skip

    def predict_row(self, inputs: RowInputs, *, model_id: str | None = None) -> RowPrediction:
        p = inputs.profile
        pick = self.kbar_choice(inputs)
        k_bar, kbar_sigma = pick.k_bar, pick.sigma
        seed = self.seed_kbar(inputs)
        context = kp.shape_for(inputs.corpus).context(p.family)
        r = r_ratio(p, inputs.gpu, inputs.tp, concurrency=inputs.concurrency,
                    draft_tokens=kp.draft_tokens(k_bar, inputs.k), context=context, k=inputs.k,
                    build=inputs.build)  # fmt: skip
        offset = math.log(max(k_bar, KBAR_FLOOR)) - math.log(r.r)
        # On the seed host the fit's rows are priced at the K̄ their gains imply (and the R its drafts give): that
        # offset minus the traffic's is one seed-host term, and the features read that R, so the fit is unchanged.
        r_fit, seed_term = r.r, 0.0
        if seed is not None and abs(seed[0] - k_bar) > 1e-12:
            rs = r_ratio(p, inputs.gpu, inputs.tp, concurrency=inputs.concurrency, draft_tokens=kp.draft_tokens(seed[0], inputs.k),
                         context=context, k=inputs.k, build=inputs.build)  # fmt: skip
            r_fit = rs.r
            seed_term = (math.log(max(seed[0], KBAR_FLOOR)) - math.log(rs.r)) - offset
        key = model_id or p.id
        seen = key in self.model_effects
        applied = not self.fitted_hosts or self._host(inputs) in self.fitted_hosts
        terms: dict[str, float] = {}
        if applied:
            ov = overhead_share(p, inputs.gpu, inputs.tp, inputs.concurrency, context)
            x = population_features(p, inputs.host_state, ov, math.log(r_fit))
            terms = {name: c * v for name, c, v in zip(FEATURES, self.coef, x) if name in self.features}
            terms["intercept"] = self.intercept
            if seen:
                terms["model_effect"] = self.model_effects[key]
        if seed_term:
            terms["seed_host_kbar"] = seed_term
            kbar_sigma = 0.0  # the seed host's K̄ is calibrated there (its rows), not a prior's band
        delta = sum(terms.values())
        # Off its host class the residual and model spread still apply (the fit's evidence of what K̄/R misses).
        sigma = math.hypot(self.sigma_residual, 0.0 if (seen and applied) else self.sigma_model, kbar_sigma)
        return RowPrediction(mu=offset + delta, sigma=max(sigma, MIN_SIGMA), k_bar=k_bar, k_bar_source=pick.source,
                             k_bar_kind=pick.kind, k_bar_published_source_id=pick.published_source_id,
                             k_bar_sigma=kbar_sigma, r=r, k_bar_host=seed[0] if seed_term else None,
                             context=context, offset=offset, delta=delta, terms=terms, model_seen=seen,
                             fitted_applied=applied)  # fmt: skip


def inputs_for(obs: Observation, profile: ModelProfile) -> RowInputs:
    """RowInputs of an observation (its measured K̄, if any, is not used: that would be the answer)."""
    return RowInputs(profile=profile, gpu=get_gpu(obs.gpu), tp=obs.tp, corpus=obs.corpus,
                     host_state=obs.host_state, concurrency=obs.concurrency, k=obs.k, build=obs.build)  # fmt: skip


def fit(observations: Sequence[Observation], profile_of: ProfileFn, *, exclude_model: str | None = None,
        features: Sequence[str] = FEATURES) -> CalibratedModel:  # fmt: skip
    """Fit on ``observations`` (all rows of ``exclude_model`` left out: leave-one-model-out) with the
    population ``features`` kept (the others fixed at 0: how each term's out-of-sample value is tested)."""
    import numpy as np
    from sklearn.linear_model import HuberRegressor

    train = [o for o in observations if o.model != exclude_model]
    if not train:
        raise ValueError("no calibration rows left to fit on")
    implied = [(o.model, o.corpus, o.family, kp.implied_kbar(o, profile_of(o.model))) for o in train if o.corpus]
    priors = kp.derive(implied, source=f"implied by {len(implied)} calibration rows (K̄ = gain × R)")
    models = sorted({o.model for o in train})
    shell = CalibratedModel(priors=priors, coef=[0.0] * len(FEATURES), intercept=0.0, model_effects={},
                            sigma_residual=0.0, sigma_model=0.0, n_obs=len(train), sources=[])  # fmt: skip
    rows, ys = [], []
    for o in train:
        p = profile_of(o.model)
        inputs = inputs_for(o, p)
        if o.k_bar:
            inputs = inputs.model_copy(update={"k_bar": o.k_bar})
        pred = shell.predict_row(inputs, model_id=o.model)
        ov = overhead_share(p, inputs.gpu, o.tp, o.concurrency, pred.context)
        x = population_features(p, o.host_state, ov, math.log(pred.r.r))
        x = [v if name in features else 0.0 for name, v in zip(FEATURES, x)]
        rows.append(x + [1.0 if o.model == m else 0.0 for m in models])
        ys.append(math.log(o.gain) - pred.offset - pred.terms.get("seed_host_kbar", 0.0))
    X, y = np.asarray(rows), np.asarray(ys)
    reg = HuberRegressor(alpha=HUBER_ALPHA, epsilon=HUBER_EPSILON, max_iter=1000).fit(X, y)
    n = len(FEATURES)
    effects = {m: float(c) for m, c in zip(models, reg.coef_[n:])}
    resid = y - reg.predict(X)
    sigma_res = 1.4826 * float(np.median(np.abs(resid - np.median(resid))))
    sigma_model = float(np.std(list(effects.values()))) if len(effects) > 1 else 0.3
    return CalibratedModel(
        priors=priors, coef=[float(c) for c in reg.coef_[:n]], intercept=float(reg.intercept_),
        model_effects=effects, sigma_residual=sigma_res, sigma_model=sigma_model, n_obs=len(train),
        sources=sorted({o.source for o in train}),
        fitted_hosts=sorted({hp.get(o.build).id for o in train}), features=[f for f in FEATURES if f in features],
    )  # fmt: skip
