"""A probe campaign: each configuration on a fresh real vLLM server, same prompts, one record each.

For every configuration: start the server (:mod:`advisor.probe.server`), scrape ``/metrics``, run
the load (:mod:`advisor.probe.load`), scrape again, stop the server, and write a ProbeRecord to the
store at once. Vanilla configurations run first so that suffix/ngram records get their gain and
implied R against the vanilla run of the same campaign. A configuration that does not boot is
recorded (``boot_failed``/``timeout``, with the recognised cause) and the campaign goes on.

The campaign id is a hash of everything that makes runs comparable (host fingerprint, model,
corpus, load, base settings, server command, extra args, env); rerunning the same command finds its
finished configurations in the store and skips them.
"""

from __future__ import annotations

import contextlib

import hashlib
import json
import os
import shlex
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from advisor.errors import ProbeError, UsageError
from advisor.domain.decision import Decision
from advisor.domain.secrets import redacted_argv
from advisor.probe import hostcpu
from advisor.probe.configs import ProbeConfig, probe_decision, probe_flags
from advisor.probe.load import LoadSpec, mean_in_flight
from advisor.vllm_facts import DEFAULT_VERSION
from advisor.probe.record import ProbeRecord
from advisor.probe.store import StoreWriteError

if TYPE_CHECKING:
    from advisor.probe.corpus import Corpus
    from advisor.settings import Settings
    from advisor.probe.store import ProbeStore


class CampaignSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model: str
    corpus: str
    configs: list[ProbeConfig]
    load: LoadSpec
    base: Decision = Field(default_factory=Decision)
    server_cmd: str = "vllm serve"
    extra_args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    api: str = "auto"
    campaign: str | None = Field(default=None, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
    """Explicit campaign id (letters, digits, '.', '_', '-'; it names a folder under the data dir, so
    no '/' and no leading '.'); default: derived from the settings (see module doc)."""
    boot_timeout_s: float = Field(default=900.0, gt=0)
    retry_failed: bool = False
    passes: int = Field(default=1, ge=1, le=10)
    """Fresh boots of every configuration (``advisor probe --repeat``), vanilla first in each pass, so each
    speculative run has its own pass's vanilla and ``calibrate`` measures the host's run-to-run spread of R
    (host_infer.run_to_run_sigma). Not part of the campaign id: rerunning with a larger count adds passes."""
    vllm_version: str = DEFAULT_VERSION
    """Flag mapping to render with (advisor.render.flags)."""
    save_responses: str | None = None
    """A JSON Lines file to keep the model's own outputs in: one line per finished request of every
    configuration probed (``advisor probe --save-responses``; format in :func:`responses_lines`),
    which ``advisor kbar --corpus FILE`` and ``recommend --corpus FILE`` replay. Not part of the
    campaign id: saving outputs does not change what is measured."""

    @property
    def weights(self) -> str:
        """``dummy`` when the server loads random weights (vLLM's ``--load-format dummy`` among the
        extra args, which ``advisor probe --dummy-weights`` adds), else ``real``."""
        return "dummy" if load_format(self.extra_args) == "dummy" else "real"


def load_format(args: list[str]) -> str | None:
    """The value of vLLM's ``--load-format`` in ``args`` (``--load-format X`` or ``--load-format=X``)."""
    for i, a in enumerate(args):
        if a.startswith("--load-format="):
            return a.split("=", 1)[1]
        if a == "--load-format" and i + 1 < len(args):
            return args[i + 1]
    return None


def with_dummy_weights(extra: list[str]) -> list[str]:
    """``--dummy-weights``: ``extra`` (the server flags of ``--extra-args``) with vLLM's ``--load-format dummy``
    (kept where it is there already); UsageError when ``extra`` names another load format."""
    given = load_format(extra)
    if given not in (None, "dummy"):
        raise UsageError(f"--dummy-weights contradicts --extra-args' --load-format {given}")
    return extra if given is not None else [*extra, "--load-format", "dummy"]


def server_extra_args(text: str, dummy_weights: bool) -> list[str]:
    """``--extra-args`` (one shell-quoted string of server flags) as argv, with vLLM's ``--load-format dummy`` for
    ``--dummy-weights`` (:func:`with_dummy_weights`): how ``advisor probe`` and ``advisor verify --boot`` read them;
    UsageError on unbalanced quotes."""
    import shlex

    try:
        extra = shlex.split(text)
    except ValueError as exc:
        raise UsageError(f"--extra-args: {exc}") from None
    return with_dummy_weights(extra) if dummy_weights else extra


class CampaignResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    campaign_id: str
    probed: list[ProbeRecord] = Field(default_factory=list)
    skipped: list[ProbeRecord] = Field(default_factory=list)
    """Configurations found done in the store (not probed again)."""

    @property
    def records(self) -> list[ProbeRecord]:
        return [*self.skipped, *self.probed]


def server_program(server_cmd: str) -> list[str]:
    """Program prefix that takes the model next: ``vllm serve`` as is, anything else with ``--model``."""
    try:
        prefix = shlex.split(server_cmd)
    except ValueError as exc:
        raise UsageError(f"--server-cmd {server_cmd!r}: {exc} (quote it as in a shell)") from None
    if not prefix:
        raise UsageError("--server-cmd is empty")
    return prefix if prefix[-1] in ("serve", "--model") else [*prefix, "--model"]


def model_argument(model: str) -> str:
    """MODEL as the server's argument: a MODEL starting with '-' would be read by ``vllm serve`` as a flag
    (issue 43: ``probe -- --trust-remote-code``), so a local path of that name goes as ``./-name`` and
    anything else is refused (a Hugging Face id never starts with '-')."""
    if not model.startswith("-"):
        return model
    if os.path.lexists(model):
        return os.path.join(".", model)
    raise UsageError(f"MODEL {model!r} starts with '-': vLLM would read it as a flag; give a Hugging Face id, "
                     f"or a model directory of that name as ./{model}")  # fmt: skip


def server_argv(spec: CampaignSpec, cfg: ProbeConfig) -> list[str]:
    return [*server_program(spec.server_cmd), model_argument(spec.model), *probe_flags(cfg, spec.base, spec.vllm_version),
            *spec.extra_args]  # fmt: skip


def host_info(settings: Settings) -> dict[str, Any]:
    """``{"fingerprint", "host", "gpu", "gpus"}`` from advisor.hardware.host when present, else minimal."""
    try:
        from advisor.hardware.host import collect_host
    except ImportError:
        collect_host = None
    if collect_host is not None:
        fp = collect_host(settings)
        return {"fingerprint": fp.fingerprint, "host": fp.model_dump(mode="json"), "gpu": fp.spec_gpu(), "gpus": fp.gpu_count}
    import platform
    import socket

    host = {"hostname": socket.gethostname(), "machine": platform.machine(), "kernel": platform.release()}
    digest = hashlib.sha256(json.dumps(host, sort_keys=True).encode()).hexdigest()
    return {"fingerprint": digest, "host": host, "gpu": None, "gpus": 0}


def campaign_id(spec: CampaignSpec, fingerprint: str) -> str:
    if spec.campaign:
        return spec.campaign
    key = {
        "host": fingerprint,
        "model": spec.model,
        "corpus": spec.corpus,
        "load": spec.load.model_dump(mode="json", exclude={"keep_responses"}),
        "base": spec.base.model_dump(mode="json"),
        "server_cmd": server_program(spec.server_cmd),
        "extra_args": spec.extra_args,
        "env": spec.env,
        "api": spec.api,
    }
    return "c-" + hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:12]


