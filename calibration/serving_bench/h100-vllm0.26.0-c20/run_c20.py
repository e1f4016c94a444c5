#!/usr/bin/env python3
"""Campaign 20 on the GPU machine (one H100, or the H200 fallback set; vLLM 0.26.0 in /tmp/site, dummy weights).

From the repo root, after ../shared/device-vllm's setup.sh:

    PYTHONPATH=/tmp/site VLLM_USE_FLASHINFER_SAMPLER=0 python3 calibration/serving_bench/h100-vllm0.26.0-c20/run_c20.py \
        --deadline-s 1200 --out /root/c20

Picks predictions.json by the GPU nvidia-smi names (h100-… or h200-…-c20). For each boot answer, in the file's order:
a model directory /root/models/<name> from the catalog's config.json plus a word-level tokenizer of its vocabulary
(../shared/device-vllm/device/mktok.py, carried as /root/stash/run/mktok.py), the server started with the answer's
own rendered Launch flags plus ``--load-format dummy --host 127.0.0.1 --port 8000`` and its env, /health awaited,
then each answer riding on it runs its own emitted benchmark (``benchmark.commands[primary].argv``: ``vllm`` is
``python3 -m vllm.entrypoints.cli.main``, the model the local directory, ``--tokenizer`` it, results to --out),
server stopped, next. Everything runs until the deadline; what it does not reach is logged as not run.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]


def log(out: Path, msg: str) -> None:
    line = f"=== {time.strftime('%H:%M:%S')} {msg}"
    print(line, flush=True)
    with (out / "boots.txt").open("a") as fh:
        fh.write(line + "\n")


def model_dir(model: str) -> Path:
    d = Path("/root/models") / model.split("/")[-1]
    if not (d / "tokenizer.json").is_file():
        d.mkdir(parents=True, exist_ok=True)
        (d / "config.json").write_bytes((ROOT / "catalog/models" / model / "config.json").read_bytes())
        subprocess.run([sys.executable, "/root/stash/run/mktok.py", str(d)], check=True)
    return d


def healthy(deadline: float, proc: subprocess.Popen) -> bool:
    while time.time() < deadline and proc.poll() is None:
        try:
            with urllib.request.urlopen("http://127.0.0.1:8000/health", timeout=3) as r:
                if r.status == 200:
                    return True
        except OSError:
            pass
        time.sleep(3)
    return False


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--deadline-s", type=float, default=1200)
    ap.add_argument("--out", type=Path, default=Path("/root/c20"))
    args = ap.parse_args()
    deadline = time.time() + args.deadline_s
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    gpu = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True).stdout
    folder = HERE.parent / ("h200-vllm0.26.0-c20" if "H200" in gpu else "h100-vllm0.26.0-c20")
    pre = json.loads((folder / "predictions.json").read_text())
    log(out, f"{gpu.strip()}: {folder.name}, advisor {pre['advisor_commit']}")
    answers = pre["answers"]
    for boot in [a for a in answers if a["role"] == "boot"]:
        riders = [a for a in answers if a["boot"] == boot["id"]]
        if deadline - time.time() < 240:
            log(out, f"NOT RUN {boot['id']} and its riders: {deadline - time.time():.0f}s left")
            continue
        d = model_dir(boot["model"])
        flags = shlex.split(boot["boot_launch"])
        assert flags[:3] == ["vllm", "serve", boot["model"]], flags[:3]
        env = dict(os.environ)
        env.update(dict(kv.split("=", 1) for kv in shlex.split(boot["launch_env"].removeprefix("env:").strip())))
        cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(d), "--load-format", "dummy",
               "--host", "127.0.0.1", "--port", "8000", *flags[3:]]  # fmt: skip
        log(out, f"boot {boot['id']}: {shlex.join(cmd)}")
        t0 = time.time()
        with (out / f"{boot['id']}.server.log").open("w") as fh:
            proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        up = healthy(deadline, proc)
        log(out, f"{boot['id']} up={up} boot_s={time.time() - t0:.0f}")
        for a in riders if up else []:
            left = deadline - time.time()
            if left < 60:
                log(out, f"NOT RUN bench {a['id']}: {left:.0f}s left")
                continue
            argv = list(a["bench_argv"])
            assert argv[:3] == ["vllm", "bench", "serve"], argv[:3]
            argv[argv.index("--model") + 1] = str(d)
            argv[argv.index("--result-dir") + 1] = str(out)
            argv[argv.index("--result-filename") + 1] = f"{a['id']}.json"
            argv[argv.index("--base-url") + 1] = "http://127.0.0.1:8000"
            bench = [sys.executable, "-m", "vllm.entrypoints.cli.main", *argv[1:], "--tokenizer", str(d)]
            log(out, f"bench {a['id']} ({a['pattern']} {a['load']}, {a['num_prompts']} prompts; server max_num_seqs "
                     f"{a['boot_max_num_seqs']}, answer's {a['max_num_seqs']})")  # fmt: skip
            with (out / f"{a['id']}.bench.log").open("w") as fh:
                try:
                    rc = subprocess.run(bench, stdout=fh, stderr=subprocess.STDOUT, timeout=left).returncode
                except subprocess.TimeoutExpired:
                    rc = "timeout"
            log(out, f"bench {a['id']} rc={rc}")
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=20)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(proc.pid, signal.SIGKILL)
        time.sleep(3)
    log(out, "campaign done")
    (out.parent / "c20.done").touch()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
