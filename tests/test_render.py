"""Rendered launch.sh / vllm.service / vllm.env: golden files, flag contract, hostile inputs, and the
script actually run (bash) against a fake vllm that reports the argv and env it received."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from advisor.errors import UsageError
from advisor.domain.decision import Decision, SuffixParams
from advisor.render.files import render_files
from advisor.domain.decision import DSA_ENV
from advisor.render.write import write_files
from tests.render_helpers.fakebin import make_fake

GOLDEN = Path(__file__).parent / "golden"
VLLM = "/opt/vllm/bin/vllm"  # absolute: the unit does not depend on what is on this machine's PATH
BASE_ENV = {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True", "VLLM_PLUGINS": "", "ARCTIC_INFERENCE_ENABLED": "0"}
CASES = {
    "llama70b-suffix": ("meta-llama/Llama-3.1-70B-Instruct", Decision(
        speculative_method="suffix", num_speculative_tokens=32, gpu_memory_utilization=0.85,
        tensor_parallel_size=8, max_model_len=16384, env=BASE_ENV), "disabled"),
    "r1-vanilla": ("deepseek-ai/DeepSeek-R1", Decision(
        gpu_memory_utilization=0.85, tensor_parallel_size=8, max_model_len=16384, env=BASE_ENV), "either"),
    "distill32b-dsa": ("deepseek-ai/DeepSeek-R1-Distill-Qwen-32B", Decision(
        speculative_method="suffix", num_speculative_tokens=32, gpu_memory_utilization=0.85, tensor_parallel_size=8,
        max_model_len=16384, dsa_env=True, env={**BASE_ENV, **DSA_ENV}), "enabled"),
    "405b-k16-custom-suffix": ("meta-llama/Llama-3.1-405B-Instruct-FP8", Decision(
        speculative_method="suffix", num_speculative_tokens=16, gpu_memory_utilization=0.85, tensor_parallel_size=8,
        max_model_len=16384, max_num_seqs=128, cudagraph_mode="PIECEWISE", env=BASE_ENV,
        suffix=SuffixParams(max_tree_depth=32, min_token_prob=0.2)), "disabled"),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(CASES))
def test_golden_files(case):
    model, decision, dsa = CASES[case]
    files = render_files(model, decision, host_dsa_queues=dsa, vllm_bin=VLLM)
    folder = GOLDEN / case
    if os.environ.get("REGEN_GOLDEN"):
        folder.mkdir(parents=True, exist_ok=True)
        for name, text in files.items():
            (folder / name).write_text(text)
    for name, text in files.items():
        assert text == (folder / name).read_text(), f"{case}/{name} differs from the golden file (REGEN_GOLDEN=1 to update after review)"


def _exec_argv(launch: str) -> list[str]:
    line = next(ln for ln in launch.splitlines() if ln.startswith("exec "))
    return shlex.split(line)


@pytest.mark.parametrize("case", sorted(CASES))
def test_contract_every_flag_and_value(case):
    model, d, _ = CASES[case]
    argv = _exec_argv(render_files(model, d, vllm_bin=VLLM)["launch.sh"])
    assert argv[:4] == ["exec", "${VLLM_PATH}", "serve", model] and argv[-1] == "$@"
    flags = argv[4:-1]
    pairs = dict(zip(flags[::2], flags[1::2]))
    assert len(flags) % 2 == 0 and len(pairs) == len(flags) // 2  # no flag repeated, every flag has a value
    assert (pairs.pop("--host"), pairs.pop("--port")) == ("127.0.0.1", "8000")
    assert pairs.pop("--tensor-parallel-size") == str(d.tensor_parallel_size)
    assert float(pairs.pop("--gpu-memory-utilization")) == d.gpu_memory_utilization
    assert int(pairs.pop("--max-model-len")) == d.max_model_len
    assert json.loads(pairs.pop("--compilation-config")) == {"cudagraph_mode": d.cudagraph_mode}
    if d.max_num_seqs:
        assert int(pairs.pop("--max-num-seqs")) == d.max_num_seqs
    if d.speculative_method:
        spec = json.loads(pairs.pop("--speculative-config"))
        assert spec["method"] == "suffix" and spec["num_speculative_tokens"] == d.num_speculative_tokens
        for name, value in d.suffix.model_dump().items():
            if value != SuffixParams().model_dump()[name]:
                assert spec[f"suffix_decoding_{name}"] == value
    assert pairs == {}, f"unexpected flags {pairs}"


def test_env_value_with_newline_is_refused():
    d = CASES["llama70b-suffix"][1].model_copy(update={"env": {"VLLM_X": "a\nb"}})
    with pytest.raises(UsageError, match="newline"):
        render_files("m/x", d)


def test_bad_env_name_is_refused():
    d = CASES["llama70b-suffix"][1].model_copy(update={"env": {"VLLM_X; rm": "a"}})
    with pytest.raises(UsageError, match="not valid"):
        render_files("m/x", d)


@pytest.mark.skipif(not shutil.which("shellcheck"), reason="shellcheck not installed (scripts/test.sh installs it when apt is available)")
@pytest.mark.parametrize("case", [*sorted(CASES), "multinode"])
def test_shellcheck_clean(tmp_path, case):
    model, d, dsa = CASES[case] if case in CASES else ("m/x", Decision(tensor_parallel_size=16), "either")
    written = write_files(tmp_path, render_files(model, d, host_dsa_queues=dsa))
    scripts = [str(p) for p in written if p.suffix == ".sh"]
    assert len(scripts) == (2 if case == "multinode" else 1)
    proc = subprocess.run(["shellcheck", "-S", "warning", *scripts], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout


def _preflight(tmp_path, gpus: int | None, **extra_env: str):
    out = tmp_path / "out"
    write_files(out, render_files("m/x", CASES["r1-vanilla"][1].model_copy(update={"tensor_parallel_size": 8}), host_dsa_queues="disabled"))
    bindir = tmp_path / "bin"
    make_fake(bindir)
    if gpus is not None:
        smi = bindir / "nvidia-smi"
        smi.write_text("#!/bin/sh\n" + "".join(f"echo 'GPU {i}: NVIDIA B200 (UUID: GPU-{i})'\n" for i in range(gpus)))
        smi.chmod(0o755)
    env = {"PATH": f"{bindir}:/usr/bin:/bin", "FAKE_OUT": str(tmp_path / "r.json"), "HOME": str(tmp_path), **extra_env}
    return subprocess.run(["bash", str(out / "launch.sh")], env=env, capture_output=True, text=True, timeout=30)


def test_preflight_fails_clearly_without_gpus(tmp_path):
    proc = _preflight(tmp_path, None)
    assert proc.returncode == 1 and "nvidia-smi not found" in proc.stderr


def test_preflight_fails_when_too_few_gpus(tmp_path):
    proc = _preflight(tmp_path, 2)
    assert proc.returncode == 1 and "need 8 GPU(s)" in proc.stderr and "2 on this host" in proc.stderr


@pytest.mark.parametrize(("visible", "count"), [
    ("0,1,2,3", 4), ("", 0),
    # CUDA's list rules, as advisor host counts them (tests/test_host_visible.py)
    ("-1", 0), ("1,9,2", 1), ("2,2", 1), ("3,x,4", 1), ("6, 7", 2), ("GPU-8f3c,GPU-11aa", 2),
])
def test_preflight_counts_only_visible_gpus(tmp_path, visible, count):
    proc = _preflight(tmp_path, 8, CUDA_VISIBLE_DEVICES=visible)
    assert proc.returncode == 1 and f"need 8 GPU(s) for tensor_parallel_size, {count} visible" in proc.stderr
    assert not (tmp_path / "r.json").exists()


def test_preflight_passes_with_enough_visible_gpus(tmp_path):
    proc = _preflight(tmp_path, 8, CUDA_VISIBLE_DEVICES="0,1,2,3,4,5,6,7")
    assert proc.returncode == 0, proc.stderr


def test_preflight_passes_and_reports_dsa(tmp_path):
    proc = _preflight(tmp_path, 8)
    assert proc.returncode == 0, proc.stderr
    assert "DSA work queues enabled:" in proc.stderr and (tmp_path / "r.json").exists()


def test_write_refuses_to_overwrite(tmp_path):
    files = render_files("m/x", CASES["r1-vanilla"][1])
    write_files(tmp_path, files)
    with pytest.raises(UsageError, match="--force"):
        write_files(tmp_path, files)
    assert write_files(tmp_path, files, force=True)