def _server_version(base_url: str) -> str | None:
    import httpx

    from advisor.errors import printable

    try:
        with httpx.Client(timeout=10.0, trust_env=False) as client:
            doc = client.get(f"{base_url}/version").json()
    except (httpx.HTTPError, ValueError, RecursionError):
        return None
    version = doc.get("version") if isinstance(doc, dict) else None
    # vLLM answers {"version": "<release>"}; anything else is not a version to record.
    return printable(version[:64], keep_newlines=False) if isinstance(version, str) else None


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def probe_one(
    spec: CampaignSpec, cfg: ProbeConfig, corpus: Corpus, *, cid: str, host: dict, log_dir: Path,
    vanilla_tput: float | None, show_progress: bool, responses: dict | None = None,
) -> ProbeRecord:  # fmt: skip
    """Boot, load, measure one configuration; returns its record (failed boots included).
    ``responses``: when given (and the load keeps them), gets ``outputs`` (the finished requests'
    :class:`~advisor.probe.load.Response`) and ``api`` (the endpoint served)."""
    from advisor.probe import metrics
    from advisor.probe.load import run_load
    from advisor.probe.server import BootFailure, running_server

    decision = probe_decision(cfg, spec.base)
    argv = server_argv(spec, cfg)
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in cfg.label)
    log_path = log_dir / f"{safe}-{datetime.now().strftime('%Y%m%dT%H%M%S')}.log"
    base = record_fields(spec, cfg, cid=cid, host=host, argv=argv, log_path=log_path)
    try:
        with running_server(
            argv, log_path=log_path, env={**decision.env, **spec.env}, boot_timeout_s=spec.boot_timeout_s, api=spec.api,
            model=spec.model,
        ) as srv:
            base.update(command=redacted_argv(srv.argv), boot_s=round(srv.boot_s, 2), vllm_version=_server_version(srv.base_url))
            before = metrics.scrape(srv.base_url)
            with hostcpu.watch(srv.process.pid) as cpu:
                load = run_load(
                    srv.base_url, srv.served_model, srv.api, corpus.prompts, spec.load,
                    show_progress=show_progress, label=cfg.label, alive=lambda: srv.process.poll() is None,
                    headers=srv.headers,
                )  # fmt: skip
            if responses is not None:
                responses.update(outputs=load.responses, api=srv.api)
            srv.check_alive()
            try:
                after = metrics.scrape(srv.base_url)
            except ProbeError:
                srv.check_alive(grace_s=2.0)  # a server that died mid-load crashed; it is not a metrics problem
                raise
            # The measured window is the load's own (the scrapes' time is outside it).
            win = metrics.window(before, after, seconds=load.elapsed_s or None)
    except BootFailure as exc:
        return ProbeRecord(**base, outcome=exc.outcome, failure=str(exc.failure))
    except ProbeError as exc:  # e.g. no vLLM counters at /metrics: this configuration is unmeasurable
        return ProbeRecord(**base, outcome="error", failure=f"probe_error: {exc}")
    except (ValueError, TypeError, KeyError, IndexError, AttributeError, RecursionError) as exc:
        # A server answer of an unexpected shape: this configuration is recorded, the campaign goes on.
        return ProbeRecord(**base, outcome="error", failure=f"probe_error: malformed server answer: {type(exc).__name__}: {exc}")
    return measured_record(base, load, win, cfg, vanilla_tput, cpu=cpu[0] if cpu else None)


def record_fields(spec: CampaignSpec, cfg: ProbeConfig, *, cid: str, host: dict, argv: list[str], log_path: Path) -> dict:
    """The fields every record of ``cfg`` in this campaign carries, measured or not (boot, load and
    counters add theirs): ``probe_one`` and the GPU driver ``calibration/gpu_real/real_campaign.py``."""
    decision = probe_decision(cfg, spec.base)
    return dict(
        campaign_id=cid, model=spec.model, config=cfg.label, corpus=spec.corpus, concurrency=spec.load.concurrency,
        gpu=host["gpu"], gpus=host["gpus"], tensor_parallel_size=decision.tensor_parallel_size,
        host_fingerprint=host["fingerprint"], host=host["host"], started_at=_now(), command=redacted_argv(argv),
        speculative_method=None if cfg.is_vanilla else cfg.method, num_speculative_tokens=cfg.k,
        gpu_memory_utilization=decision.gpu_memory_utilization, max_model_len=decision.max_model_len,
        max_tokens=spec.load.max_tokens, log_path=str(log_path), weights=spec.weights,
    )  # fmt: skip


