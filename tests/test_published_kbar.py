"""Published acceptance figures as K̄ priors (calibration/kbar_published.csv, issue #22 (c)): every row is
sourced, the priors reach ``recommend``'s path with their citation, and evaluation (c) never prices a
gain row with an acceptance figure of its own team (calibration/published/holdout_groups.yaml)."""

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
    assert p.k_bar == pytest.approx(row.k_bar) and (p.k_bar_kind, p.k_bar_published_source_id) == ("published", row.source)
    same = predict(llama, get_gpu("H200"), 1, Workload(corpus="specbench", concurrency=4, k_bar=row.k_bar), host_state="OFF")
    assert math.log(p.gain_high / p.gain_low) > math.log(same.gain_high / same.gain_low)
    # ... and on the seed host too: K̄ is the traffic's on every host (issue 42); where the seed sweep's gains imply
    # another K̄ for a seed corpus, that host carries it as its own fitted term (seed_host_kbar), not as a K̄
    b200 = predict(llama, get_gpu("B200"), 8, Workload(corpus="specbench", concurrency=32), host_state="OFF")
    assert (b200.k_bar_kind, b200.k_bar_published_source_id) == ("published", row.source)
    swe = predict(llama, get_gpu("B200"), 8, Workload(corpus="swebench", concurrency=32), host_state="OFF")
    swe_h200 = predict(llama, get_gpu("H200"), 1, Workload(corpus="swebench", concurrency=4), host_state="OFF")
    assert swe_h200.k_bar_published_source_id == "suffixdecoding-paper-2025"
    assert swe.k_bar_published_source_id == "suffixdecoding-paper-2025" and swe.k_bar == swe_h200.k_bar
    assert swe.k_bar_host is not None and swe.k_bar_host < swe.k_bar and swe_h200.k_bar_host is None
    assert any("seed host's gain-implied" in x for x in swe.explanation)
    # n-gram takes the published n-gram prior only where suffix's K̄ came from the same publication
    work = Workload(corpus="specbench")
    ng = kp.ngram_kbar_for(work, "instruct", own_prior_ok=False, published_source_id=p.k_bar_published_source_id)
    assert ng is not None and ng.k_bar == pytest.approx(1.6) and row.source in ng.source
    assert (ng.kind, ng.published_source_id) == ("published", row.source)
    blaze = kp.ngram_kbar_for(Workload(corpus="blazedit"), "instruct", own_prior_ok=False, published_source_id=None)
    assert blaze is None  # BlazEdit has an n-gram figure but no suffix one: never priced from two sources


def _evaluated() -> dict:
    from advisor.calibrate import published
    from advisor.paths import data_path
    from advisor.predict.dataset import default_profile_of

    return published.evaluate(data_path("calibration"), default_profile_of())


@pytest.fixture(scope="module")
def evaluated() -> dict:
    """Evaluation (c) on the shipped rows, once per module (a few seconds)."""
    return _evaluated()


def _groups() -> dict:
    import yaml

    from advisor.calibrate import published
    from advisor.paths import data_path

    return yaml.safe_load((data_path("calibration") / published.FOLDER / published.GROUPS_FILE).read_text())


def _teams(v) -> set[str]:
    return {v} if isinstance(v, str) else set(v)


