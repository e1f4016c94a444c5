"""diff_hosts / comparable / host_warnings on fingerprints built in memory (pure functions)."""

from __future__ import annotations

import pytest

from advisor.hardware.dsa import DsaDevice, DsaInfo, WorkQueue
from advisor.hardware.fingerprint import CpuInfo, PackageVersions
from advisor.hardware.gpu_detect import GpuInfo
from advisor.hardware.host import HostFingerprint, comparable, diff_hosts, host_warnings

QUEUES = [f"wq{d}.{q}" for d in (0, 1) for q in range(4)]


def dsa(state: str = "enabled", saved: bool = True, clients: int = 0) -> DsaInfo:
    return DsaInfo(
        bus_present=True,
        devices={d: DsaDevice(state="enabled") for d in ("dsa0", "dsa1")},
        work_queues={
            wq: WorkQueue(
                device=f"dsa{wq[2]}",
                state=state,
                mode="shared",
                size=16,
                type="user",
                clients=clients,
                name="app",
            )
            for wq in QUEUES
        },
        config_path="/etc/accel-config/accel-config.conf",
        config_found=saved,
        saved_queues=QUEUES if saved and state == "enabled" else [],
    )


def b200_host(**update) -> HostFingerprint:
    """The write-up's host: 8 x B200, 2 x Xeon 8570, DSA queues as given."""
    base = HostFingerprint(
        hostname="dgx-b200-01",
        collected_at="2026-06-10T09:00:00+00:00",
        kernel="6.8.0-60-generic",
        gpus=[
            GpuInfo(
                index=i,
                name="NVIDIA B200",
                memory_mib=183359,
                driver_version="570.133.20",
                compute_cap="10.0",
            )
            for i in range(8)
        ],
        cuda_version="12.8",
        gpu_source="nvidia-smi",
        cpu=CpuInfo(model="INTEL(R) XEON(R) PLATINUM 8570", sockets=2, threads=224),
        versions=PackageVersions(vllm="1.7.dev0", torch="2.9.0", arctic_inference="0.3.0"),
        dsa=dsa(),
        env={
            "ARCTIC_INFERENCE_ENABLED": "0",
            "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
            "VLLM_PLUGINS": "",
        },
        cudagraph_mode="FULL_AND_PIECEWISE",
    )
    return base.model_copy(update=update)


def fields(diff) -> dict[str, bool]:
    return {d.field: d.comparable for d in diff.differences}


def test_identical_hosts():
    a = b200_host()
    d = diff_hosts(a, b200_host())
    assert d.comparable and d.differences == [] and comparable(a, b200_host())


def test_hostname_and_time_only_is_comparable():
    a = b200_host()
    b = b200_host(hostname="dgx-b200-02", collected_at="2026-06-12T10:00:00+00:00")
    d = diff_hosts(a, b)
    assert d.comparable and comparable(a, b)
    assert fields(d) == {"hostname": True, "collected_at": True}
    assert a.fingerprint == b.fingerprint


def test_dsa_queue_change_is_not_comparable_with_reason():
    off = b200_host(dsa=dsa(state="disabled"), collected_at="2026-06-02T09:00:00+00:00")
    on = b200_host()
    d = diff_hosts(off, on)
    assert not d.comparable and not comparable(off, on)
    flagged = {x.field for x in d.blocking}
    assert {f"dsa.wq.{wq}.state" for wq in QUEUES} <= flagged
    reason = next(x.reason for x in d.differences if x.field == "dsa.wq.wq0.0.state")
    assert "not enabled on A and enabled on B" in reason and "+33-36%" in reason
    # persistence and timestamps differ too, but do not block
    assert fields(d)["collected_at"] is True and fields(d)["dsa.saved_queues"] is True
    assert off.fingerprint != on.fingerprint


def test_clients_and_persistence_alone_are_comparable():
    a = b200_host(dsa=dsa(clients=0, saved=True))
    b = b200_host(dsa=dsa(clients=2, saved=False))
    d = diff_hosts(a, b)
    assert d.comparable, d.blocking
    assert fields(d)["dsa.wq.wq0.0.clients"] is True and fields(d)["dsa.persisted"] is True


def test_enabled_queue_resized_is_not_comparable():
    b = b200_host()
    b.dsa.work_queues["wq0.0"] = b.dsa.work_queues["wq0.0"].model_copy(update={"size": 32})
    d = diff_hosts(b200_host(), b)
    assert fields(d) == {"dsa.wq.wq0.0.size": False}