def measured_record(base: dict, load, win, cfg: ProbeConfig, vanilla_tput: float | None, *, cpu=None) -> ProbeRecord:
    """The record of one finished load: ``base`` (``record_fields`` + boot facts), the load's result,
    the counter window and ``cpu`` (``hostcpu.CpuWindow`` of the load, when watched); counters no vLLM
    produces are recorded as unmeasurable, not raised."""
    if cpu is not None:
        base = {**base, "engine_cpu_busy": cpu.engine_cpu_busy, "client_cpu_busy": cpu.client_cpu_busy,
                "host_loop_ms": cpu.host_loop_ms, "host_loop_cpu_ms": cpu.host_loop_cpu_ms}  # fmt: skip
    ok = load.requests_ok > 0 and win.generation_tokens > 0
    failure = None if ok else "no_output: " + (load.errors[0] if load.errors else "no request finished")
    lie = implausible_window(load, win, base.get("max_tokens")) if ok else None
    if lie:  # the server's counters disagree with what the client received: recorded, never fed to calibrate
        return ProbeRecord(**base, outcome="error", failure=f"probe_error: implausible measurement: {lie}")
    # Without spec-decode counters a spec run's tokens per step is unknown, not 1.
    tps = win.tokens_per_step if cfg.is_vanilla or win.accepted_tokens is not None else None
    try:
        return _measured_record(base, ok, failure, load, win, tps, cfg, vanilla_tput)
    except ValidationError as exc:  # counters no vLLM produces (e.g. 1e300 tok/s): unmeasurable, not a crash
        first = exc.errors()[0]
        return ProbeRecord(**base, outcome="error", failure=f"probe_error: implausible measurement "
                           f"{'.'.join(map(str, first['loc']))}={first.get('input')!r}: {first['msg']}")  # fmt: skip


COUNTER_SLACK = 0.02
"""Relative slack between the server's generation counter and the client's token counts (a usage block rounds
nothing, but a request finishing as the window closes may be counted on one side only)."""


def implausible_window(load, win, max_tokens: int | None) -> str | None:
    """Why the server's ``/metrics`` window cannot be what the load produced, or None. The client is the witness:
    the server cannot have generated fewer tokens than the finished requests' usage blocks report, nor more than
    every request the client sent could have asked for (``max_tokens`` each: finished, failed and cut at the
    deadline). The per-step bounds (K̄ within [1, 1 + K], accepted <= drafted) are ProbeRecord's own checks."""
    gen = win.generation_tokens
    if load.output_tokens and gen < load.output_tokens * (1 - COUNTER_SLACK):
        return (f"the server counted {gen:,.0f} generated tokens, fewer than the {load.output_tokens:,} the client "
                "received in finished requests")  # fmt: skip
    sent = load.requests_ok + load.requests_failed + load.requests_cut
    if max_tokens and sent and gen > sent * max_tokens * (1 + COUNTER_SLACK):
        return (f"the server counted {gen:,.0f} generated tokens, more than the {sent} requests the client sent could "
                f"produce at max_tokens {max_tokens} ({sent * max_tokens:,}); the client received {load.output_tokens:,}")
    return None


def _measured_record(base, ok, failure, load, win, tps, cfg, vanilla_tput) -> ProbeRecord:
    from advisor.probe import metrics

    return ProbeRecord(
        **base,
        outcome="ok" if ok else "error",
        failure=failure,
        duration_s=round(win.seconds, 3),
        requests=load.requests_ok,
        requests_failed=load.requests_failed,
        output_tokens=int(win.generation_tokens),
        throughput_tok_s=win.throughput if ok else None,
        mean_acceptance_length=win.mean_acceptance_length,
        tokens_per_step=tps,
        implied_r=None if cfg.is_vanilla else metrics.implied_r(tps, win.throughput, vanilla_tput),
        spec_drafts=None if win.drafts is None else int(win.drafts),
        spec_draft_tokens=None if win.draft_tokens is None else int(win.draft_tokens),
        spec_accepted_tokens=None if win.accepted_tokens is None else int(win.accepted_tokens),
        acceptance_per_position=win.acceptance_per_position,
        ttft_ms_p50=load.ttft_ms_p50,
        ttft_ms_p99=load.ttft_ms_p99,
        itl_ms_p50=load.itl_ms_p50,
        itl_ms_p99=load.itl_ms_p99,
        mean_in_flight=mean_in_flight(load),
        corpus_exhausted=load.corpus_exhausted,
    )


