"""Every rebuildable table under calibration/ is exactly what its builder makes of the committed inputs
(``advisor calibrate rebuild TABLE --check``, the command a maintainer runs), and the command behaves: it lists,
refuses an unknown table, reports a difference with exit 1 and writes atomically into the folder it is given."""

from __future__ import annotations

import json
import shutil

import pytest

from advisor.calibrate import tables
from advisor.paths import data_path

CAL = data_path("calibration")


def _needs(name: str) -> str | None:
    """Why table ``name`` cannot be rebuilt on this machine (None: it can)."""
    if name == "kbar_length":
        from advisor.calibrate.tables.kbar_length import model_dir
        from advisor.kbar.replay import arctic_available

        if not model_dir(CAL).is_dir() or not arctic_available():
            return "kbar_length replays the runs: needs Arctic Inference and SmolLM2's tokenizer (scripts/build_smollm2.py)"
    return None


@pytest.mark.parametrize("name", list(tables.TABLES))
def test_shipped_table_is_its_rebuild(name):
    why = _needs(name)
    if why:
        pytest.skip(why)
    assert tables.differing(name, CAL) == [], f"advisor calibrate rebuild {name} rewrites it"


def test_every_shipped_csv_is_rebuilt_or_named_as_an_input():
    """No table drifts unowned: each calibration/*.csv is a rebuild's output or an input the registry names."""
    rebuilt = {f for n in tables.TABLES for f in tables.outputs(n)}
    inputs = {"sweep_b200.csv", "kbar_published.csv", "corpus_shapes.csv"}
    assert {p.name for p in CAL.glob("*.csv")} == rebuilt | inputs
    assert all(f"``{f}``" in tables.__doc__ for f in inputs)


def test_rebuild_command_lists_checks_and_writes(run_cli, tmp_path):
    code, out, _ = run_cli("calibrate", "rebuild", "list", "--json")
    assert code == 0
    listed = {t["table"]: t for t in json.loads(out)["tables"]}
    assert set(listed) == set(tables.TABLES) and listed["kbar_priors"]["files"] == ["kbar_priors.csv"]
    code, _, err = run_cli("calibrate", "rebuild", "no-such-table")
    assert code == 2 and "no shipped table 'no-such-table'" in err
    # a folder holding only this table's input: --check reports the missing output (exit 1), a rebuild writes it
    (tmp_path / "published").mkdir()
    shutil.copy(CAL / "published" / "eagle_draft_results.csv", tmp_path / "published")
    code, out, _ = run_cli("calibrate", "rebuild", "drafter_acceptance", "--check", "--calibration-dir", str(tmp_path), "--json")
    assert code == 1 and json.loads(out)["tables"][0]["differs"] == ["drafter_acceptance.csv"]
    code, out, _ = run_cli("calibrate", "rebuild", "drafter_acceptance", "--calibration-dir", str(tmp_path))
    assert code == 0 and "wrote" in out
    assert (tmp_path / "drafter_acceptance.csv").read_text() == (CAL / "drafter_acceptance.csv").read_text()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary file left behind
    code, out, _ = run_cli("calibrate", "rebuild", "drafter_acceptance", "--check", "--calibration-dir", str(tmp_path))
    assert code == 0 and "matches a rebuild" in out