def test_holdout_groups_cover_every_row_and_flag_the_derived_kbar():
    """holdout_groups.yaml (frozen before the evaluation read it) names the team of every gain row and every K̄ row,
    keyed to the rows it describes; the K̄ the product DERIVES (BlazEdit's suffix) is listed as derived, with the teams
    of all its inputs (the n-gram figure's and the suffix/n-gram ratios')."""
    from advisor.calibrate import published
    from advisor.paths import data_path

    doc = _groups()
    rows = published.load(data_path("calibration"))
    g = published.load_groups(data_path("calibration"), rows)  # raises where a row has no group or the data moved
    assert set(g.gain_team) == {(r.file, r.row) for r in rows}
    assert {(p.source, p.corpus, p.method, p.k, p.url) for p in kp.published_kbars()} == set(g.kbar_teams)
    quoted = [k for k in doc["kbar_rows"] if k["origin"] == "quoted"]
    assert len(quoted) == len(kp.published_kbars())
    derived = [k for k in doc["kbar_rows"] if k["origin"] == "derived"]
    assert [(d["corpus"], d["method"]) for d in derived] == [("blazedit", "suffix")]
    got = kp.published_prior("blazedit", "instruct", "suffix")
    assert "DERIVED" in got.source and (got.kind, got.published_source_id) == ("published_derived", derived[0]["source"])
    # its inputs: the n-gram figure of its source, and the ratios of every other source with both methods on a corpus
    inputs = {derived[0]["source"]} | {p.source for p in kp.published_kbars() if f"{p.corpus} ({p.source})" in kp.suffix_over_ngram_ratios()}
    teams_of_source = {k["source"]: _teams(k["team"]) for k in quoted}
    assert set().union(*(teams_of_source[s] for s in inputs)) == _teams(derived[0]["team"])
    # the SuffixDecoding authors' artifact repository and the Snowflake posts and docs are one team (issue 42 (c))
    assert teams_of_source["suffixdecoding-paper-2025"] == {"snowflake"}
    assert {r.source for r in rows if g.gain_team[(r.file, r.row)] == "snowflake"} == {"snowflake-blog-2025", "snowflake-arctic-blog-2025-05"}


def test_evaluation_holds_out_the_rows_own_team(evaluated):
    """Every gain row is priced with a K̄ table that has no row of its own team (nor a K̄ derived from one); the held-out
    K̄ set is exactly the team's K̄ rows, non-empty for every team that has both gain rows and K̄ rows (it was empty for
    every source under leave-one-source-out)."""
    out, doc = evaluated, _groups()
    kbar_teams = {k["source"]: _teams(k["team"]) for k in doc["kbar_rows"] if k["origin"] == "quoted"}
    derived_teams = set().union(*(_teams(k["team"]) for k in doc["kbar_rows"] if k["origin"] == "derived"))
    gain_teams = {g["team"] for g in doc["gain_rows"]}
    assert set(out["teams"]) == gain_teams and out["holdout_unit"] == "team"
    for team in gain_teams:
        assert out["groups"][team]["gain_rows"] == sum(t["team"] == team for t in out["table"]) > 0
        own = sorted(f"{k['corpus']}/{k['method']} [{k['source']}]" for k in doc["kbar_rows"]
                     if k["origin"] == "quoted" and team in _teams(k["team"]))  # fmt: skip
        assert out["published_kbar_excluded"][team] == out["groups"][team]["kbar_rows_held_out"] == own
        if any(team in ts for ts in kbar_teams.values()):
            assert own, team
    assert out["published_kbar_excluded"]["snowflake"]  # the defect: this set was empty
    for t in out["table"]:
        assert t["team"] not in t["kbar_table_teams"]
        used = t["suffix_k_bar_source"] + t.get("ngram_k_bar_source", "")
        for src, teams in kbar_teams.items():
            if t["team"] in teams:
                assert f"[{src}]" not in used, (t["team"], src)
        if t["team"] in derived_teams:
            assert "DERIVED" not in used and t["kbar_kind"] != "derived"
    # in sample the same rows are priced from their own team's figures (what the product gives)
    assert any(t["in_sample_kbar_kind"] != "none" and t["team"] == "snowflake" for t in out["table"])
    assert out["in_sample"]["label"] == "in sample (same-team K̄)"