def _measured_vanilla(rec: ProbeRecord) -> bool:
    """Whether ``rec`` is a vanilla run a speculative one can be compared with."""
    return rec.config == "vanilla" and rec.outcome == "ok" and bool(rec.throughput_tok_s)


def run_campaign(
    spec: CampaignSpec,
    settings: Settings,
    store: ProbeStore,
    *,
    say: Callable[[str], None] = print,
    show_progress: bool = False,
    on_record: Callable[[ProbeRecord], None] | None = None,
) -> CampaignResult:
    """Probe every configuration of ``spec`` not already done; each record is stored when finished."""
    from advisor.probe.corpus import load_corpus

    if not spec.configs:
        raise UsageError("no configuration to probe")
    model_argument(spec.model)  # before any boot
    # Prompts that cannot fit max_model_len with room for the output are left out (~2 chars/token
    # is conservative for real tokenizers); what still does not fit is counted as rejected.
    room = spec.base.max_model_len - spec.load.max_tokens
    if room < 16:
        raise UsageError(f"--max-tokens {spec.load.max_tokens} leaves no room for a prompt in max_model_len {spec.base.max_model_len}")
    corpus = load_corpus(spec.corpus, max_chars=2 * room)
    host = host_info(settings)
    cid = campaign_id(spec, host["fingerprint"])
    log_dir = Path(settings.data_dir) / "campaigns" / cid
    with campaign_lock(log_dir, cid):
        return _run_locked(spec, store, corpus, host, cid, log_dir, say=say, show_progress=show_progress, on_record=on_record)


