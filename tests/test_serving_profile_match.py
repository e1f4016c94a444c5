"""A user on the host class of a shipped ``exact`` serving profile (same GPU, CPU model and vLLM line) gets that
profile from ``recommend``, as evaluation (b) prices that host's probes (issue 42): the CLI reads this machine's CPU
model whenever a profile of the GPU could match it, not only when the user probed that GPU."""

from __future__ import annotations

import json

from advisor.predict import host_profile as hp

SERVING = "h200-vllm0.26.0-serving"
L8 = "meta-llama/Llama-3.1-8B-Instruct"
ARGS = ("recommend", L8, "--gpu", "H200", "--gpus", "1", "--vllm-version", "0.26", "--spec", "suffix", "--json")


def _fake_cpu(monkeypatch, model: str) -> None:
    import advisor.hardware.host as host

    real = host.collect_host

    def collect(*a, **kw):
        fp = real(*a, **kw)
        return fp.model_copy(update={"cpu": fp.cpu.model_copy(update={"model": model})})

    monkeypatch.setattr(host, "collect_host", collect)


def test_the_serving_host_class_gets_its_exact_profile(run_cli, monkeypatch):
    _fake_cpu(monkeypatch, hp.get(SERVING).cpu_model)
    code, out, err = run_cli(*ARGS)
    assert code == 0, err
    p = json.loads(out)["prediction"]
    assert (p["host_profile"], p["host_match"]) == (SERVING, "exact")


def test_another_cpu_keeps_the_gpu_and_vllm_match(run_cli, monkeypatch):
    _fake_cpu(monkeypatch, "AMD EPYC 9654 96-Core Processor")
    code, out, err = run_cli(*ARGS)
    assert code == 0, err
    p = json.loads(out)["prediction"]
    assert p["host_profile"] != SERVING and p["host_match"] == "gpu+vllm"


def test_no_profile_of_the_gpu_reads_no_cpu(monkeypatch, tmp_path):
    from advisor.cli.wiring import StorePredictor
    from advisor.settings import load_settings

    import advisor.hardware.host as host

    def boom(*a, **kw):
        raise AssertionError("the CPU is read only when a profile of the GPU could match it")

    monkeypatch.setattr(host, "collect_host", boom)
    assert StorePredictor(load_settings()).cpu_model("MI300X") is None
