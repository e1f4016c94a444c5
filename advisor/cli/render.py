"""``advisor render``: the recommendation as deployable files (systemd + launch script, Kubernetes, Compose)."""

from __future__ import annotations

from pathlib import Path

import typer

from advisor.cli import options as o
from advisor.cli._app import app
from advisor.cli.common import JsonOpt, emit_json, model_arg, table, vllm_choice

FORMATS = ("systemd", "k8s", "compose")


def _multinode_note(decision, gpus_per_node: int) -> str:
    from advisor.render.multinode import layout

    try:
        lay = layout(decision, gpus_per_node)
    except Exception:  # noqa: BLE001 - the render itself reports a layout it refuses
        return ""
    return "" if lay is None else f" — runs as TP {lay.tp} x PP {lay.pp} over {lay.nodes} nodes (Ray), as predicted"


def _summary(rec, target, fmt: str, warnings: list[str], vllm, gpus_per_node: int = 8) -> str:
    from advisor.render.files import summary_line

    mem = rec.memory
    verdict = ("boots" if mem and mem.boots else "DOES NOT BOOT") + (f": {mem.kv_cache_tokens:,} KV tokens" if mem and mem.boots else "")
    rows = [
        ("model", target.model),
        ("host", f"{rec.host.gpus}x{rec.host.gpu} ({rec.host.origin})"),
        ("vLLM", f"{vllm.version} ({vllm.why})"),
        ("configuration", summary_line(rec.decision) + _multinode_note(rec.decision, gpus_per_node)),
        *([("servers", f"{rec.servers}: these files start one; run them on each of {rec.servers} nodes behind a load "
                       "balancer")] if rec.servers > 1 else []),
        ("memory", verdict if mem else "not planned"),
        ("serves", f"http://{target.host}:{target.port} ({fmt})"),
        ("env", ", ".join(f"{k}{'=<secret>' if v and k in dict(target.secret_env()) else ''}" for k, v in target.env) or "none"),
    ]
    lines = [table(rows, "Rendering")]
    if warnings:
        lines.append("Warnings:")
        lines += [f"  ! {w}" for w in warnings]
    return "\n".join(lines)


