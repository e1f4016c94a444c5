"""The defects of issue 14, one test each: --vllm-bin injection, option-like or empty program
values, secrets (vllm.env 0600, every env variable carried, none in the unit or script),
all-or-nothing writes (non-regular targets, a rename failing half-way), and launch.sh's
install checks (vllm present; Arctic Inference importable for suffix decoding)."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from advisor.errors import OutputError, UsageError
from advisor.hardware.host import save_host
from advisor.domain.decision import Decision
from advisor.render.files import render_files, render_target
from advisor.render.target import make_target
from advisor.render.write import write_files
from tests.render_helpers import unit as sd
from tests.render_helpers.fakebin import RECORDER, make_fake, which_in

PLAIN = Decision(gpu_memory_utilization=0.85, env={"VLLM_PLUGINS": ""})
SUFFIX = Decision(speculative_method="suffix", num_speculative_tokens=16, env={"VLLM_PLUGINS": "arctic_inference"})
VLLM_VENV = Path(os.environ.get("ADVISOR_VLLM_VENV", Path(__file__).resolve().parents[1] / ".cache" / "vllm-venv"))  # as test_vllm_contract


def _launch(tmp_path: Path, files: dict[str, str], bindir: Path, **env: str) -> subprocess.CompletedProcess:
    out = tmp_path / "out"
    write_files(out, files, force=True)
    base = {"PATH": f"{bindir}:/usr/bin:/bin", "ADVISOR_SKIP_PREFLIGHT": "1", "FAKE_OUT": str(tmp_path / "report.json"),
            "HOME": str(tmp_path)}  # fmt: skip
    return subprocess.run(["bash", str(out / "launch.sh")], cwd=tmp_path, env={**base, **env}, capture_output=True,
                          text=True, timeout=60)  # fmt: skip


PAYLOADS = ['x}"; touch PWNED; : "', "vllm$(touch PWNED)", "`touch PWNED`", 'a"b', "c'd", "trailing\\"]


@pytest.mark.parametrize("payload", PAYLOADS)
def test_vllm_bin_payloads_from_the_issue_run_nothing(tmp_path, payload):
    """The issue's payloads as launch.sh's default program (before the fix: `touch PWNED` ran, or
    the script did not parse) and as a VLLM_BIN override at run time: the program really named
    like that is what runs, with the intended argv."""
    bindir = tmp_path / "bin"
    make_fake(bindir, payload)
    target = make_target("m/x", PLAIN, vllm_bin="vllm", which=lambda _: None).model_copy(update={"vllm_bin": payload})
    for files, env in ((render_target(target, PLAIN), {}), (render_files("m/x", PLAIN, which=lambda _: None), {"VLLM_BIN": payload})):
        (tmp_path / "report.json").unlink(missing_ok=True)
        proc = _launch(tmp_path, files, bindir, **env)
        assert proc.returncode == 0, proc.stderr
        assert json.loads((tmp_path / "report.json").read_text())["argv"][:2] == ["serve", "m/x"]
        assert not list(tmp_path.rglob("PWNED")) and not Path("PWNED").exists()


@pytest.mark.parametrize("payload", [p for p in PAYLOADS if any(c in p for c in "'\"\\")])
def test_vllm_bin_systemd_cannot_run_is_refused_at_render(payload):
    with pytest.raises(UsageError, match="systemd refuses"):
        render_files("m/x", PLAIN, vllm_bin="/opt/" + payload)


@pytest.mark.parametrize(("value", "why"), [("", "empty"), ("-S sh -c 'touch PWNED'", "starts with '-'"),
                                            ("--help", "starts with '-'"), ("vllm\nExecStartPre=/bin/touch PWNED", "control character"),
                                            ("/usr/bin/", "ends with '/'")])  # fmt: skip
def test_vllm_bin_that_cannot_be_a_program_is_refused(value, why):
    with pytest.raises(UsageError, match=why):
        render_files("m/x", PLAIN, vllm_bin=value)


def test_unit_runs_an_absolute_vllm_resolved_at_render_time(tmp_path):
    bindir = tmp_path / "bin"
    fake = make_fake(bindir)
    files = render_files("m/x", PLAIN, vllm_bin="vllm", which=which_in(bindir))
    assert sd.exec_argv(sd.one(files["vllm.service"], "ExecStart"))[0] == str(fake)
    assert "/usr/bin/env" not in files["vllm.service"]
    target = make_target("m/x", PLAIN, vllm_bin="vllm", which=lambda _: None)
    assert target.exec_path == "vllm" and "not on PATH" in target.warnings[0]


def test_every_env_variable_is_carried_and_secrets_stay_in_the_env_file(tmp_path):
    """Before: HF_TOKEN and other non-VLLM_* names were dropped from vllm.env."""
    d = PLAIN.model_copy(update={"env": {"VLLM_PLUGINS": "", "HF_TOKEN": "hf_SECRET1", "SOME_RANDOM": "x y", "NCCL_DEBUG": "WARN"}})
    bindir = tmp_path / "bin"
    make_fake(bindir)
    files = render_files("m/x", d, extra_env={"VLLM_API_KEY": "sk-SECRET2"}, which=which_in(bindir))
    proc = _launch(tmp_path, files, bindir)
    assert proc.returncode == 0, proc.stderr
    env = json.loads((tmp_path / "report.json").read_text())["env"]
    assert {k: env[k] for k in ("HF_TOKEN", "SOME_RANDOM", "NCCL_DEBUG", "VLLM_API_KEY")} == {
        "HF_TOKEN": "hf_SECRET1", "SOME_RANDOM": "x y", "NCCL_DEBUG": "WARN", "VLLM_API_KEY": "sk-SECRET2"}  # fmt: skip
    for name in ("launch.sh", "vllm.service"):
        assert "SECRET" not in files[name], name
    assert "--api-key" not in files["vllm.service"]


def test_dsa_variables_without_the_dsa_block_are_left_out_with_a_warning():
    d = PLAIN.model_copy(update={"env": {"VLLM_PLUGINS": "", "VLLM_LHC_DSA": "1"}})
    target = make_target("m/x", d)
    assert "VLLM_LHC_DSA" not in dict(target.env) and any("VLLM_LHC_DSA left out" in w for w in target.warnings)


@pytest.mark.parametrize("umask", [0o022, 0o000])
def test_env_file_is_written_0600_whatever_the_umask(tmp_path, umask):
    old = os.umask(umask)
    try:
        written = write_files(tmp_path, render_files("m/x", PLAIN))
    finally:
        os.umask(old)
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in written}
    assert modes == {"launch.sh": 0o755, "vllm.service": 0o644, "vllm.env": 0o600}


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file() and not p.is_symlink()}


@pytest.mark.parametrize("kind", ["directory", "symlink", "fifo"])
def test_write_refuses_non_regular_targets_and_writes_nothing(tmp_path, kind):
    files = render_files("m/x", PLAIN)
    out = tmp_path / "out"
    write_files(out, files)
    before = _snapshot(out)
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    (out / "vllm.env").unlink()
    {"directory": lambda p: p.mkdir(), "symlink": lambda p: p.symlink_to(victim), "fifo": os.mkfifo}[kind](out / "vllm.env")
    changed = render_files("other/model", PLAIN)
    with pytest.raises(OutputError, match="refusing to replace"):
        write_files(out, changed, force=True)
    assert _snapshot(out) == {k: v for k, v in before.items() if k != "vllm.env"}
    assert victim.read_text() == "keep me" and not [p for p in out.iterdir() if p.name.startswith(".")]


def _immutable(path: Path, on: bool) -> bool:
    return shutil.which("chattr") is not None and subprocess.run(["chattr", "+i" if on else "-i", str(path)],
                                                                 capture_output=True).returncode == 0  # fmt: skip


def test_write_is_all_or_nothing_when_a_rename_fails_half_way(tmp_path):
    """Before: `render --force` replaced launch.sh and vllm.service, then failed on vllm.env (exit 70)."""
    out = tmp_path / "out"
    write_files(out, render_files("m/x", PLAIN))
    before = _snapshot(out)
    if not _immutable(out / "vllm.env", True):  # the last file renamed; root cannot replace an immutable file
        pytest.skip("chattr +i does not work on this filesystem (needed for a rename that fails as root)")
    try:
        with pytest.raises(OutputError, match="nothing was changed"):
            write_files(out, render_files("other/model", PLAIN), force=True)
    finally:
        _immutable(out / "vllm.env", False)
    assert _snapshot(out) == before and not [p for p in out.iterdir() if p.name.startswith(".")]


def test_host_save_refuses_a_symlink_or_device(tmp_path):
    from advisor.hardware.host import collect_host

    fp = collect_host(environ={})
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    link = tmp_path / "host.json"
    link.symlink_to(victim)
    with pytest.raises(OutputError, match="symbolic link"):
        save_host(fp, link)
    with pytest.raises(OutputError, match="character device"):
        save_host(fp, Path("/dev/null"))
    assert victim.read_text() == "keep me" and Path("/dev/null").is_char_device()
    assert json.loads(save_host(fp, tmp_path / "ok.json").read_text())["gpus"] == fp.model_dump(mode="json")["gpus"]


def test_launch_refuses_when_vllm_is_not_installed(tmp_path):
    files = render_files("m/x", PLAIN, vllm_bin="vllm", which=lambda _: None)
    proc = _launch(tmp_path, files, tmp_path / "empty-bin")
    assert proc.returncode == 127 and "'vllm' not found: install vLLM 0.32" in proc.stderr


def test_launch_refuses_suffix_without_arctic_inference(tmp_path):
    bindir = tmp_path / "bin"
    fake = bindir / "vllm"
    bindir.mkdir()
    fake.write_text(f"#!{shutil.which('python3')} -IS\n{RECORDER}")  # -S: no site-packages, so no arctic_inference even where test.sh installed it
    fake.chmod(0o755)
    proc = _launch(tmp_path, render_files("m/x", SUFFIX, which=which_in(bindir)), bindir)
    assert proc.returncode == 1 and "needs Arctic Inference" in proc.stderr and not (tmp_path / "report.json").exists()
    # vanilla decoding does not need it
    assert _launch(tmp_path, render_files("m/x", PLAIN, which=which_in(bindir)), bindir).returncode == 0


def test_launch_runs_suffix_when_arctic_inference_imports(tmp_path):
    python = VLLM_VENV / "bin" / "python"
    if not (VLLM_VENV / ".advisor-vllm-ready").exists():
        pytest.skip(f"no vLLM venv with Arctic Inference at {VLLM_VENV} (scripts/setup_vllm_venv.sh)")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "vllm").write_text(f"#!{python}\n{RECORDER}")
    (bindir / "vllm").chmod(0o755)
    proc = _launch(tmp_path, render_files("m/x", SUFFIX, which=which_in(bindir)), bindir)
    assert proc.returncode == 0, proc.stderr
    assert "--speculative-config" in json.loads((tmp_path / "report.json").read_text())["argv"]


def test_host_save_onto_a_device_is_exit_73_through_the_cli(run_cli, tmp_path):
    """Before: `advisor host --save /dev/null` os.replace'd the device node (as root)."""
    code, _, err = run_cli("host", "--save", "/dev/null")
    assert code == 73 and "/dev/null is a character device; refusing to replace it" in err and err.count("\n") == 1
    assert Path("/dev/null").is_char_device()
