"""Settings precedence: CLI > env > advisor.toml > default, one test per pair."""

from __future__ import annotations

from pathlib import Path

from advisor.settings import load_settings


def _toml(home: Path, text: str) -> None:
    (home / "advisor.toml").write_text(text)  # ./advisor.toml (tests chdir to the isolated home)


def test_default(isolated_home):
    s = load_settings()
    assert s.data_dir == isolated_home / ".local" / "share" / "advisor"
    assert s.hub_offline is False and s.default_gpu == "B200"


def test_file_beats_default(isolated_home):
    _toml(isolated_home, 'default_gpu = "H100"\n')
    assert load_settings().default_gpu == "H100"


def test_env_beats_file(isolated_home, monkeypatch):
    _toml(isolated_home, 'default_gpu = "H100"\n')
    monkeypatch.setenv("ADVISOR_DEFAULT_GPU", "H200")
    assert load_settings().default_gpu == "H200"


def test_cli_beats_env(isolated_home, monkeypatch):
    monkeypatch.setenv("ADVISOR_DATA_DIR", "/from/env")
    assert load_settings(data_dir="/from/cli").data_dir == Path("/from/cli")


def test_cli_beats_file(isolated_home):
    _toml(isolated_home, 'data_dir = "/from/file"\n')
    assert load_settings(data_dir="/from/cli").data_dir == Path("/from/cli")


def test_env_beats_default(monkeypatch):
    monkeypatch.setenv("ADVISOR_HUB_OFFLINE", "1")
    assert load_settings().hub_offline is True


def test_path_lists_from_env_and_config_file_env(isolated_home, monkeypatch, tmp_path):
    monkeypatch.setenv("ADVISOR_RULES_DIRS", "/a:/b")
    assert load_settings().rules_dirs == [Path("/a"), Path("/b")]
    cfg = tmp_path / "elsewhere.toml"
    cfg.write_text('rules_dirs = ["/c"]\n')
    monkeypatch.delenv("ADVISOR_RULES_DIRS")
    monkeypatch.setenv("ADVISOR_CONFIG", str(cfg))
    assert load_settings().rules_dirs == [Path("/c")]


def test_bad_setting_is_a_clean_error(run_cli, monkeypatch):
    monkeypatch.setenv("ADVISOR_DEFAULT_GPUS", "zero")
    code, _, err = run_cli("inspect", "meta-llama/Llama-3.1-8B")
    assert code == 2 and "default_gpus" in err and err.count("\n") == 1


def test_global_cli_flag_beats_env(run_cli, monkeypatch, tmp_path):
    monkeypatch.setenv("ADVISOR_CATALOG_DIRS", str(tmp_path / "missing-env-catalog"))
    code, out, _ = run_cli("--catalog-dir", str(tmp_path), "inspect", "meta-llama/Llama-3.1-8B", "--json")
    assert code == 0 and '"id": "meta-llama/Llama-3.1-8B"' in out
