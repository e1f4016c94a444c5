"""Published acceptance figures as K̄ priors (calibration/kbar_published.csv, issue #22 (c)): every row is
sourced, the priors reach ``recommend``'s path with their citation, and evaluation (c) never prices a
gain row with an acceptance figure of its own source."""

from __future__ import annotations

import json
import math

import pytest

from advisor.domain.corpora import PUBLISHED_CORPORA, SEED_CORPORA
from advisor.predict import kbar_prior as kp

LLAMA_8B = "meta-llama/Llama-3.1-8B-Instruct"


def test_every_published_kbar_row_is_sourced_and_quoted():
    rows = kp.published_kbars()
    assert len(rows) >= 5
    for r in rows:
        assert r.url.startswith("https://") and r.quote and r.assumed and r.source, r
        assert r.method in ("suffix", "ngram") and r.k >= 1 and 1.0 <= r.k_bar <= 1 + max(r.k, 32), r
        assert f"{r.k_bar:g}" in r.quote, (r.k_bar, r.quote)  # the figure is the text quoted, not a reading of it
    # published_prior takes the first row of a corpus and method: one row each, so none is silently shadowed
    keys = [(r.corpus, r.method) for r in rows]
    assert len(keys) == len(set(keys))
    # the corpora recommend --corpus takes by name are exactly the table's corpora that are no seed corpus
    assert set(PUBLISHED_CORPORA) == {r.corpus for r in rows} - set(SEED_CORPORA)


def test_published_band_is_the_measured_spread_of_one_corpus():
    own = kp.own_priors()
    for method in ("suffix", "ngram"):
        want = sorted(math.log(p.k_bar_high / p.k_bar_low) / 2 for p in own if p.method == method)
        s = kp.published_spread(method)
        assert want[0] <= s <= want[-1]
        c = kp.published_prior("specbench", "instruct", method)
        assert c is not None and c.low < c.k_bar < c.high and c.low >= 1.0
        assert math.log(c.high / c.k_bar) == pytest.approx(s)
    assert kp.published_prior("specbench", "reasoning") is None  # instruct figures only
    assert kp.published_prior("cnn_dailymail", "instruct") is None


def test_published_priors_reach_recommend_with_their_citation(run_cli):
    code, out, err = run_cli("recommend", LLAMA_8B, "--gpu", "H200", "--gpus", "1", "--corpus", "specbench", "--json")
    assert code == 0, err
    rec = json.loads(out)
    row = next(r for r in kp.published_kbars() if r.corpus == "specbench" and r.method == "suffix")
    suffix = next(c for c in rec["candidates"] if c["speculative_method"] == "suffix" and c.get("prediction"))
    assert suffix["k_bar"] == pytest.approx(row.k_bar)
    # the chosen prediction's K̄ source names the publication and its URL (n-gram's from the same source)
    if rec["decision"]["speculative_method"] in ("suffix", "ngram"):  # both have a published K̄ on SpecBench (plain: K̄ 1)
        src = rec["prediction"]["k_bar_source"]
        assert kp.PUBLISHED_SOURCE in src and row.source in src and "https://" in src
    # the predictor's own path: suffix takes the published prior (with its band) on the H200 ...
    from advisor.domain.workload import Workload
    from advisor.hardware.gpus import get_gpu
    from advisor.predict.api import predict
    from advisor.predict.dataset import default_profile_of

    llama = default_profile_of()(LLAMA_8B)
    p = predict(llama, get_gpu("H200"), 1, Workload(corpus="specbench", concurrency=4), host_state="OFF")
    assert p.k_bar == pytest.approx(row.k_bar) and kp.published_source_id(p.k_bar_source) == row.source
    same = predict(llama, get_gpu("H200"), 1, Workload(corpus="specbench", concurrency=4, k_bar=row.k_bar), host_state="OFF")
    assert math.log(p.gain_high / p.gain_low) > math.log(same.gain_high / same.gain_low)
    # ... and on the seed host too: K̄ is the traffic's on every host (issue 42); where the seed sweep's gains imply
    # another K̄ for a seed corpus, that host carries it as its own fitted term (seed_host_kbar), not as a K̄
    b200 = predict(llama, get_gpu("B200"), 8, Workload(corpus="specbench", concurrency=32), host_state="OFF")
    assert kp.published_source_id(b200.k_bar_source) == row.source
    swe = predict(llama, get_gpu("B200"), 8, Workload(corpus="swebench", concurrency=32), host_state="OFF")
    swe_h200 = predict(llama, get_gpu("H200"), 1, Workload(corpus="swebench", concurrency=4), host_state="OFF")
    assert kp.published_source_id(swe_h200.k_bar_source) == "suffixdecoding-paper-2025"
    assert kp.published_source_id(swe.k_bar_source) == "suffixdecoding-paper-2025" and swe.k_bar == swe_h200.k_bar
    assert swe.k_bar_host is not None and swe.k_bar_host < swe.k_bar and swe_h200.k_bar_host is None
    assert any("seed host's gain-implied" in x for x in swe.explanation)
    # n-gram takes the published n-gram prior only where suffix's K̄ came from the same publication
    work = Workload(corpus="specbench")
    ng = kp.ngram_kbar_for(work, "instruct", own_prior_ok=False, suffix_source=p.k_bar_source)
    assert ng is not None and ng.k_bar == pytest.approx(1.6) and row.source in ng.source
    blaze = kp.ngram_kbar_for(Workload(corpus="blazedit"), "instruct", own_prior_ok=False, suffix_source="prior over single corpora")
    assert blaze is None  # BlazEdit has an n-gram figure but no suffix one: never priced from two sources


