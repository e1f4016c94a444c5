"""recommend ranks the model-drafted methods beside suffix, n-gram and plain (issue 41's "done means"): each with
its own K̄, R and figures; --draft takes a head or draft-model directory; render launches the drafter."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
L8 = "meta-llama/Llama-3.1-8B-Instruct"
HOST = ("--gpu", "H100", "--gpus", "1", "--concurrency", "1")


def _rec(run_cli, *args):
    code, out, err = run_cli("recommend", L8, *HOST, *args, "--json")
    assert code == 0, err
    return json.loads(out)


def test_eagle3_suffix_ngram_and_plain_are_ranked_each_with_its_own_figures(run_cli):
    rec = _rec(run_cli)
    by = {}
    for c in rec["candidates"]:
        by.setdefault(c["speculative_method"], c)
    assert {"eagle3", "suffix", "ngram", None, "draft_model"} <= set(by), set(by)
    for m in ("eagle3", "suffix", "ngram", "draft_model"):
        c = by[m]
        assert c["k_bar"] and c["r"] and c["prediction"]["throughput_tok_s"], (m, c)
    eagle = by["eagle3"]
    assert eagle["speculative_model"] in {"nm-testing/EAGLE3-LLaMA3.1-Instruct-8B-converted", "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"}
    assert "published acceptance" in eagle["k_bar_source"]
    d = rec["decision"]
    if d["speculative_method"] == "eagle3":  # the launched drafter is the candidate's
        assert d["speculative_model"] == eagle["speculative_model"]
    best = max(c["prediction"]["throughput_tok_s"]["value"] for c in rec["candidates"] if c["eligible"] and c.get("prediction"))
    assert rec["prediction"]["throughput_tok_s"]["value"] == best  # what is launched is what is predicted fastest


def test_draft_accepts_a_head_dir_and_a_draft_model_dir(run_cli, tmp_path):
    head = tmp_path / "my-eagle3-head"
    head.mkdir()
    shutil.copy(ROOT / "catalog/models/yuhuili/EAGLE3-LLaMA3.1-Instruct-8B/config.json", head / "config.json")
    rec = _rec(run_cli, "--draft", str(head), "--spec", "eagle3", "--draft-k", "3")
    assert rec["decision"]["speculative_method"] == "eagle3" and rec["decision"]["num_speculative_tokens"] == 3
    assert rec["decision"]["speculative_model"] == str(head)
    small = tmp_path / "llama-1b"
    small.mkdir()
    shutil.copy(ROOT / "catalog/models/meta-llama/Llama-3.2-1B-Instruct/config.json", small / "config.json")
    rec = _rec(run_cli, "--draft", str(small), "--spec", "draft_model")
    assert rec["decision"]["speculative_method"] == "draft_model" and rec["decision"]["speculative_model"] == str(small)
    assert not [c for c in rec["candidates"] if c["speculative_method"] == "eagle3"]  # --draft names the only drafter


def test_a_draft_that_cannot_run_is_one_line(run_cli, tmp_path):
    bogus = tmp_path / "not-a-model"
    bogus.mkdir()
    (bogus / "config.json").write_text("{}")
    code, out, err = run_cli("recommend", L8, *HOST, "--draft", str(bogus))
    assert code == 4 and err.startswith(f"error: --draft {bogus}: ") and len(err.strip().splitlines()) == 1, err  # a bad config: exit 4
    wrong = tmp_path / "qwen-draft"  # a draft model of another vocabulary: vLLM refuses the pair
    wrong.mkdir()
    shutil.copy(ROOT / "catalog/models/Qwen/Qwen3-8B/config.json", wrong / "config.json")
    code, out, err = run_cli("recommend", L8, *HOST, "--draft", str(wrong))
    assert code == 2 and "vocab" in err and len(err.strip().splitlines()) == 1, err


def test_render_launches_the_drafter(run_cli, tmp_path):
    code, out, err = run_cli("render", L8, *HOST, "--spec", "eagle3", "--draft-k", "3", "--vllm-version", "0.34",
                             "--out", str(tmp_path / "out"))  # fmt: skip
    assert code == 0, err
    launch = (tmp_path / "out" / "launch.sh").read_text()
    assert '"method":"eagle3"' in launch and '"model":"' in launch and '"num_speculative_tokens":3' in launch


def test_the_decomposition_names_the_drafters_acceptance_not_a_suffix_prior(run_cli):
    code, out, err = run_cli("recommend", L8, *HOST, "--spec", "eagle3")
    assert code == 0, err
    line = next(x for x in out.splitlines() if x.strip().startswith("gain = K̄ / R"))
    assert "K̄: another eagle3 head for" in line and "K̄ prior" not in line


def test_a_drafter_launched_on_a_prior_says_how_to_measure_it(run_cli):
    code, out, err = run_cli("recommend", L8, *HOST, "--spec", "draft_model", "--json")
    assert code == 0, err
    rec = json.loads(out)
    (w,) = [x for x in rec["warnings"] if "is launched on an acceptance from a class prior" in x]
    assert "advisor probe meta-llama/Llama-3.1-8B-Instruct --configs vanilla,draft_model:" in w
    assert "@draft=meta-llama/Llama-3.2-1B-Instruct" in w


def test_a_forced_method_that_cannot_run_is_refused_never_swapped(run_cli):
    code, out, err = run_cli("recommend", L8, *HOST, "--vllm-version", "0.26", "--spec", "eagle3")
    assert code == 2 and "--spec eagle3: no EAGLE-3 candidate runs here" in err and "max_position_embeddings 2048" in err
    assert "suffix" not in out  # never another method in its place


def test_a_hostile_drafter_path_reaches_launch_sh_quoted(run_cli, tmp_path):
    import shlex

    head = tmp_path / "h$(touch PWNED)'\"`x;rm -rf ~"
    head.mkdir()
    shutil.copy(ROOT / "catalog/models/yuhuili/EAGLE3-LLaMA3.1-Instruct-8B/config.json", head / "config.json")
    code, out, err = run_cli("render", L8, *HOST, "--spec", "eagle3", "--draft", str(head), "--vllm-version", "0.34",
                             "--out", str(tmp_path / "out"))  # fmt: skip
    assert code == 0, err
    line = next(x for x in (tmp_path / "out" / "launch.sh").read_text().splitlines() if "--speculative-config" in x)
    argv = shlex.split(line)
    spec = json.loads(argv[argv.index("--speculative-config") + 1])
    assert spec["model"] == str(head) and not (tmp_path / "PWNED").exists()