def test_published_figures_are_computed_from_the_table(evaluated):
    """Each score is the median / share over the table's rows; the baselines are the median gain of the method's other
    rows and always plain (gain 1), computed from the published values; the derived-K̄ rows are scored apart."""
    import statistics

    from advisor.calibrate import published

    out = evaluated
    base = {}
    for t in out["table"]:
        others = [o["published"] for o in out["table"] if o["method"] == t["method"] and o is not t]
        base[(t["file"], t["row"])] = (abs(math.log(statistics.median(others) / t["published"])), abs(math.log(t["published"])))
    for prefix, by_method, by_kind in (("", out["by_method"], out["by_kbar_kind"]),
                                       ("in_sample_", out["in_sample"]["by_method"], out["in_sample"]["by_kbar_kind"])):  # fmt: skip
        kinds = {k: v for k, v in by_kind.items() if k != "note"}
        assert set(kinds) <= set(published.KBAR_KINDS) and "derived" in kinds
        for scope, got in [("all", by_method)] + [(k, v) for k, v in kinds.items()]:
            for m, v in got.items():
                ts = [t for t in out["table"] if t["method"] == m and scope in ("all", t["in_sample_kbar_kind"])]
                assert v["rows"] == len(ts) > 0
                assert v["median_abs_log"] == pytest.approx(statistics.median(t[prefix + "abs_log_error"] for t in ts), abs=1e-4)
                assert v["coverage_90"] == pytest.approx(sum(t[prefix + "inside_90"] for t in ts) / len(ts), abs=1e-4)
                assert v["median_band_ratio"] == pytest.approx(statistics.median(t[prefix + "high"] / t[prefix + "low"] for t in ts), abs=0.01)
                for i, name in enumerate(("median_of_other_rows", "always_plain")):
                    b = statistics.median(base[(t["file"], t["row"])][i] for t in ts)
                    assert v["baselines"][name]["median_abs_log"] == pytest.approx(b, abs=1e-4)
                    assert v["baselines"][name]["beaten"] == (v["median_abs_log"] < b)
        assert sum(v["rows"] for k in kinds.values() for v in k.values()) == len(out["table"])
    for t in out["table"]:
        assert t["abs_log_error"] == pytest.approx(abs(math.log(t["predicted"] / t["published"])), abs=1e-3)
        assert t["inside_90"] == (t["low"] <= t["published"] <= t["high"])


def test_published_headlines_as_shipped(evaluated):
    """The first-pass figures held out by team (issue 42 (c): suffix 0.63 / 55 %, n-gram 0.46 / 15 %) and in sample,
    pinned to +-0.01: a change of either is a reviewed change, not a side effect. Held out, suffix and n-gram do NOT beat
    the median of the other rows (n-gram not even always plain); the test states that rather than hiding it."""
    held, ins = evaluated["by_method"], evaluated["in_sample"]["by_method"]
    want = {"suffix": (0.626, 0.545, 0.263, 1.0), "ngram": (0.461, 0.154, 0.194, 0.846), "suffix_over_ngram": (0.116, 0.9, 0.217, 1.0)}
    for m, (h, hc, i, ic) in want.items():
        assert held[m]["median_abs_log"] == pytest.approx(h, abs=0.01) and held[m]["coverage_90"] == pytest.approx(hc, abs=0.01)
        assert ins[m]["median_abs_log"] == pytest.approx(i, abs=0.01) and ins[m]["coverage_90"] == pytest.approx(ic, abs=0.01)
    assert not held["suffix"]["baselines"]["median_of_other_rows"]["beaten"] and held["suffix"]["baselines"]["always_plain"]["beaten"]
    assert not held["ngram"]["baselines"]["median_of_other_rows"]["beaten"] and not held["ngram"]["baselines"]["always_plain"]["beaten"]
    assert ins["suffix"]["baselines"]["median_of_other_rows"]["beaten"] and ins["ngram"]["baselines"]["median_of_other_rows"]["beaten"]