def test_leave_one_source_out_excludes_same_source_priors(monkeypatch):
    """A K̄ figure of the gain rows' own source is used by the product but never by evaluation (c)."""
    from advisor.domain.workload import Workload
    from advisor.hardware.gpus import get_gpu
    from advisor.paths import data_path
    from advisor.calibrate import published
    from advisor.predict.api import predict
    from advisor.predict.dataset import default_profile_of

    own_source = kp.PublishedKbar(source="snowflake-blog-2025", url="https://example.invalid/same-source", quote="3.5",
                                  corpus="blazedit", method="suffix", k=32, k_bar=3.5, model="m", gpu="H200", assumed="test row")  # fmt: skip
    table = (*kp.published_kbars(), own_source)
    monkeypatch.setattr(kp, "published_kbars", lambda: table)
    llama = default_profile_of()(LLAMA_8B)
    product = predict(llama, get_gpu("H200"), 1, Workload(corpus="blazedit", concurrency=4), host_state="OFF")
    assert product.k_bar == pytest.approx(3.5)  # the product path takes it ...
    out = published.evaluate(data_path("calibration"), default_profile_of())
    assert "blazedit/suffix" in out["published_kbar_excluded"]["snowflake-blog-2025"]
    assert "same source" in out["method"]
    blaze = [t for t in out["table"] if t["source"] == "snowflake-blog-2025" and t["corpus"] == "blazedit"]
    assert blaze and all(t["suffix_k_bar"] != pytest.approx(3.5) for t in blaze)  # ... evaluation (c) does not
    for t in out["table"]:  # no row is priced from its own source's acceptance, suffix or n-gram
        assert f"[{t['source']}]" not in t["suffix_k_bar_source"] + t.get("ngram_k_bar_source", "")
    # the other sources' figures are used where they apply (SpecBench from the SuffixDecoding paper)
    spec = [t for t in out["table"] if t["source"] == "snowflake-blog-2025" and t["corpus"] == "specbench"]
    assert spec and all("[suffixdecoding-paper-2025]" in t["suffix_k_bar_source"] for t in spec)


