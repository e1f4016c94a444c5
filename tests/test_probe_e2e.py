"""``advisor probe`` against real vLLM 0.32 (CPU) on 127.0.0.1 with a tiny random Llama.

Needs the venv from scripts/setup_vllm_venv.sh (skipped without it). The model (hidden 128,
2 layers, 4 heads, 2 KV heads, head_dim 32) and its locally trained tokenizer are built once into
.cache/tiny-llama (or $ADVISOR_TINY_MODEL_DIR). One campaign of vanilla, suffix:8, ngram:4 and a
configuration vLLM refuses (max_model_len beyond the model's): interrupted with SIGINT after the
first record, rerun to resume, rerun again to find nothing left. ~3 minutes on 2 cores.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.vllm_helpers.procs import pids_where, sigint_default, stored_configs

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[1]
VENV = Path(os.environ.get("ADVISOR_VLLM_VENV", ROOT / ".cache" / "vllm-venv"))
MODEL_DIR = Path(os.environ.get("ADVISOR_TINY_MODEL_DIR", ROOT / ".cache" / "tiny-llama"))
CONFIGS = "vanilla,suffix:8,ngram:4,vanilla@max_model_len=4096"


@pytest.fixture(scope="module")
def tiny_model() -> Path:
    python = VENV / "bin" / "python"
    if not python.exists():
        pytest.skip(f"no vLLM test venv at {VENV}: run scripts/setup_vllm_venv.sh")
    subprocess.run([str(python), str(ROOT / "tests" / "vllm_helpers" / "make_tiny_llama.py"), str(MODEL_DIR)],
                   check=True, capture_output=True, timeout=300)  # fmt: skip
    return MODEL_DIR


def _records(db: Path) -> list[str]:
    return stored_configs(db)


def _marked_processes(marker: str) -> list[int]:
    """Processes that carry ``marker`` in their environment (vLLM and its engine children inherit it)."""
    needle = f"ADVISOR_E2E_MARKER={marker}".encode()
    return pids_where(lambda proc: needle in (proc / "environ").read_bytes().split(b"\0"))


def _stop(proc: subprocess.Popen) -> None:
    """Whatever an assertion left running: interrupt the advisor (it stops its server), then kill it
    (its server follows through PR_SET_PDEATHSIG)."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()


def test_probe_campaign_on_real_vllm(tiny_model: Path, tmp_path: Path) -> None:
    marker = uuid.uuid4().hex
    (tmp_path / "absent.toml").write_text("")  # an empty settings file: no other advisor.toml is read
    env = {
        **os.environ, "PYTHONPATH": str(ROOT), "ADVISOR_CONFIG": str(tmp_path / "absent.toml"),
        "VLLM_CPU_KVCACHE_SPACE": "1", "ADVISOR_E2E_MARKER": marker,
    }  # fmt: skip
    cmd = [
        sys.executable, "-m", "advisor", "--data-dir", str(tmp_path / "data"), "probe", str(tiny_model),
        "--corpus", "humaneval", "--configs", CONFIGS, "--requests", "24", "--duration", "60",
        "--concurrency", "4", "--max-tokens", "48", "--max-model-len", "512", "--boot-timeout", "240",
        "--server-cmd", f"{VENV / 'bin' / 'python'} -m vllm.entrypoints.openai.api_server",
        "--extra-args", "--dtype float32 --enforce-eager",
    ]  # fmt: skip
    db = tmp_path / "data" / "probes.sqlite"

    # 1. Interrupt after the first record: it stays, the server being started is stopped.
    t0 = time.monotonic()
    first = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             preexec_fn=sigint_default)
    try:
        while not _records(db) and first.poll() is None and time.monotonic() - t0 < 400:
            time.sleep(0.5)
        t_first = time.monotonic() - t0
        assert _records(db) == ["vanilla"], first.stderr.read() if first.poll() is not None else "no record in time"
        time.sleep(2.0)  # the next configuration's server is booting
        first.send_signal(signal.SIGINT)
        _, err = first.communicate(timeout=120)
    finally:
        _stop(first)
    assert first.returncode == 130, err
    assert "interrupted:" in err and "rerun the same command to resume" in err
    kept = _records(db)
    assert kept[0] == "vanilla" and len(kept) <= 2
    deadline = time.monotonic() + 30
    while _marked_processes(marker) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert _marked_processes(marker) == [], "vLLM processes left behind after Ctrl-C"

    # 2. Rerun: resumes, probes the rest; the refused configuration is a recorded failed boot.
    t1 = time.monotonic()
    rerun = subprocess.run([*cmd, "--json"], env=env, capture_output=True, text=True, timeout=800)
    t_rerun = time.monotonic() - t1
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert "resuming campaign" in rerun.stderr and "already done: vanilla" in rerun.stderr
    out = json.loads(rerun.stdout)
    assert set(out["probed"]) | set(kept) == set(CONFIGS.split(","))
    recs = {r["config"]: r for r in out["records"]}
    van, suf, ngr, bad = (recs[c] for c in CONFIGS.split(","))
    for r in (van, suf, ngr):
        assert r["outcome"] == "ok", r
        assert r["vllm_version"] == "0.32.0"
        assert r["requests"] == 24 and r["requests_failed"] == 0
        assert r["output_tokens"] > 0 and r["throughput_tok_s"] > 0
        assert r["ttft_ms_p50"] is not None and r["boot_s"] > 0
    assert van["tokens_per_step"] == 1.0 and van["spec_drafts"] is None
    for r in (suf, ngr):  # real spec-decode counters from /metrics
        assert r["spec_drafts"] > 0 and r["spec_draft_tokens"] >= r["spec_drafts"]
        assert 0 < r["spec_accepted_tokens"] <= r["spec_draft_tokens"]
        assert r["mean_acceptance_length"] > 1.0 and r["tokens_per_step"] > 1.0
        assert r["implied_r"] == pytest.approx(r["tokens_per_step"] / (r["throughput_tok_s"] / van["throughput_tok_s"]))
        assert len(r["acceptance_per_position"]) == r["num_speculative_tokens"]
    assert bad["outcome"] == "boot_failed"
    assert bad["failure"].startswith("max_model_len_exceeds_model: ")
    assert Path(bad["log_path"]).is_file()

    # 3. Once more: nothing left, no server started.
    t2 = time.monotonic()
    done = subprocess.run([*cmd, "--json"], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["probed"] == [] and "nothing left to probe" in done.stderr
    t_done = time.monotonic() - t2
    print(f"\n[e2e timings] first run to vanilla record {t_first:.0f}s; rerun {t_rerun:.0f}s; no-op rerun {t_done:.1f}s")
    for r in (van, suf, ngr):
        print(f"[e2e] {r['config']}: {r['throughput_tok_s']:.1f} tok/s, K̄ {r['tokens_per_step']:.2f}, "
              f"acceptance length {r['mean_acceptance_length'] or 1:.2f}, R {r['implied_r'] or 1:.2f}, boot {r['boot_s']:.0f}s")  # fmt: skip