def test_a_same_team_kbar_is_used_by_the_product_but_not_by_the_evaluation(monkeypatch, tmp_path):
    """A K̄ figure of the gain rows' own team is what the product takes and what evaluation (c) leaves out; the same
    figure of another team is used; a K̄ row the frozen groups file does not name stops the evaluation."""
    import shutil

    from advisor.calibrate import published
    from advisor.domain.workload import Workload
    from advisor.errors import DataError
    from advisor.hardware.gpus import get_gpu
    from advisor.paths import data_path
    from advisor.predict.api import predict
    from advisor.predict.dataset import default_profile_of

    url = "https://github.com/sfc-gh-goliaro/suffix-decoding-artifact/blob/test/blazedit.py"
    extra = kp.PublishedKbar(source="test-source", url=url, quote="3.5", corpus="blazedit", method="suffix", k=32,
                             k_bar=3.5, model="m", gpu="H200", assumed="test row")  # fmt: skip
    table = (*kp.published_kbars(), extra)
    monkeypatch.setattr(kp, "published_kbars", lambda: table)
    llama = default_profile_of()(LLAMA_8B)
    product = predict(llama, get_gpu("H200"), 1, Workload(corpus="blazedit", concurrency=4), host_state="OFF")
    assert product.k_bar == pytest.approx(3.5)  # the product path takes it
    with pytest.raises(DataError, match="no group"):
        published.evaluate(data_path("calibration"), default_profile_of())
    shutil.copytree(data_path("calibration") / published.FOLDER, tmp_path / published.FOLDER)
    groups = tmp_path / published.FOLDER / published.GROUPS_FILE
    text = groups.read_text()

    def blaze(team: str) -> list[dict]:
        groups.write_text(text.replace("gain_rows:", f"  - {{row: 99, source: test-source, corpus: blazedit, method: suffix, k: 32, "
                                                      f"team: {team}, artifact: test, origin: quoted, url: \"{url}\"}}\ngain_rows:", 1))
        out = published.evaluate(tmp_path, default_profile_of())
        return [t for t in out["table"] if t["team"] == "snowflake" and t["corpus"] == "blazedit" and t["method"] == "suffix"]

    assert all(t["suffix_k_bar"] != pytest.approx(3.5) and "[test-source]" not in t["suffix_k_bar_source"] for t in blaze("snowflake"))
    other = blaze("ekagra-ranjan")  # another team's figure prices the row
    assert other and all(t["suffix_k_bar"] == pytest.approx(3.5) and "[test-source]" in t["suffix_k_bar_source"] for t in other)


def test_calibrate_evaluate_prints_held_out_beside_in_sample(evaluated, capsys):
    from advisor.cli.calibrate import _print_published

    _print_published(evaluated)
    text = capsys.readouterr().out
    assert "held out by team" in text and "in sample (same-team K̄)" in text
    assert "median band x" in text and "other rows' median" in text and "always plain" in text
    assert "derived  suffix" in text and "holdout_groups.yaml" in text


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
    # evaluation (c) held out by team: without the SuffixDecoding authors' figures the spread is what is left
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
    assert "DERIVED" in got.source and (got.kind, got.published_source_id) == ("published_derived", "vllm-pr-24344")
    assert kp.published_prior("blazedit", "base", "suffix") is None  # published figures are instruct models'
    # without the n-gram figure (leave its source out) there is nothing to derive from; nor without the SuffixDecoding
    # authors' figures (held out by team, evaluation (c)): two ratios are left (own outputs), the derivation needs three
    assert kp.published_prior("blazedit", "instruct", "suffix", [r for r in kp.published_kbars() if r.source != ng.source]) is None
    assert kp.published_prior("blazedit", "instruct", "suffix", [r for r in kp.published_kbars() if r.source != "suffixdecoding-paper-2025"]) is None
    p = default_profile_of()(LLAMA_8B)
    blaze = predict(p, get_gpu("H200"), 1, Workload(corpus="blazedit", concurrency=1), host_state="OFF")
    assert blaze.k_bar == pytest.approx(got.k_bar, abs=1e-3) and "UNSEEN CORPUS" not in blaze.k_bar_source
    work = Workload(corpus="blazedit", concurrency=1)
    assert (blaze.k_bar_kind, blaze.k_bar_published_source_id) == ("published_derived", "vllm-pr-24344")
    n = kp.ngram_kbar_for(work, "instruct", own_prior_ok=False, published_source_id=blaze.k_bar_published_source_id)
    assert n is not None and n.k_bar == pytest.approx(ng.k_bar)