def test_a_named_corpus_without_a_kbar_prior_gets_the_known_corpora_spread():
    """CNN/DailyMail has no K̄ figure for either method: its K̄ is the instruct group's fallback, and the prediction's
    interval carries the spread of every known corpus's K̄ (seed-implied 1.41 to the SuffixDecoding paper's SWE-Bench
    7.82), not the fallback's false precision; a corpus with a prior does not."""
    from advisor.domain.workload import Workload
    from advisor.hardware.gpus import get_gpu
    from advisor.predict.api import predict
    from advisor.predict.dataset import default_profile_of

    p = default_profile_of()(LLAMA_8B)
    cnn = predict(p, get_gpu("H200"), 1, Workload(corpus="cnn_dailymail", concurrency=1), host_state="OFF")
    specb = predict(p, get_gpu("H200"), 1, Workload(corpus="specbench", concurrency=1), host_state="OFF")
    assert "UNSEEN CORPUS" in cnn.k_bar_source and "UNSEEN CORPUS" not in specb.k_bar_source
    assert math.log(cnn.gain_high / cnn.gain_low) > math.log(specb.gain_high / specb.gain_low) + 0.5
    sigma = kp.unseen_corpus_sigma(kp.shipped_priors(), "instruct")
    assert sigma == pytest.approx(math.log(7.821 / 1.4136) / (2 * 1.6449), rel=0.01)  # lmsys (seed) to SWE-Bench (paper)
    # leave-one-source-out, evaluation (c): without the paper's figures the spread is what is left
    rest = [r for r in kp.published_kbars() if r.source != "suffixdecoding-paper-2025"]
    assert len(rest) < len(kp.published_kbars()) and kp.unseen_corpus_sigma(kp.shipped_priors(), "instruct", published=rest) < sigma


def test_blazedit_suffix_kbar_is_derived_from_its_sourced_ngram_figure():
    """BlazEdit's only sourced acceptance figure is n-gram's (2.96 at K=5, vLLM PR #24344). Suffix decoding's K̄ there
    is that figure x the median suffix/n-gram K̄ ratio of the five corpora where both are known from one source (own
    outputs: humaneval, ShareGPT; the SuffixDecoding paper: Spec-Bench, SWE-Bench, AgenticSQL), its band the ratios'
    range (1.13 to 2.68): labelled DERIVED, and n-gram on BlazEdit is then priced from the same figure (one source)."""
    import statistics

    from advisor.domain.workload import Workload
    from advisor.hardware.gpus import get_gpu
    from advisor.predict.api import predict
    from advisor.predict.dataset import default_profile_of

    ratios = kp.suffix_over_ngram_ratios()
    assert len(ratios) == 5 and min(ratios.values()) > 1.0  # suffix accepts more than prompt lookup everywhere measured
    ng = next(r for r in kp.published_kbars() if r.corpus == "blazedit" and r.method == "ngram")
    got = kp.published_prior("blazedit", "instruct", "suffix")
    assert got.k_bar == pytest.approx(ng.k_bar * statistics.median(ratios.values()))
    assert got.low <= ng.k_bar * min(ratios.values()) and got.high >= ng.k_bar * max(ratios.values())
    assert "DERIVED" in got.source and kp.published_source_id(got.source) == "vllm-pr-24344"
    assert kp.published_prior("blazedit", "base", "suffix") is None  # published figures are instruct models'
    # without the n-gram figure (leave its source out) there is nothing to derive from
    assert kp.published_prior("blazedit", "instruct", "suffix", [r for r in kp.published_kbars() if r.source != ng.source]) is None
    p = default_profile_of()(LLAMA_8B)
    blaze = predict(p, get_gpu("H200"), 1, Workload(corpus="blazedit", concurrency=1), host_state="OFF")
    assert blaze.k_bar == pytest.approx(got.k_bar, abs=1e-3) and "UNSEEN CORPUS" not in blaze.k_bar_source
    work = Workload(corpus="blazedit", concurrency=1)
    n = kp.ngram_kbar_for(work, "instruct", own_prior_ok=False, suffix_source=blaze.k_bar_source)
    assert n is not None and n.k_bar == pytest.approx(ng.k_bar)
