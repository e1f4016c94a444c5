"""Exit codes scripts can trust (issue 24): nothing boots -> recommend 8 (the nearest configuration
that boots printed first); an SLA nothing meets -> ``sla_met: false`` and the first line says so;
``advisor probe`` where every configuration failed -> 7. README's table lists them."""

from __future__ import annotations

import json
import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_recommend_exits_8_when_nothing_boots_and_prints_the_nearest_first(run_cli):
    code, out, _ = run_cli("recommend", "meta-llama/Llama-3.1-70B-Instruct", "--gpu", "H100", "--gpus", "1")
    assert code == 8
    first = out.splitlines()[0]
    assert first.startswith("DOES NOT BOOT on 1xH100") and "nearest configuration that boots: --gpus " in first
    code, out, _ = run_cli("recommend", "meta-llama/Llama-3.1-70B-Instruct", "--gpu", "H100", "--gpus", "1", "--json")
    rec = json.loads(out)
    assert code == 8 and rec["memory"]["boots"] is False and rec["nearest_bootable"].startswith("--gpus ")


def test_an_sla_nothing_meets_says_so_first(run_cli):
    args = ("recommend", "meta-llama/Llama-3.1-70B-Instruct", "--gpu", "H200", "--gpus", "8", "--max-tpot-ms", "0.01")
    code, out, _ = run_cli(*args)
    assert code == 0 and out.splitlines()[0].startswith("SLA not met: no configuration meets the limits")
    code, out, _ = run_cli(*args, "--json")
    rec = json.loads(out)
    assert rec["sla_met"] is False and rec["warnings"][0].startswith("SLA not met")
    code, out, _ = run_cli("recommend", "meta-llama/Llama-3.1-70B-Instruct", "--gpu", "H200", "--gpus", "8",
                           "--max-tpot-ms", "1000", "--json")  # fmt: skip
    assert json.loads(out)["sla_met"] is True
    code, out, _ = run_cli("recommend", "meta-llama/Llama-3.1-70B-Instruct", "--gpu", "H200", "--gpus", "8", "--json")
    assert json.loads(out)["sla_met"] is None


def test_probe_exits_7_when_every_configuration_failed(run_cli):
    code, out, err = run_cli("probe", "meta-llama/Llama-3.1-8B-Instruct", "--corpus", "humaneval", "--configs",
                             "vanilla,suffix:8", "--requests", "1", "--server-cmd", "/nonexistent/vllm serve", "--json")  # fmt: skip
    assert code == 7, err
    assert [r["outcome"] for r in json.loads(out)["records"]] == ["boot_failed", "boot_failed"]
    assert "every probed configuration failed" in err


def test_readme_lists_the_exit_codes():
    text = " ".join(README.read_text(encoding="utf-8").split())
    assert "8 `recommend`, `render` and `report`: nothing boots" in text
    assert re.search(r"7 `probe`: [^)]*every configuration failed", text)
    assert "sla_met" in text


def test_an_unreadable_fingerprint_is_said_and_a_bug_is_not_swallowed(monkeypatch, tmp_path):
    """cli/wiring.StorePredictor.fingerprint: an OSError becomes a warning (no measurement counts as
    this host's); any other exception is a bug and reaches the one error edge."""
    import pytest

    from advisor.cli.wiring import StorePredictor
    from advisor.hardware import host as host_mod
    from advisor.settings import load_settings

    s = load_settings()

    def broken(_settings):
        raise OSError("no /sys here")

    monkeypatch.setattr(host_mod, "collect_host", broken)
    p = StorePredictor(s)
    assert p.fingerprint() is None and any("fingerprint could not be read (OSError: no /sys here)" in w for w in p.skipped)

    def bug(_settings):
        raise KeyError("typo")

    monkeypatch.setattr(host_mod, "collect_host", bug)
    with pytest.raises(KeyError):
        StorePredictor(s).fingerprint()