@contextlib.contextmanager
def campaign_lock(log_dir: Path, cid: str):
    """One process probes a campaign at a time (an exclusive ``flock`` on its folder's lock file):
    a second one is told and stops instead of redoing every configuration on the same GPUs."""
    import fcntl
    import os

    try:
        log_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(log_dir / ".lock", os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        raise ProbeError(f"cannot create the campaign folder {log_dir}: {exc.strerror or exc}") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip()
            raise ProbeError(f"campaign {cid} is being probed by another advisor process"
                             + (f" (pid {holder})" if holder.isdigit() else "")
                             + ": wait for it to finish, then rerun to resume (its finished configurations are kept)") from None  # fmt: skip
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        yield
    finally:
        os.close(fd)


def _todo(spec: CampaignSpec, records: list[ProbeRecord]) -> tuple[list[tuple[int, ProbeConfig]], dict[str, ProbeRecord]]:
    """What is left of ``spec``'s passes given the campaign's stored ``records``: [(pass, configuration)] in probe
    order (pass by pass, vanilla first in each), and the latest record of each configuration with nothing left.
    A pass is done by an ok record; a configuration whose latest record failed is not booted again (it would fail
    again) unless ``retry_failed``."""
    ok: dict[str, int] = {}
    latest: dict[str, ProbeRecord] = {}
    for rec in records:  # the store lists them in insertion order
        latest[rec.config] = rec
        ok[rec.config] = ok.get(rec.config, 0) + (rec.outcome == "ok")
    order = sorted(spec.configs, key=lambda c: not c.is_vanilla)
    todo, finished = [], {}
    for cfg in order:
        last = latest.get(cfg.label)
        if last is not None and last.outcome != "ok" and not spec.retry_failed:
            finished[cfg.label] = last
        elif ok.get(cfg.label, 0) >= spec.passes:
            finished[cfg.label] = last  # type: ignore[assignment]
    for n in range(1, spec.passes + 1):
        todo += [(n, c) for c in order if c.label not in finished and ok.get(c.label, 0) < n]
    return todo, finished


def _run_locked(spec, store, corpus, host, cid, log_dir, *, say, show_progress, on_record) -> CampaignResult:
    stored = store.list_records(campaign_id=cid)
    steps, done = _todo(spec, stored)
    result = CampaignResult(campaign_id=cid, skipped=[done[c.label] for c in spec.configs if c.label in done])
    passes = f" x {spec.passes} passes" if spec.passes > 1 else ""
    if stored:
        names = ", ".join(r.config for r in result.skipped)
        say(f"resuming campaign {cid}{passes}: " + (f"already done: {names}" if names else f"{len(stored)} record(s) kept")
            + ("; nothing left to probe" if not steps else f"; {len(steps)} boot(s) left"))  # fmt: skip
    else:
        say(f"campaign {cid}: {len(spec.configs)} configuration(s){passes}, corpus {corpus.name} ({len(corpus.prompts)} prompts)")
    # each speculative run is compared with the latest vanilla before it (its own pass's)
    vanilla = next((r for r in reversed(stored) if _measured_vanilla(r)), None)
    keep = spec.save_responses is not None
    if keep:
        from advisor.atomic import check_target

        check_target(Path(spec.save_responses))  # refuse a bad target before any boot
        check_responses_file(Path(spec.save_responses), spec.corpus)
        spec = spec.model_copy(update={"load": spec.load.model_copy(update={"keep_responses": True})})
    for i, (n, cfg) in enumerate(steps, 1):
        tag = f"pass {n}/{spec.passes} " if spec.passes > 1 else ""
        say(f"[{i}/{len(steps)}] {tag}{cfg.label}: starting vLLM")
        t0 = time.monotonic()
        outputs: dict | None = {} if keep else None
        record = probe_one(
            spec, cfg, corpus, cid=cid, host=host, log_dir=log_dir, vanilla_tput=vanilla.throughput_tok_s if vanilla else None,
            show_progress=show_progress, responses=outputs,
        )  # fmt: skip
        try:  # the measurement first, then the (larger) responses file: a full disk costs the file, not the record
            store.insert(record)
        except StoreWriteError:
            say(f"[{i}/{len(steps)}] {summary_line(record, vanilla.throughput_tok_s if vanilla else None)}: NOT STORED")
            say(f"the measurement, kept here as one JSON line ({RECORD_LINE_FORMAT}): {record.model_dump_json()}")
            raise
        result.probed.append(record)
        if outputs and record.outcome == "ok":
            save_responses(Path(spec.save_responses), cid, cfg.label, spec, corpus, outputs["outputs"], outputs["api"])
        if _measured_vanilla(record):
            vanilla = record
        say(f"[{i}/{len(steps)}] {summary_line(record, vanilla.throughput_tok_s if vanilla else None)} ({time.monotonic() - t0:.0f}s)")
        if record.outcome == "ok":
            for note in hostcpu.cpu_notes(record, vanilla):
                say(f"    note: {note}")
        if on_record is not None:
            on_record(record)
    return result


RECORD_LINE_FORMAT = "a ProbeRecord, as the store's record_json"
"""How a record the store could not take (a full disk) is printed: the store's own JSON of it."""
RESPONSES_FORMAT = "advisor-probe-responses/1"


def responses_lines(cid: str, label: str, spec: CampaignSpec, corpus: Corpus, outputs: list,
                    api: str | None = None) -> list[str]:  # fmt: skip
    """One JSON line per finished request, in prompt order: what the model itself generated.

    Keys: ``format`` (:data:`RESPONSES_FORMAT`), ``campaign_id``, ``config``, ``model``, ``corpus``,
    ``concurrency``, ``max_tokens``, ``temperature``, ``api`` (``chat``/``completions``, as served),
    ``index`` (position in the corpus), ``prompt`` (text), ``messages`` (chat messages or null),
    ``response`` (text), ``completion_tokens``, ``finish_reason``, ``prompt_token_ids`` and
    ``token_ids`` (vLLM's own, when the server returned them). ``advisor kbar`` reads it as the
    ``generation`` format (advisor.kbar.formats)."""
    lines = []
    for r in sorted(outputs, key=lambda r: r.index):
        p = corpus.prompts[r.index]
        lines.append(json.dumps({
            "format": RESPONSES_FORMAT, "campaign_id": cid, "config": label, "model": spec.model, "corpus": spec.corpus,
            "concurrency": spec.load.concurrency, "max_tokens": spec.load.max_tokens,
            "temperature": spec.load.temperature, "api": api, "index": r.index, "prompt": p.text,
            "messages": p.messages, "response": r.text, "completion_tokens": r.completion_tokens,
            "finish_reason": r.finish_reason, "prompt_token_ids": r.prompt_token_ids, "token_ids": r.token_ids,
        }, ensure_ascii=False))  # fmt: skip
    return lines


def check_responses_file(path: Path, corpus: str | None) -> None:
    """Refuse (UsageError, before any boot) a --save-responses target that is the corpus itself, or an existing file
    that is not a responses file (every non-empty line a JSON object of :data:`RESPONSES_FORMAT`, UTF-8): it would be
    rewritten, and lines that are not responses would be lost (issue 43 item 4)."""
    from advisor.errors import UsageError

    if corpus:
        src = Path(corpus).expanduser()
        try:
            same = src.is_file() and path.exists() and path.resolve() == src.resolve()
        except OSError:
            same = False
        if same or (src.is_file() and not path.exists() and path.absolute() == src.absolute()):
            raise UsageError(f"--save-responses {path}: that is the corpus being probed; the model's answers would be "
                             "appended to its prompts. Choose another file")  # fmt: skip
    if not path.exists():
        return
    if not path.is_file():
        raise UsageError(f"--save-responses {path}: not a regular file; choose a new path or an earlier responses file")
    try:
        with path.open("rb") as fh:
            raw = fh.read(256 * 1024 * 1024 + 1)
        text = raw.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"--save-responses {path}: cannot be read as a UTF-8 responses file ({exc}); choose another "
                         "path") from None  # fmt: skip
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            obj = None
        if not isinstance(obj, dict) or obj.get("format") != RESPONSES_FORMAT:
            raise UsageError(f"--save-responses {path}: line {n} is not an advisor responses record (format "
                             f"{RESPONSES_FORMAT!r}): the file would be rewritten and its other lines lost; choose a new "
                             "path or an earlier responses file")  # fmt: skip


