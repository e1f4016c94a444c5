"""Contract: every argv that advisor.render.flags emits for a vLLM version is accepted, with the
intended values, by that release's own `serve` argument parser and config classes.

Each supported version (advisor.vllm_facts) runs against its own code: 0.32 in the vLLM test venv
(scripts/setup_vllm_venv.sh, default .cache/vllm-venv or $ADVISOR_VLLM_VENV), 0.26, 0.33 and 0.34 as wheels
beside it (scripts/setup_vllm_parsers.sh; tests/vllm_helpers/versions.py). 0.34.0 pins torch 2.14; its
parser and config modules import with the venv's torch 2.13. All cases of one version
run in one subprocess: importing vLLM takes ~10 s on 2 cores.
"""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path

import pytest

from advisor.domain.decision import Decision, NgramParams, SuffixParams
from advisor.render.flags import dropped_suffix_knobs, serve_argv
from advisor.vllm_facts import facts
from tests.vllm_helpers.versions import ALL, vllm_env, vllm_python


def _spec_cfg(d, version=None):
    """The --speculative-config advisor.methods renders for ``d`` on ``version`` (None: the default line)."""
    from advisor.methods import speculative_config
    from advisor.vllm_facts import DEFAULT_VERSION
    from advisor.vllm_facts import facts as facts_of

    return speculative_config(d, facts_of(version or DEFAULT_VERSION))


__all__ = ["vllm_python"]

pytestmark = pytest.mark.vllm

ROOT = Path(__file__).resolve().parents[1]
HELPER = ROOT / "tests" / "vllm_helpers" / "parse_args.py"
MODEL = "meta-llama/Llama-3.1-8B-Instruct"


CASES: dict[str, Decision] = {
    "vanilla": Decision(),
    "suffix_k32": Decision(speculative_method="suffix", num_speculative_tokens=32),
    "suffix_k8_params": Decision(
        speculative_method="suffix",
        num_speculative_tokens=8,
        suffix=SuffixParams(max_tree_depth=16, max_cached_requests=500, max_spec_factor=2.5, min_token_prob=0.05),
    ),
    "tp8_gmu085": Decision(tensor_parallel_size=8, gpu_memory_utilization=0.85, max_model_len=16384),
    "max_num_seqs": Decision(max_num_seqs=256, max_model_len=8192),
    **{
        f"cudagraph_{mode.lower()}": Decision(cudagraph_mode=mode)
        for mode in ("NONE", "PIECEWISE", "FULL", "FULL_DECODE_ONLY", "FULL_AND_PIECEWISE")
    },
}


def _roundtrip(argv: list[str]) -> list[str]:
    """What a launch script does to the argv: quoted into one shell line and split again."""
    again = shlex.split(shlex.join(argv))
    assert again == argv
    return again


