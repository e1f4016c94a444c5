"""The composition edge: the traffic (trace files measured with ``advisor kbar``'s estimator), the probe
store and this host's fingerprint are read here and handed to the pure planner
(:func:`advisor.plan.recommend.recommend`, advisor.plan.layout_wiring) as values and typed seams."""

from __future__ import annotations

from pathlib import Path

from advisor.domain.corpora import KNOWN_CORPORA
from advisor.domain.host import HostContext
from advisor.domain.prediction import RecommendedPrediction
from advisor.domain.workload import Workload
from advisor.errors import UsageError
from advisor.model.schema import ModelProfile


def workload_for(corpus: str | None, concurrency: int, tokenizer: str, k: int, *, on_progress=None,
                 allow_fallback: bool = True) -> Workload:  # fmt: skip
    """A known corpus name (seed or published), a trace file (K̄ measured with ``advisor kbar``'s estimator), or unknown.

    ``allow_fallback``: when ``tokenizer`` (the model's, by default) cannot be loaded, measure with
    the labelled built-in fallback and say so in ``notes``; False (the user named ``--tokenizer``)
    fails like ``advisor kbar`` does."""
    if corpus is None:
        return Workload(concurrency=concurrency)
    if corpus in KNOWN_CORPORA:
        return Workload(corpus=corpus, concurrency=concurrency)
    try:
        path = Path(corpus).expanduser()
    except RuntimeError:  # ~user of no such user
        from advisor.errors import UsageError as _Usage

        raise _Usage(f"--corpus {corpus!r}: no such user's home directory") from None
    if not path.is_file():
        raise UsageError(f"--corpus {corpus!r} is neither a known corpus ({', '.join(KNOWN_CORPORA)}) nor a file")
    from advisor.kbar.estimate import estimate_kbar
    from advisor.kbar.ngram import default_k

    ngram_k = default_k()
    from advisor.kbar.replay import new_cache, ReplayConfig
    from advisor.kbar.tokenize import load_tokenizer

    new_cache(ReplayConfig())  # no Arctic Inference: its install hint before the tokenizer loads
    tok = load_tokenizer(tokenizer, allow_fallback=allow_fallback)
    # No early stop: a still-warming shared cache biases an early K̄ low (docs/kbar.md).
    result = estimate_kbar(path, tok, k=k, on_progress=on_progress)
    # n-gram drafts from each request's own tokens: one replay, at the advisor's n-gram K and vLLM's lookup window.
    ngram = estimate_kbar(path, tok, k=ngram_k, method="ngram")
    notes = []
    if result.tokenizer_fallback:
        notes.append(f"K̄ of {path.name} was measured with a substituted tokenizer: {result.tokenizer} "
                     f"({tokenizer!r} could not be loaded); pass --tokenizer for the model's own")  # fmt: skip
    what = (f"the model's own outputs in {path.name}" + (f" (configuration {result.replayed_config})" if result.replayed_config else "")
            if result.own_outputs else f"the recorded responses in {path.name}")  # fmt: skip
    lookup = f"prompt_lookup {ngram.params['prompt_lookup_min']}-{ngram.params['prompt_lookup_max']}"
    return Workload(
        corpus=str(path), corpus_is_file=True, concurrency=concurrency, notes=notes,
        k_bar=result.tokens_per_step, k_bar_k=k, k_bar_own_outputs=result.own_outputs,
        k_bar_source=f"measured on {what} ({result.requests} requests, advisor kbar, "
                     f"tokenizer {result.tokenizer})",
        k_bar_ngram=ngram.tokens_per_step, k_bar_ngram_k=ngram_k,
        k_bar_ngram_source=f"n-gram K={ngram_k}, {lookup}, replayed on {what} ({ngram.requests} requests, advisor kbar)",
    )  # fmt: skip


def probe_records(settings) -> tuple[list | None, list[str]]:
    """(ok records or None, rows of the store left out) from this user's probe store, when it exists."""
    from advisor.probe.store import open_store, store_path

    if not store_path(settings).is_file():
        return None, []
    from advisor.model.source import local_path_problem

    with open_store(settings, busy_timeout_s=2.0) as store:  # a read: never wait on a writer for long
        records, skipped = [r for r in store.list_records() if r.outcome == "ok"], list(store.skipped)
    problems = {m: local_path_problem(m) for m in {r.model for r in records}}
    for model, why in sorted((m, w) for m, w in problems.items() if w):  # the fit leaves them out (dataset.probe_observations)
        n = sum(r.model == model for r in records)
        skipped.append(f"probe store {store.path}: {n} record(s) of model {model[:200]!r} left out of the fit: {why}")
    return records or None, skipped


