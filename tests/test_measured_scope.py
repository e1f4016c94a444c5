"""A probe measurement decides only for the deployment it was taken at (host, GPU, TP, concurrency,
no overrides); near misses are reported and not used to decide."""

from __future__ import annotations

import json

from advisor.plan.predictor import Scope, measured_gain
from advisor.probe.record import ProbeRecord

MODEL = "meta-llama/Llama-3.1-8B-Instruct"


def _pair(cid, *, gpu=None, tp=1, concurrency=32, fp="fp-cpu-box", suffix="suffix:32", vanilla="vanilla", slow=True):
    base = dict(campaign_id=cid, model=MODEL, gpu=gpu, gpus=tp if gpu else 0, tensor_parallel_size=tp, corpus="sharegpt",
                concurrency=concurrency, outcome="ok", started_at="2026-11-29T10:00:00Z", host_fingerprint=fp)  # fmt: skip
    return [ProbeRecord(**base, config=vanilla, throughput_tok_s=4000.0),
            ProbeRecord(**base, config=suffix, throughput_tok_s=2000.0 if slow else 6000.0, tokens_per_step=1.2)]


def test_gpu_less_tp1_probe_does_not_decide_a_b200_tp8_recommendation(run_cli):
    from advisor.settings import load_settings
    from advisor.probe.store import open_store

    with open_store(load_settings()) as store:
        for r in _pair("cpu-run"):
            store.insert(r)
    code, out, err = run_cli("recommend", MODEL, "--gpu", "B200", "--gpus", "8", "--corpus", "sharegpt",
                             "--concurrency", "256", "--json")  # fmt: skip
    assert code == 0, err
    rec = json.loads(out)
    p = rec["prediction"]
    assert p["measured"] is None
    (near,) = p["measured_near"]
    assert near["campaign"] == "cpu-run" and near["gain"] == 0.5
    # named against the launched layout (one replica at its TP and per-replica concurrency)
    tp, n = rec["decision"]["tensor_parallel_size"], rec["prediction"]["running_per_replica"]
    want = {"GPU none (CPU) vs B200"} | ({f"TP 1 vs {tp}"} if tp != 1 else set()) | ({f"concurrency 32 vs {n}"} if n != 32 else set())
    assert want <= set(near["differs"])
    assert not any("measurement outranks the prediction" in t for t in rec["trace"])  # the 0.5x CPU run did not decide
    assert any("cpu-run" in t and "not used to decide (nor fitted" in t for t in rec["trace"])


def test_exact_scope_decides_and_each_difference_is_named():
    scope = Scope(model=MODEL, corpus="sharegpt", k=32, gpu="H200", tp=8, concurrency=64)
    good = _pair("exact", gpu="H200", tp=8, concurrency=64, fp="here")
    exact, near = measured_gain(good, scope, lambda: "here")
    assert exact["runs"] == 1 and exact["gain"] == 0.5 and near == []
    cases = {
        "another host (fingerprint differs)": _pair("a", gpu="H200", tp=8, concurrency=64, fp="elsewhere"),
        "TP 4 vs 8": _pair("b", gpu="H200", tp=4, concurrency=64, fp="here"),
        "concurrency 32 vs 64": _pair("c", gpu="H200", tp=8, concurrency=32, fp="here"),
        "GPU H100 vs H200": _pair("d", gpu="H100", tp=8, concurrency=64, fp="here"),
        "overrides gmu=0.8": _pair("e", gpu="H200", tp=8, concurrency=64, fp="here", suffix="suffix:32@gmu=0.8",
                                   vanilla="vanilla@gmu=0.8"),
    }
    for why, recs in cases.items():
        exact, near = measured_gain(recs, scope, lambda: "here")
        assert exact is None and near[0]["differs"] == [why], why


def test_fingerprint_is_not_computed_without_a_candidate():
    calls = []
    scope = Scope(model="other/model", corpus="sharegpt", k=32, gpu="H200", tp=8, concurrency=64)
    assert measured_gain(_pair("x"), scope, lambda: calls.append(1)) == (None, [])
    assert calls == []


def test_gpu_less_probes_are_not_fitted_as_b200_data():
    from advisor.predict.dataset import probe_observations

    assert probe_observations(_pair("cpu-run")) == []
    (obs,) = probe_observations(_pair("gpu-run", gpu="H200", tp=8))
    assert obs.gpu == "H200" and obs.tp == 8 and obs.gain == 0.5