def _run_parser(version: str, cases: list[dict]) -> dict[str, dict]:
    python, env = vllm_env(version)
    proc = subprocess.run(
        [str(python), str(HELPER)],
        input=json.dumps(cases),
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    payload = proc.stdout.rsplit("@@RESULT@@", 1)[-1]
    out = {r["id"]: r for r in json.loads(payload)}
    got = out.pop("@version")["values"]
    # The release under test really is the one imported (not the venv's 0.32 through a wrong PYTHONPATH).
    assert got["version"].startswith(facts(version).release), got
    return out


@pytest.fixture(scope="module", params=ALL)
def version(request) -> str:
    """Each supported vLLM version in turn; the rendered argv and the parser are that version's."""
    return request.param


@pytest.fixture(scope="module")
def parsed(tmp_path_factory, version: str) -> dict[str, dict]:
    vllm_env(version)  # skip (or fail where required) before rendering anything
    cases = []
    for case_id, decision in CASES.items():
        argv = _roundtrip(serve_argv(MODEL, decision, version))
        assert argv[:3] == ["vllm", "serve", MODEL]
        cases.append({"id": case_id, "argv": argv[2:]})
    for case_id, decision in LAYOUT_CASES.items():
        cases.append({"id": f"layout_{case_id}", "argv": _roundtrip(serve_argv(MODEL, decision, version))[2:]})
    # Negative cases: vLLM must reject these, or the contract above proves nothing.
    cases.append({"id": "bogus_flag", "argv": [MODEL, "--no-such-flag", "1"]})
    bad_spec = json.dumps({"method": "suffix", "num_speculative_tokens": 8, "suffix_decoding_min_token_prob": 2.0})
    cases.append({"id": "bad_suffix_value", "argv": [MODEL, "--speculative-config", bad_spec]})
    cases.append({"id": "bad_cudagraph_mode", "argv": [MODEL, "--compilation-config", '{"cudagraph_mode":"SOMETIMES"}']})
    # suffix without K: the release's own default K (advisor.vllm_facts suffix_default_k)
    cases.append({"id": "suffix_default_k", "argv": [MODEL, "--speculative-config", '{"method":"suffix"}']})
    # The probe's own configurations (advisor.probe.configs) go through the same parser.
    from advisor.probe.configs import parse_configs, probe_flags

    for cfg in parse_configs("vanilla,suffix:16,ngram:4,ngram_gpu:4,suffix:8@gmu=0.8@max_model_len=4096,"
                             "eagle3:3@draft=yuhuili/EAGLE3-LLaMA3.1-Instruct-8B,draft_model:4@draft=meta-llama/Llama-3.2-1B-Instruct"):
        argv = _roundtrip([MODEL, *probe_flags(cfg, Decision(max_model_len=8192), version)])
        cases.append({"id": f"probe_{cfg.label}", "argv": argv})
    # The rendered files: what launch.sh really passes to vllm (a recording fake on PATH), and
    # what systemd would pass from the unit's ExecStart=, both parsed by vLLM.
    tmp = tmp_path_factory.mktemp(f"rendered-{version}")
    for case_id, decision in RENDERED.items():
        launch_argv, unit_argv = _rendered_argv(tmp / case_id, decision, version)
        assert launch_argv == unit_argv
        assert launch_argv[0] == "serve"
        cases.append({"id": f"rendered_{case_id}", "argv": launch_argv[1:]})
    cases.append({"id": "k8s_lws_leader", "argv": _lws_leader_argv(version)[1:]})
    return _run_parser(version, cases)


def _lws_leader_argv(version: str) -> list[str]:
    """The `vllm` argv of the LeaderWorkerSet leader pod for 16 GPUs (Kubernetes' $$ rule applied)."""
    from advisor.render.containers import render_k8s
    from advisor.render.target import make_target
    from tests.test_render_containers import _unk8s, lws_pods

    d = RENDERED["multinode_16_on_8"]
    files = render_k8s(make_target(MODEL, d, resolve=False), d, version=version, image="vllm/vllm-openai:latest")
    args = [_unk8s(a) for a in lws_pods(files)["leader"]["spec"]["containers"][0]["args"]]
    assert args[1] == "vllm-leader" and args[2] == "serve"
    return args[2:]


def test_vllm_accepts_the_k8s_multinode_leader_command(parsed: dict[str, dict]) -> None:
    result = parsed["k8s_lws_leader"]
    assert result["ok"], result["error"]
    v = result["values"]
    assert (v["tensor_parallel_size"], v["pipeline_parallel_size"], v["distributed_executor_backend"]) == (8, 2, "ray")
    assert (v["model"], v["host"], v["port"]) == (MODEL, "0.0.0.0", 8000)


RENDERED: dict[str, Decision] = {
    "suffix_tp8": Decision(speculative_method="suffix", num_speculative_tokens=16, tensor_parallel_size=8,
                           gpu_memory_utilization=0.85, env={"VLLM_PLUGINS": ""}),
    "vanilla_seqs": Decision(max_num_seqs=128, cudagraph_mode="PIECEWISE", env={"HF_TOKEN": "hf_x"}),
    "multinode_16_on_8": Decision(tensor_parallel_size=16, gpu_memory_utilization=0.85),  # TP 8 x PP 2 through Ray
    "dp8_ep_mtp": Decision(data_parallel_size=8, enable_expert_parallel=True, speculative_method="mtp", num_speculative_tokens=1),
}  # fmt: skip
# Layouts and speculative methods of the layout search (issue 15), parsed by vLLM with their values checked.
LAYOUT_CASES: dict[str, Decision] = {
    "tp2_dp4": Decision(tensor_parallel_size=2, data_parallel_size=4),
    "dp8_ep": Decision(data_parallel_size=8, enable_expert_parallel=True),
    "ngram_k4": Decision(speculative_method="ngram", num_speculative_tokens=4, data_parallel_size=2),
    "ngram_k8_lookup2_4": Decision(speculative_method="ngram", num_speculative_tokens=8,
                                   ngram=NgramParams(prompt_lookup_min=2, prompt_lookup_max=4)),
    "mtp_k1": Decision(speculative_method="mtp", num_speculative_tokens=1, tensor_parallel_size=8),
    # the model-drafted methods (advisor.methods.eagle3 / draft_model): the drafter named as `model`
    "eagle3_k3": Decision(speculative_method="eagle3", num_speculative_tokens=3,
                          speculative_model="yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"),
    "draft_model_k4": Decision(speculative_method="draft_model", num_speculative_tokens=4,
                               speculative_model="meta-llama/Llama-3.2-1B-Instruct"),
    # the operating point (issue 23): batch values and a K schedule by batch size
    "ngram_schedule_batch": Decision(speculative_method="ngram", num_speculative_tokens=4, max_num_seqs=256,
                                     max_num_batched_tokens=8192,
                                     num_speculative_tokens_per_batch_size=[(1, 32, 4), (33, 256, 0)]),
}  # fmt: skip
SERVED = "llama 70b (prod)"


def _rendered_argv(folder: Path, decision: Decision, version: str) -> tuple[list[str], list[str]]:
    from advisor.render.files import render_files
    from advisor.render.write import write_files
    from tests.render_helpers import unit as sd
    from tests.render_helpers.fakebin import make_fake

    fake = make_fake(folder / "bin")
    ray = fake.parent / "ray"  # multi-node: the head script starts Ray and waits for 2 nodes
    ray.write_text("#!/bin/sh\n[ \"$1\" = --version ] && { echo 'ray, version 2.53.0'; exit 0; }\n"
                   "[ \"$1\" = status ] && printf 'Active:\\n 1 node_a\\n 1 node_b\\nPending:\\n'\nexit 0\n")
    ray.chmod(0o755)
    files = render_files(MODEL, decision, version=version, vllm_bin=str(fake), host="0.0.0.0", port=8001, served_model_name=SERVED)
    write_files(folder / "out", files)
    report = folder / "report.json"
    env = {"PATH": f"{fake.parent}:/usr/bin:/bin", "ADVISOR_SKIP_PREFLIGHT": "1", "FAKE_OUT": str(report),
           "VLLM_PYTHON": str(vllm_python()),  # the vLLM venv has Arctic Inference: the suffix check passes for real
           "RAY_AUTH_TOKEN": "test-secret", "RAY_NODE_IP": "127.0.0.1"}  # multi-node: Ray starts only with a token
    proc = subprocess.run(["bash", str(folder / "out" / "launch.sh")], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    unit_argv = sd.exec_argv(sd.one(files["vllm.service"], "ExecStart"))
    assert unit_argv[0] == str(fake)
    return json.loads(report.read_text())["argv"], unit_argv[1:]


@pytest.mark.parametrize("case_id", list(RENDERED))
def test_vllm_accepts_rendered_launch_and_unit(parsed: dict[str, dict], case_id: str) -> None:
    d = RENDERED[case_id]
    result = parsed[f"rendered_{case_id}"]
    assert result["ok"], result["error"]
    v = result["values"]
    assert (v["model"], v["host"], v["port"], v["served_model_name"]) == (MODEL, "0.0.0.0", 8001, [SERVED])
    tp, pp = (8, 2) if case_id.startswith("multinode") else (d.tensor_parallel_size, 1)
    assert (v["tensor_parallel_size"], v["pipeline_parallel_size"]) == (tp, pp) and v["max_model_len"] == d.max_model_len
    assert v["distributed_executor_backend"] == ("ray" if pp > 1 else None)
    assert v["gpu_memory_utilization"] == pytest.approx(d.gpu_memory_utilization)
    assert v["cudagraph_mode"] == d.cudagraph_mode and v["speculative_config"] == _spec_cfg(d)


def test_suffix_default_k_is_the_release_own(parsed: dict[str, dict], version: str) -> None:
    result = parsed["suffix_default_k"]
    assert result["ok"], result["error"]
    assert result["values"]["spec_validated"]["num_speculative_tokens"] == facts(version).suffix_default_num_tokens


@pytest.mark.parametrize("case_id", list(CASES))
def test_vllm_accepts_rendered_flags(parsed: dict[str, dict], case_id: str, version: str) -> None:
    d = CASES[case_id]
    result = parsed[case_id]
    assert result["ok"], result["error"]
    v = result["values"]
    assert v["model"] == MODEL
    assert v["tensor_parallel_size"] == d.tensor_parallel_size
    assert v["gpu_memory_utilization"] == pytest.approx(d.gpu_memory_utilization)
    assert v["max_model_len"] == d.max_model_len
    assert v["max_num_seqs"] == d.max_num_seqs
    assert v["cudagraph_mode"] == d.cudagraph_mode
    spec = _spec_cfg(d)  # the advisor's knobs, before a line drops the ones it does not read
    dropped = dropped_suffix_knobs(d, version)  # knobs this release's suffix proposer does not read: not rendered
    assert v["speculative_config"] == (None if spec is None else {k: x for k, x in spec.items() if k not in dropped})
    if spec is None:
        assert "spec_validated" not in v
    else:
        s = v["spec_validated"]
        assert s["method"] == "suffix"
        assert s["num_speculative_tokens"] == d.num_speculative_tokens
        f = facts(version)
        defaults = {"max_tree_depth": f.suffix_max_tree_depth, "max_cached_requests": f.suffix_max_cached_requests,
                    "max_spec_factor": f.suffix_max_spec_factor, "min_token_prob": f.suffix_min_token_prob}  # fmt: skip
        for name, default in defaults.items():
            key = f"suffix_decoding_{name}"
            want = getattr(d.suffix, name) if key in f.suffix_tuning_knobs else default  # dropped: vLLM's default
            assert s[key] == pytest.approx(want), key
        if case_id == "suffix_k8_params":  # the 0.34 line drops two of the four knobs; the older lines none
            assert set(dropped) == ({"suffix_decoding_max_spec_factor", "suffix_decoding_min_token_prob"}
                                    if f.suffix_drafts_full_k else set())  # fmt: skip


def test_vllm_rejects_unknown_flag(parsed: dict[str, dict]) -> None:
    result = parsed["bogus_flag"]
    assert not result["ok"]
    assert "unrecognized arguments: --no-such-flag" in result["error"][-1]


def test_vllm_validates_json_values(parsed: dict[str, dict]) -> None:
    assert not parsed["bad_suffix_value"]["ok"]
    assert "suffix_decoding_min_token_prob" in parsed["bad_suffix_value"]["error"][-1]
    assert not parsed["bad_cudagraph_mode"]["ok"]


def test_vllm_accepts_probe_configs(parsed: dict[str, dict]) -> None:
    probes = {k[len("probe_"):]: v for k, v in parsed.items() if k.startswith("probe_")}
    assert set(probes) == {"vanilla", "suffix:16", "ngram:4", "ngram_gpu:4", "suffix:8@gmu=0.8@max_model_len=4096",
                           "eagle3:3@draft=yuhuili/EAGLE3-LLaMA3.1-Instruct-8B",
                           "draft_model:4@draft=meta-llama/Llama-3.2-1B-Instruct"}
    for label in ("eagle3:3@draft=yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", "draft_model:4@draft=meta-llama/Llama-3.2-1B-Instruct"):
        v = probes[label]["values"]["spec_validated"]
        assert (v["method"], v["model"]) == (label.split(":")[0], label.split("=", 1)[1])
    for label, result in probes.items():
        assert result["ok"], (label, result["error"])
    assert probes["vanilla"]["values"]["speculative_config"] is None
    assert probes["suffix:16"]["values"]["spec_validated"]["num_speculative_tokens"] == 16
    ngram = probes["ngram:4"]["values"]["spec_validated"]
    assert (ngram["method"], ngram["num_speculative_tokens"]) == ("ngram", 4)
    assert ngram["prompt_lookup_min"] >= 1 and ngram["prompt_lookup_max"] >= ngram["prompt_lookup_min"]
    gpu = probes["ngram_gpu:4"]["values"]["spec_validated"]  # vLLM's GPU n-gram proposer, validated by the release
    assert (gpu["method"], gpu["num_speculative_tokens"]) == ("ngram_gpu", 4) and gpu["prompt_lookup_min"] >= 1
    over = probes["suffix:8@gmu=0.8@max_model_len=4096"]["values"]
    assert over["gpu_memory_utilization"] == pytest.approx(0.8)
    assert over["max_model_len"] == 4096


@pytest.mark.parametrize("case_id", list(LAYOUT_CASES))
def test_vllm_accepts_searched_layouts_and_methods(parsed: dict[str, dict], case_id: str) -> None:
    d = LAYOUT_CASES[case_id]
    result = parsed[f"layout_{case_id}"]
    assert result["ok"], result["error"]
    v = result["values"]
    assert (v["tensor_parallel_size"], v["data_parallel_size"], v["enable_expert_parallel"]) == (
        d.tensor_parallel_size, d.data_parallel_size, d.enable_expert_parallel)
    assert v["speculative_config"] == _spec_cfg(d)
    if d.speculative_method:
        assert v["spec_validated"]["method"] == d.speculative_method
        assert v["spec_validated"]["num_speculative_tokens"] == d.num_speculative_tokens
    if d.speculative_method == "ngram":  # the window as given, or vLLM's own default (advisor.vllm_facts)
        sv = v["spec_validated"]
        assert (sv["prompt_lookup_min"], sv["prompt_lookup_max"]) == (d.ngram.prompt_lookup_min, d.ngram.prompt_lookup_max)
    if d.max_num_batched_tokens:
        assert (v["max_num_seqs"], v["max_num_batched_tokens"]) == (d.max_num_seqs, d.max_num_batched_tokens)
    if d.num_speculative_tokens_per_batch_size and d.speculative_method != "mtp":
        assert v["spec_validated"]["num_speculative_tokens_per_batch_size"] == [list(e) for e in d.num_speculative_tokens_per_batch_size]