@pytest.mark.parametrize(
    ("update", "field"),
    [
        (
            {
                "gpus": [
                    GpuInfo(
                        index=i, name="NVIDIA H200", memory_mib=143771, driver_version="570.133.20"
                    )
                    for i in range(8)
                ]
            },
            "gpu.models",
        ),
        ({"cudagraph_mode": "PIECEWISE"}, "cudagraph_mode"),
        ({"cudagraph_mode": None}, "cudagraph_mode"),
        (
            {"versions": PackageVersions(vllm="0.32.0", torch="2.9.0", arctic_inference="0.3.0")},
            "versions.vllm",
        ),
        (
            {
                "versions": PackageVersions(
                    vllm="1.7.dev0", torch="2.10.0", arctic_inference="0.3.0"
                )
            },
            "versions.torch",
        ),
        ({"env": {"VLLM_LHC_DSA": "1"}}, "env.VLLM_LHC_DSA"),
        ({"env": {}}, "env.PYTORCH_CUDA_ALLOC_CONF"),
        ({"cpu": CpuInfo(model="AMD EPYC 9654", sockets=2, threads=224)}, "cpu.model"),
    ],
)
def test_perf_differences_are_not_comparable(update, field):
    a, b = b200_host(), b200_host(**update)
    d = diff_hosts(a, b)
    assert not d.comparable and field in {x.field for x in d.blocking}
    assert all(x.reason for x in d.differences)
    assert a.fingerprint != b.fingerprint


def test_gpu_count_and_driver():
    a = b200_host()
    b = b200_host(gpus=[g.model_copy(update={"driver_version": "575.1"}) for g in a.gpus[:4]])
    blocking = {x.field for x in diff_hosts(a, b).blocking}
    assert {"gpu.count", "gpu.visible_count", "gpu.driver"} <= blocking


def test_non_perf_env_is_comparable_and_visible_devices_by_count():
    a = b200_host()
    b = b200_host(env={**a.env, "VLLM_LOGGING_LEVEL": "DEBUG", "VLLM_PORT": "9000"})
    assert diff_hosts(a, b).comparable
    c = b200_host(env={**a.env, "CUDA_VISIBLE_DEVICES": "7,6,5,4,3,2,1,0"})
    d = diff_hosts(a, c)
    assert d.comparable and fields(d) == {"env.CUDA_VISIBLE_DEVICES": True}
    e = b200_host(env={**a.env, "CUDA_VISIBLE_DEVICES": "0,1"})
    assert {x.field for x in diff_hosts(a, e).blocking} == {"gpu.visible_count"}


def test_comparable_matches_fingerprint_equality():
    variants = [
        b200_host(),
        b200_host(hostname="x"),
        b200_host(dsa=dsa(state="disabled")),
        b200_host(dsa=dsa(clients=5)),
        b200_host(cudagraph_mode="PIECEWISE"),
        b200_host(env={"VLLM_LOGGING_LEVEL": "INFO"}),
        b200_host(env={}),
        b200_host(kernel="6.9"),
    ]
    for a in variants:
        for b in variants:
            d = diff_hosts(a, b)
            assert d.comparable == comparable(a, b) == (a.fingerprint == b.fingerprint)
            assert d.comparable == all(x.comparable for x in d.differences)


def test_round_trip_preserves_verdicts():
    a = b200_host()
    again = HostFingerprint.model_validate_json(a.model_dump_json())
    assert diff_hosts(a, again).differences == []


def test_host_warnings_clean_for_saved_writeup_host():
    assert host_warnings(b200_host()) == []


def test_host_warnings_unsaved_queues_and_visible_devices():
    fp = b200_host(dsa=dsa(saved=False), env={"CUDA_VISIBLE_DEVICES": "0,1,2,3"})
    warnings = host_warnings(fp)
    assert any("lost at reboot; run accel-config save-config" in w for w in warnings)
    assert any("4 of 8 GPUs visible" in w for w in warnings)


def test_host_warnings_gpu_problems():
    unknown = b200_host(gpus=[GpuInfo(index=0, name="NVIDIA GH200 480GB")])
    assert any("not in the spec table" in w for w in host_warnings(unknown))
    mixed = b200_host(
        gpus=[GpuInfo(index=0, name="NVIDIA H100 80GB HBM3"), GpuInfo(index=1, name="NVIDIA H200")]
    )
    assert any("different models" in w for w in host_warnings(mixed))
    assert mixed.spec_gpu() is None and b200_host().spec_gpu() == "B200"
    none = b200_host(gpus=[], missing=["nvidia-smi: not on PATH"])
    assert host_warnings(none)[0].startswith("no GPUs detected (nvidia-smi: not on PATH)")
    no_vllm = b200_host(versions=PackageVersions())
    assert any("vLLM is not installed" in w for w in host_warnings(no_vllm))