@app.command("render")
@o.with_recommend_options
def render_cmd(
    model: str = model_arg(),
    out: str = typer.Option(..., "--out", help="Directory to write into (created; every file is written or none is)."),
    fmt: str = typer.Option("systemd", "--format", help="systemd: launch.sh, vllm.service, vllm.env (0600); multi-node adds ray-worker.sh, vllm-ray-worker.service. k8s: vllm-secret.yaml (Secret, 0600) + vllm-deployment.yaml (PVC, Deployment, Service), multi-node vllm-lws.yaml (LeaderWorkerSet). compose: compose.yaml (0600, env inline)."),
    opts: o.RecommendOptions = None,
    vllm_bin: str = typer.Option("vllm", "--vllm-bin", help="vLLM executable: a name (resolved on PATH now, so the unit gets an absolute path) or a path. Not empty, no leading '-'."),
    env_file: str = typer.Option("/etc/vllm/vllm.env", "--env-file", help="Absolute path the unit's EnvironmentFile will be installed at."),
    host: str = typer.Option("127.0.0.1", "--host", help="Address vLLM listens on (an IP address or host name; 0.0.0.0 for all). compose: the address the port is published on (vLLM listens on 0.0.0.0 inside the container); k8s: ignored (the Service fronts the pod)."),
    port: int = typer.Option(8000, "--port", min=1, max=65535, help="Port vLLM listens on."),
    served_model_name: str = typer.Option(None, "--served-model-name", help="Model name clients send (default: MODEL)."),
    env: list[str] = typer.Option(None, "--env", metavar="NAME[=VALUE]", help="Extra variable for vllm.env (repeatable); NAME alone copies it from this environment, e.g. --env HF_TOKEN --env VLLM_API_KEY, so secrets stay off the command line."),
    gpus_per_node: int = typer.Option(None, "--gpus-per-node", min=1, help="GPUs in one node (default 8): a layout needing more is rendered multi-node (TP inside a node, PP across nodes, Ray)."),
    image: str = typer.Option(None, "--image", help="Container image for --format k8s/compose (default: vllm/vllm-openai:v<release of --vllm-version>, e.g. v0.33.0; with suffix decoding an image built FROM it with Arctic Inference by the rendered Containerfile)."),
    force: bool = typer.Option(False, "--force", help="Overwrite existing files, and render even a configuration the memory plan says does not boot."),
    json_out: bool = JsonOpt,
) -> None:  # fmt: skip
    """Write the recommendation as deployable files into --out and print what was rendered.

    A configuration predicted not to boot is refused (exit 8) with the reason and the nearest one
    that boots, unless --force. vllm.env holds every env variable (secrets too) and is written 0600."""
    from advisor.cli.recommend import build_recommendation
    from advisor.errors import UsageError
    from advisor.render.gate import check_boots
    from advisor.render.target import make_target, parse_env_options, serve_model
    from advisor.render.write import mode_for, write_files

    if not out.strip():
        raise UsageError("--out is empty: an empty path would silently mean the current directory; give a directory")
    if fmt not in FORMATS:
        raise UsageError(f"--format {fmt!r}: choose one of {', '.join(FORMATS)}")
    from advisor.cli.recommend import recommend_maybe_probe

    vllm = vllm_choice(opts.vllm_version)
    if image is not None:
        from advisor.render.quoting import check_image

        check_image(image)
    extra_env = parse_env_options(env)
    rec, _probed = recommend_maybe_probe(model, opts, quiet=json_out, gpus_per_node=gpus_per_node)
    target = make_target(serve_model(model) if rec.model["id"] == model else rec.model["id"], rec.decision,
                         vllm_bin=vllm_bin, env_file=env_file, host=host, port=port,
                         served_model_name=served_model_name, extra_env=extra_env, resolve=fmt == "systemd")  # fmt: skip
    from advisor.render.flags import flag_warnings

    warnings = list(rec.warnings) + list(target.warnings) + flag_warnings(rec.decision, vllm.version)
    warnings += check_boots(rec, lambda n: build_recommendation(model, opts, gpus_per_node=gpus_per_node, gpus=n, tp=None), force=force)
    warnings += [vllm.note] if vllm.note else []
    files, more = _render(fmt, target, rec, gpus_per_node=gpus_per_node or 8, image=image, version=vllm.version)
    warnings += more
    bench = _bench_files(files, rec, opts, target, vllm)
    written = write_files(Path(out), files, force=force)
    if json_out:
        emit_json({"files": [str(p) for p in written], "format": fmt, "warnings": warnings, "vllm": vllm.model_dump(),
                   "recommendation": rec.model_dump(mode="json"), "benchmark": bench})  # fmt: skip
        return
    print(_summary(rec, target, fmt, warnings, vllm, gpus_per_node or 8))
    for p in written:
        print(f"wrote {p}" + (" (mode 0600: holds the env, secrets included)" if mode_for(p.name) == 0o600 else ""))


def _bench_files(files: dict[str, str], rec, opts, target, vllm) -> dict:
    """Add bench.sh (the vllm bench serve run that checks the answer) and the answer itself, for
    ``advisor verify --prediction`` (advisor.render.bench); returns the benchmark object."""
    import json

    from advisor.cli.recommend import bench_for
    from advisor.render.bench import PREDICTION_FILE, render_script

    bench = bench_for(rec, opts, model=target.model, served_model_name=target.served_model_name, host=target.host, port=target.port)
    files["bench.sh"] = render_script(bench, target, rec.decision, vllm.version)
    files[PREDICTION_FILE] = json.dumps({**rec.model_dump(mode="json"), "vllm": vllm.model_dump(), "benchmark": bench}, indent=2) + "\n"
    return bench


def _render(fmt: str, target, rec, *, gpus_per_node: int, image: str | None, version: str) -> tuple[dict[str, str], list[str]]:
    from advisor.render.files import render_target

    if fmt == "systemd":
        from advisor.render.files import unit_warnings

        return render_target(target, rec.decision, version=version, host_dsa_queues=rec.host_dsa_queues,
                             gpus_per_node=gpus_per_node), unit_warnings(target)  # fmt: skip
    from advisor.render.containers import container_warnings, render_compose, render_k8s

    more = container_warnings(rec.decision, version, image, fmt)
    if fmt == "k8s":
        return render_k8s(target, rec.decision, version=version, image=image, gpu=rec.host.gpu,
                          weight_bytes=rec.model.get("weight_bytes"), gpus_per_node=gpus_per_node), more  # fmt: skip
    from advisor.errors import UsageError
    from advisor.render.multinode import layout

    lay = layout(rec.decision, gpus_per_node)
    if lay is not None:
        raise UsageError(f"TP {rec.decision.tensor_parallel_size} needs {lay.nodes} nodes of {gpus_per_node} GPUs: --format compose "
                         "renders one host only; use --format systemd (Ray head + workers) or --format k8s (LeaderWorkerSet)")  # fmt: skip
    return render_compose(target, rec.decision, version=version, image=image, gpu=rec.host.gpu), more
