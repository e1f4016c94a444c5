"""Smaller issue-13 items: the no-GPU note says which defaults it used; `host diff` refuses `{}`."""

from __future__ import annotations

import json


def test_gpu_given_alone_is_not_called_the_calibration_host(run_cli):
    code, out, err = run_cli("recommend", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100", "--json")
    assert code == 0, err
    (note,) = [w for w in json.loads(out)["warnings"] if w.startswith("no GPU detected")]
    assert "8xH100" in note and "calibration host" not in note and "count 8 from the settings' default" in note
    assert "GPU B200" not in note  # the GPU was the user's


def test_host_diff_refuses_an_empty_object(run_cli, tmp_path):
    empty = tmp_path / "e.json"
    empty.write_text("{}")
    code, _, err = run_cli("host", "diff", str(empty), str(empty))
    assert code == 5 and "not a host fingerprint" in err and "hostname" in err


def test_saved_fingerprint_still_loads(run_cli, tmp_path):
    path = tmp_path / "h.json"
    code, _, err = run_cli("host", "--save", str(path))
    assert code == 0, err
    code, out, err = run_cli("host", "diff", str(path), str(path))
    assert code == 0, err
