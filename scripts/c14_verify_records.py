#!/usr/bin/env python3
"""Campaign 14's runs as verify records: calibration/serving_bench/h100-vllm0.26.0-c14/verify_records.jsonl.

    python scripts/c14_verify_records.py            # write the file (atomically)
    python scripts/c14_verify_records.py --check    # exit 1 when the committed file differs from a rebuild

Each measured answer goes through what ``advisor verify --result FILE`` runs (advisor.probe.verify: read_result,
compare; advisor.probe.verify_record.record_of), with three inputs the campaign fixes instead of the user's machine:

- the answer: the pre-registered one (predictions.json, from advisor 1ea31b2, before ``benchmark`` objects existed)
  as the benchmark object advisor.render.bench.benchmark_of_figures builds from its figures: the closed loop at its
  C, the predicted TPOT / TTFT / output tok/s / decode step bands as they were committed, the SLA it claimed;
- the host: the GPU machine's fingerprint from host/ (nvidia-smi, lscpu, host.txt), not this machine's;
- dummy weights (the campaign ran ``--load-format dummy``), stored as ``weights: dummy``.

The answers' model ids are catalog ids; the results name the GPU machine's directories (same last path part:
advisor.probe.verify.same_model). An answer without a result (not run) has no record.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
CAMPAIGN = ROOT / "calibration" / "serving_bench" / "h100-vllm0.26.0-c14"
OUT = "verify_records.jsonl"


def host_of(folder: Path) -> dict:
    """``{"fingerprint", "host", "gpu", "gpus"}`` (advisor.probe.campaign.host_info's shape) from the campaign's host/."""
    from advisor.hardware.fingerprint import CpuInfo, HostFingerprint, PackageVersions
    from advisor.hardware.gpu_detect import GpuInfo

    host = (folder / "host" / "host.txt").read_text().splitlines()
    csv_row = (folder / "host" / "gpu.csv").read_text().splitlines()[1].split(", ")
    smi = (folder / "host" / "nvidia-smi.txt").read_text()
    lscpu = dict(re.findall(r"^([^:\n]+):\s+(.+)$", (folder / "host" / "lscpu.txt").read_text(), re.M))
    versions = dict(re.findall(r"(torch|vllm) (\S+)", next(ln for ln in host if ln.startswith("torch"))))
    fp = HostFingerprint(
        hostname=host[1].split()[1], kernel=host[1].split()[2],
        gpus=[GpuInfo(index=0, name=csv_row[0], driver_version=csv_row[1], memory_mib=int(csv_row[2].split()[0]))],
        cuda_version=re.search(r"CUDA Version: (\S+)", smi)[1], gpu_source="nvidia-smi",
        cpu=CpuInfo(model=lscpu["Model name"].strip(), sockets=int(lscpu["Socket(s)"]), threads=int(lscpu["CPU(s)"])),
        versions=PackageVersions(vllm=versions["vllm"], torch=versions["torch"]),
        env={"ARCTIC_INFERENCE_ENABLED": "0", "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True", "VLLM_PLUGINS": "",
             "VLLM_USE_FLASHINFER_SAMPLER": "0"},
        cudagraph_mode="FULL_AND_PIECEWISE", missing=["reconstructed from calibration/serving_bench/h100-vllm0.26.0-c14/host/"],
    )  # fmt: skip
    return {"fingerprint": fp.fingerprint, "host": fp.model_dump(mode="json"), "gpu": fp.spec_gpu(), "gpus": fp.gpu_count}


def build(folder: Path = CAMPAIGN) -> str:
    from advisor.model.load import load_profile
    from advisor.predict.step_correction import class_of, dtype_key
    from advisor.probe.verify import compare, read_result
    from advisor.probe.verify_record import record_of
    from advisor.render.bench import benchmark_of_figures
    from advisor.settings import Settings

    pre = json.loads((folder / "predictions.json").read_text())
    host = host_of(folder)
    settings = Settings()
    lines = []
    for a in pre["answers"]:
        result = folder / "results" / f"{a['id']}.json"
        if not result.is_file():
            continue  # not run (README.md): no record
        profile = load_profile(a["model"], settings)
        f = a["predicted"]
        predicted = {"tpot_ms": f["tpot_ms"], "ttft_ms": f["ttft_ms"], "output_throughput_tok_s": f["throughput_tok_s"],
                     "step_ms": f["step_ms"], "ttft_unloaded_ms": f.get("ttft_unloaded_ms"), "notes": a.get("figure_notes", [])}  # fmt: skip
        d = a["decision"]
        answer = {"model_id": a["model"], "arch_class": class_of(profile.arch, profile.attention),
                  "weights_dtype": dtype_key(profile.weights_dtype), "method": "none", "gpu": "H100", "gpus": 1,
                  "tensor_parallel_size": d["tensor_parallel_size"], "data_parallel_size": d["data_parallel_size"],
                  "vllm_version": pre["vllm"], "step_correction": 1.0, "running_per_replica": f["running_per_replica"],
                  "context_tokens": a["prompt_len"] + a["output_len"] / 2, "max_num_seqs": d["max_num_seqs"],
                  "max_num_batched_tokens": d["max_num_batched_tokens"], "kv_cache_dtype": d["kv_cache_dtype"],
                  "kv_cache_tokens": f["kv_cache_tokens"], "advisor_version": f"git {a['advisor_commit']}"}  # fmt: skip
        bench = benchmark_of_figures(model=a["model"], concurrency=a["concurrency"], prompt_len=a["prompt_len"],
                                     output_len=a["output_len"], predicted=predicted,
                                     sla={**a["sla"], "claimed": a["sla_met_predicted"]}, answer=answer)  # fmt: skip
        data = read_result(result)
        source = str(result.relative_to(ROOT))
        verdict = compare(data, bench, source=source)
        when = re.fullmatch(r"(\d{4})(\d\d)(\d\d)-(\d\d)(\d\d)(\d\d)", data["date"]).groups()
        rec = record_of(verdict, bench, host, weights="dummy", campaign=folder.name, label=a["id"],
                        created_at=f"{'-'.join(when[:3])}T{':'.join(when[3:])}Z")  # fmt: skip
        lines.append(rec.model_dump_json())
    return "".join(line + "\n" for line in lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="compare with the committed file; exit 1 when they differ")
    args = ap.parse_args()
    path = CAMPAIGN / OUT
    text = build()
    if args.check:
        same = path.is_file() and path.read_text() == text
        print(f"{path}: {'matches a rebuild' if same else 'differs from a rebuild'}")
        return 0 if same else 1
    from advisor.atomic import write_one

    write_one(path, text)
    print(f"wrote {path} ({text.count(chr(10))} records)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