def save_responses(path: Path, cid: str, label: str, spec: CampaignSpec, corpus: Corpus, outputs: list,
                   api: str | None) -> None:  # fmt: skip
    """Write ``label``'s outputs into ``path`` atomically, keeping the lines of other configurations
    (and campaigns) already there, so a resumed campaign's file holds every configuration."""
    from advisor.atomic import write_one

    kept: list[str] = []
    if path.is_file():
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                obj = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(obj, dict) and not (obj.get("campaign_id") == cid and obj.get("config") == label):
                kept.append(line)
    new = responses_lines(cid, label, spec, corpus, outputs, api)
    write_one(path, "".join(f"{line}\n" for line in [*kept, *new]))


def summary_line(rec: ProbeRecord, vanilla_tput: float | None = None) -> str:
    """One human line for a record."""
    if rec.outcome != "ok":
        where = f" (log: {rec.log_path})" if rec.log_path else ""
        return f"{rec.config}: {rec.outcome}: {rec.failure}{where}"
    parts = [f"{rec.config}: ok", f"{rec.throughput_tok_s:,.1f} tok/s"]
    if rec.speculative_method:
        if rec.tokens_per_step:
            parts.append(f"K̄ {rec.tokens_per_step:.2f}")
        if rec.mean_acceptance_length:
            parts.append(f"acceptance length {rec.mean_acceptance_length:.2f}")
        if vanilla_tput and rec.throughput_tok_s:
            parts.append(f"gain {rec.throughput_tok_s / vanilla_tput:.2f}x")
        if rec.implied_r:
            parts.append(f"R {rec.implied_r:.2f}")
    if rec.weights == "dummy":
        parts.append("dummy weights: step cost and memory only, K̄ not learnt")
    if rec.ttft_ms_p50 is not None:
        parts.append(f"TTFT p50 {rec.ttft_ms_p50:.0f} ms")
    if rec.boot_s is not None:
        parts.append(f"boot {rec.boot_s:.0f}s")
    if rec.corpus_exhausted:
        parts.append(f"corpus ran out after {rec.requests} requests ({rec.duration_s or 0:.1f}s of load; "
                     "more prompts give the full --duration window)")
    return ", ".join(parts)

