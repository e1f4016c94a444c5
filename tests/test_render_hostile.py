"""The hostile corpus (tests/render_helpers/corpus.py, >= 100 values) in every rendered field:
model, served name, --vllm-bin, --env-file, env values, --host, --port.

Each value is either refused with a one-line UsageError, or rendered and then proven inert:
launch.sh runs (real bash) against a recording fake vllm and the argv and env it receives are
exactly the intended ones; nothing named PWNED appears; the unit read by systemd's rules has
exactly the baseline directives and an ExecStart= argv equal to the intended one; and
`systemd-analyze verify` accepts every rendered unit."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from advisor.errors import UsageError
from advisor.domain.decision import Decision
from advisor.render.files import render_files
from advisor.render.flags import serve_flags
from tests.render_helpers import unit as sd
from tests.render_helpers.corpus import HOSTILE
from tests.render_helpers.fakebin import make_fake, which_in

DECISION = Decision(gpu_memory_utilization=0.85, tensor_parallel_size=2, max_model_len=8192,
                    env={"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True", "VLLM_PLUGINS": ""})  # fmt: skip
CTRL = re.compile(r"[\x00-\x1f\x7f]")
SAFE_HOST = re.compile(r"^[A-Za-z0-9.:-]+$")


def _filename_ok(v: str) -> bool:
    return bool(v) and "/" not in v and "\x00" not in v and v not in (".", "..") and len(v.encode()) <= 255


def _argv_word_ok(v: str) -> bool:  # MODEL and --served-model-name
    return bool(v.strip()) and not v.startswith("-") and "\x00" not in v


def _env_value_ok(v: str) -> bool:
    return not any(c in v for c in "\n\r\x00")


def _env_file_ok(v: str) -> bool:
    path = "/etc/vllm/" + v
    return not CTRL.search(path) and "\\" not in path and path == path.strip() and all(
        part not in ("", ".", "..") and len(part.encode()) <= 255 for part in path[1:].split("/"))  # fmt: skip


def _program_ok(v: str) -> bool:  # systemd also refuses quotes and backslashes in an executable path
    # ... and a leading + ! @ : | (systemd Exec prefixes: root, no hardening, argv[0], no $ expansion)
    return (bool(v) and not v.startswith(("-", "+", "!", "@", ":", "|")) and not CTRL.search(v) and v == v.strip() and not v.endswith("/")
            and not any(c in v for c in "'\"\\") and all(len(p.encode()) <= 255 for p in v.split("/")))  # fmt: skip


def _port_ok(v: str) -> bool:
    return v.isascii() and v.isdigit() and 1 <= int(v) <= 65535 and str(int(v)) == v


def _try(**kw) -> tuple[bool, str]:
    """(accepted, error message) for a render with these overrides."""
    try:
        render_files(kw.pop("model", "org/model"), DECISION, **kw)
    except UsageError as exc:
        msg = str(exc)
        assert "\n" not in msg and msg, f"error message is not one line: {msg!r}"
        return False, msg
    return True, ""


@pytest.mark.parametrize("value", HOSTILE, ids=[f"v{i}" for i in range(len(HOSTILE))])
def test_hostile_value_refused_or_inert(tmp_path, value):
    bindir = tmp_path / "bin"
    make_fake(bindir)
    which = which_in(bindir)
    # Field by field: refused exactly when the field cannot hold the value.
    assert _try(model=value, which=which)[0] == _argv_word_ok(value)
    assert _try(served_model_name=value, which=which)[0] == _argv_word_ok(value)
    assert _try(extra_env={"VLLM_HOSTILE": value}, which=which)[0] == _env_value_ok(value)
    assert _try(env_file="/etc/vllm/" + value, which=which)[0] == _env_file_ok(value)
    assert _try(vllm_bin=value, which=which)[0] == _program_ok(value) or "/" in value
    assert _try(port=value, which=which)[0] == _port_ok(value)
    host_ok, _ = _try(host=value, which=which)
    assert not host_ok or SAFE_HOST.match(value) and not value.startswith("-"), value

    # Everything that was accepted, at once.
    model = value if _argv_word_ok(value) else "org/model"
    served = value if _argv_word_ok(value) else None
    env_value = value if _env_value_ok(value) else "plain"
    env_file = "/etc/vllm/" + value if _env_file_ok(value) else "/etc/vllm/vllm.env"
    host = value if host_ok else "127.0.0.1"
    port = value if _port_ok(value) else "8000"
    program = make_fake(bindir, value) if _filename_ok(value) and _program_ok(value) else bindir / "vllm"
    files = render_files(model, DECISION, vllm_bin=program.name, env_file=env_file, host=host, port=port,
                         served_model_name=served, extra_env={"VLLM_HOSTILE": env_value}, which=which)  # fmt: skip
    out = tmp_path / "out"
    out.mkdir()
    for name, text in files.items():
        (out / name).write_text(text)
    deploy = ["--host", host, "--port", str(int(port))] + (["--served-model-name", served] if served else [])
    expected = ["serve", model, *serve_flags(DECISION), *deploy]

    report = tmp_path / "report.json"
    env = {"PATH": f"{bindir}:/usr/bin:/bin", "ADVISOR_SKIP_PREFLIGHT": "1", "FAKE_OUT": str(report), "HOME": str(tmp_path)}
    proc = subprocess.run(["bash", str(out / "launch.sh"), "--extra", "x y"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    got = json.loads(report.read_text())
    assert got["argv"] == [*expected, "--extra", "x y"]
    assert got["env"]["VLLM_HOSTILE"] == env_value
    assert got["env"]["PYTORCH_CUDA_ALLOC_CONF"] == "expandable_segments:True" and got["env"]["VLLM_PLUGINS"] == ""
    assert not list(tmp_path.rglob("PWNED")) and not Path("/tmp/PWNED").exists() and not Path("PWNED").exists()

    unit = files["vllm.service"]
    baseline = render_files("org/model", DECISION, vllm_bin=str(bindir / "vllm"))["vllm.service"]
    assert Counter((s, k) for s, k, _ in sd.directives(unit)) == Counter((s, k) for s, k, _ in sd.directives(baseline))
    assert sd.exec_argv(sd.one(unit, "ExecStart")) == [str(program), *expected]
    assert sd.unspecify(sd.one(unit, "EnvironmentFile")) == env_file


def _accepted_programs() -> list[str]:
    return [v for v in HOSTILE if _filename_ok(v) and _program_ok(v)]


@pytest.mark.skipif(not shutil.which("systemd-analyze"), reason="systemd-analyze not installed (apt-get install systemd)")
def test_systemd_accepts_every_hostile_unit(tmp_path):
    """One `systemd-analyze verify` over a unit per hostile value (each value in the program
    name, model, served name, env-file path and Description at once): systemd parses every
    one without a complaint and finds each ExecStart= executable. Then systemd's manager in test
    mode loads them all and dumps the argv it parsed: exactly the intended one, every time."""
    bindir = tmp_path / "bin"
    units = tmp_path / "units"
    units.mkdir()
    names, expected, env_files = [], {}, {}
    for i, value in enumerate(HOSTILE):
        prog = make_fake(bindir, value) if value in _accepted_programs() else make_fake(bindir)
        model = value if _argv_word_ok(value) else "org/model"
        served = value if _argv_word_ok(value) else None
        files = render_files(model, DECISION, vllm_bin=str(prog), served_model_name=served,
                             env_file="/etc/vllm/" + value if _env_file_ok(value) else "/etc/vllm/vllm.env")  # fmt: skip
        (units / f"hostile-{i}.service").write_text(files["vllm.service"])
        names.append(f"hostile-{i}.service")
        env_files[names[-1]] = "/etc/vllm/" + value if _env_file_ok(value) else "/etc/vllm/vllm.env"
        expected[names[-1]] = [str(prog), "serve", model, *serve_flags(DECISION), "--host", "127.0.0.1", "--port", "8000",
                               *(["--served-model-name", served] if served else [])]  # fmt: skip
    proc = subprocess.run(["systemd-analyze", "verify", "--man=no", *(str(units / n) for n in names)], capture_output=True,
                          text=True, timeout=300)  # fmt: skip
    complaints = [ln for ln in proc.stderr.splitlines() if "hostile-" in ln]
    assert proc.returncode == 0 and not complaints, "\n".join(complaints[:20]) or proc.stderr[-2000:]
    if not sd.have_systemd_test_mode():
        pytest.skip("systemd's manager binary or setpriv missing: the argv check by systemd itself is skipped")
    parsed = sd.systemd_exec_lines(units, names)
    for name in names:
        assert parsed[name] == [expected[name]], (name, parsed[name], expected[name])
    for name, got in sd.systemd_exec_lines(units, names, "EnvironmentFile").items():
        assert got == [[env_files[name]]], (name, got)