def load_user_profiles(settings, skipped: list[str] | None = None) -> list:
    """The host cost profiles ``advisor calibrate`` fitted from this user's probes (data dir), made
    known to predictions in this process; [] when there are none or the file is unreadable. A bad row (NaN,
    infinite or negative costs, a field past the csv limit) is left out, named in ``skipped`` when given."""
    from advisor.predict import host_profile

    path = settings.data_dir / host_profile.USER_FILE
    lost: list[str] = []
    try:
        rows = host_profile.read_rows(path.read_text(encoding="utf-8"), lost) if path.is_file() else []
    except (OSError, ValueError, TypeError) as exc:
        rows, lost = [], [f"host profiles: unreadable ({type(exc).__name__}: {str(exc)[:200]})"]
    if skipped is not None:
        skipped += [f"{path}: {line}" for line in lost]
    host_profile.use_user_profiles(rows)
    return rows


def step_corrections_for(settings, host: HostContext, skipped: list[str] | None = None) -> tuple[tuple, str]:
    """The measured step corrections of this host's profile (advisor.predict.step_correction.for_host): the shipped
    table's and those ``advisor calibrate`` fitted from this user's verify records (data dir). The CPU is read only
    for a detected host (a ``--gpu`` on the command line may name another machine's: matched by GPU and vLLM line).
    A bad row of the user's file is left out, named in ``skipped``."""
    from advisor.predict import step_correction as stc

    path = settings.data_dir / stc.USER_FILE
    lost: list[str] = []
    try:
        rows = stc.read_rows(path.read_text(encoding="utf-8"), lost) if path.is_file() else []
    except (OSError, ValueError, TypeError) as exc:
        rows, lost = [], [f"step corrections: unreadable ({type(exc).__name__}: {str(exc)[:200]})"]
    if skipped is not None:
        skipped += [f"{path}: {line}" for line in lost]
    cpu = None
    if host.origin == "detected":
        from advisor.errors import AdvisorError
        from advisor.hardware.host import collect_host

        try:
            cpu = collect_host(settings).cpu.model
        except (OSError, AdvisorError):
            cpu = None
    return stc.for_host(host.gpu, cpu, host.vllm_version, rows)


class StorePredictor:
    """The :class:`~advisor.plan.seams.Predictor` for :func:`~advisor.plan.recommend.recommend`:
    fitted on the seed sweep plus this user's probe records (the SQLite store, when it exists), with
    the fitted coefficients kept as JSON in the data dir."""

    def __init__(self, settings) -> None:
        self.settings = settings
        self.records, self.skipped = probe_records(settings)
        """``skipped``: rows of the store left out (named): the CLI shows them as warnings."""
        self.cache_dir: Path = settings.data_dir / "cache"
        self._seen: list[str | None] = []
        self._cpu: list[str | None] = []
        self.user_profiles = load_user_profiles(settings, self.skipped)

    def fingerprint(self) -> str | None:
        """This machine's host fingerprint (what a probe here records), computed at most once."""
        if not self._seen:
            from advisor.hardware.host import collect_host

            from advisor.errors import AdvisorError

            try:  # collect_host lists unreadable parts instead of raising; what is left is said, not hidden
                self._seen.append(collect_host(self.settings).fingerprint)
            except (OSError, AdvisorError) as exc:
                self._seen.append(None)
                self.skipped.append(f"this host's fingerprint could not be read ({type(exc).__name__}: {exc}): no probe "
                                    "measurement counts as taken on this host")  # fmt: skip
        return self._seen[0]

    def cpu_model(self, gpu: str) -> str | None:
        """This machine's CPU model, read only when a profile of ``gpu`` could match it exactly: the user's probed
        ones and the shipped ones (an ``exact`` serving profile is matched only on its own GPU, CPU model and vLLM
        line, so a user on that host class gets it, as evaluation (b) prices that host's probes)."""
        from advisor.predict import host_profile

        profiles = list(self.user_profiles) + list(host_profile.listed())
        if not any(p.gpu.lower() == gpu.lower() and p.cpu_model for p in profiles):
            return None
        if not self._cpu:
            from advisor.hardware.host import collect_host

            try:
                self._cpu.append(collect_host(self.settings).cpu.model)
            except Exception:  # noqa: BLE001 - unknown CPU: the profile is matched by GPU and vLLM only
                self._cpu.append(None)
        return self._cpu[0]

    def __call__(self, profile: ModelProfile, host: HostContext, workload: Workload, k: int, tp: int,
                 ) -> RecommendedPrediction | None:  # fmt: skip
        from advisor.plan.predictor import predictor

        return predictor(profile, host, workload, k, tp, cache_dir=self.cache_dir, records=self.records,
                         fingerprint=self.fingerprint, cpu_model=self.cpu_model(host.gpu))  # fmt: skip
