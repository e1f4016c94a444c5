#!/usr/bin/env python3
"""Several loads per vLLM boot, through the product's own probe code, one ProbeRecord per load.

``advisor probe`` boots one server per configuration and runs one load. On a GPU lent for 30
minutes that is too many boots for configs x corpora x concurrencies, so this driver boots each
configuration once and runs every load in turn against it, with the same pieces ``advisor probe``
uses: ``probe.server.running_server`` (boot, health, warm-up), ``probe.load.run_load``,
``probe.metrics`` (counter windows), ``probe.campaign`` (argv, campaign id, record) and
``probe.store`` (SQLite). Each load is recorded under the campaign id ``advisor probe`` derives for
that corpus and concurrency, so ``advisor calibrate`` and ``recommend`` read them like any probe.

Loads of one boot use DISJOINT prompt slices (suffix decoding caches every earlier response of
the server; a prompt answered twice would be accepted almost whole the second time). Every
configuration gets the same slices, so gains compare equal work. Each load is bounded by its
slice (``--requests``-style, not time), so every configuration serves the same requests.

    python3 calibration/gpu_real/real_campaign.py --model DIR --configs vanilla,suffix:32,ngram:4 \
        --load humaneval.jsonl:1:0:8 --load humaneval.jsonl:8:8:40 ... \
        --max-tokens 256 --data-dir D --out O --server-cmd "python3 -m vllm.entrypoints.openai.api_server"

``--load FILE:CONCURRENCY:START:END`` (prompts START..END-1 of FILE). The model's own outputs of
every load are written to ``O/responses-<config>-<corpus>-c<N>.jsonl`` (prompt + response), the
records to ``O/records.jsonl``. With vLLM's ``return_token_ids`` (LoadSpec.keep_responses asks for
it) each line also has ``finish_reason``, ``prompt_token_ids`` and ``token_ids``, which ``advisor
kbar`` replays as they are; ``calibration/gpu_real/replay_own.py`` replays a run folder.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from advisor.domain.decision import Decision  # noqa: E402
from advisor.kbar.runs import responses_name  # noqa: E402
from advisor.probe import hostcpu, metrics  # noqa: E402
from advisor.probe.campaign import (  # noqa: E402
    CampaignSpec, _now, _server_version, campaign_id, host_info, measured_record, record_fields, server_argv,
    summary_line,
)
from advisor.probe.configs import parse_configs, probe_decision  # noqa: E402
from advisor.probe.corpus import Corpus, load_corpus  # noqa: E402
from advisor.probe.load import LoadSpec, run_load  # noqa: E402
from advisor.probe.record import ProbeRecord  # noqa: E402
from advisor.probe.server import BootFailure, running_server  # noqa: E402
from advisor.probe.store import open_store  # noqa: E402
from advisor.settings import load_settings  # noqa: E402


def parse_load(text: str) -> tuple[str, int, int, int]:
    path, conc, start, end = text.rsplit(":", 3)
    return path, int(conc), int(start), int(end)


def write_responses(path: Path, load, prompts, start: int, label: str, api: str, concurrency: int) -> None:
    """One JSON line per answered request of ``load`` (prompt ``start + index`` of the file): prompt, response and
    vLLM's token ids, what ``advisor kbar`` and ``advisor.kbar.runs`` replay."""
    with path.open("w") as fh:
        for r in sorted(load.responses, key=lambda r: r.index):
            p = prompts[r.index]
            fh.write(json.dumps({"index": start + r.index, "concurrency": concurrency, "prompt": p.text, "messages": p.messages, "response": r.text,
                                 "completion_tokens": r.completion_tokens, "config": label, "api": api,
                                 "finish_reason": r.finish_reason, "prompt_token_ids": r.prompt_token_ids,
                                 "token_ids": r.token_ids}) + "\n")  # fmt: skip


def cpu_loop(n: int = 2_000_000) -> float:
    """Seconds a fixed pure-Python loop takes in this process: the single-thread speed just before a load."""
    t = time.perf_counter()
    s = 0
    for i in range(n):
        s += i
    return round(time.perf_counter() - t, 4)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--configs", default="vanilla,suffix:32,ngram:4")
    ap.add_argument("--load", action="append", required=True, help="FILE:CONCURRENCY:START:END")
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--ignore-eos", action="store_true")
    ap.add_argument("--api", default="auto")
    ap.add_argument("--server-cmd", default="vllm serve")
    ap.add_argument("--extra-args", default="", help="more server flags, one shell-quoted string; write it "
                    "--extra-args=--no-async-scheduling (with =) when it starts with --, or argparse reads it as an option")
    ap.add_argument("--dummy-weights", action="store_true")
    ap.add_argument("--gmu", type=float, default=0.85)
    ap.add_argument("--max-model-len", type=int, default=4096)
    ap.add_argument("--boot-timeout", type=float, default=300)
    ap.add_argument("--warmup-load", default=None, help="FILE:CONCURRENCY:START:END run once after each boot and "
                    "discarded (not recorded): the speculative path's first shapes (graph replays, Triton kernels) "
                    "warm before any measured window; its slice must not overlap the measured ones")
    ap.add_argument("--cpu-check", action="store_true", help="before each load time a fixed Python loop three "
                    "times, and record every server process's CPU seconds over the load, to O/cpu.jsonl")
    ap.add_argument("--data-dir", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()

    settings = load_settings(data_dir=args.data_dir)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    extra = shlex.split(args.extra_args) + (["--load-format", "dummy"] if args.dummy_weights else [])
    configs = parse_configs(args.configs)
    configs.sort(key=lambda c: not c.is_vanilla)
    base_decision = Decision(gpu_memory_utilization=args.gmu, max_model_len=args.max_model_len)
    loads = [parse_load(x) for x in args.load]
    room = args.max_model_len - args.max_tokens
    corpora: dict[str, Corpus] = {}
    for path, *_ in loads:
        if path not in corpora:
            corpora[path] = load_corpus(path, max_chars=2 * room)
    host = host_info(settings)
    vanilla_tput: dict[tuple[str, int], float] = {}
    records_fh = (out / "records.jsonl").open("a")
    with open_store(settings) as store:
        for cfg in configs:
            # The campaign spec of the first load gives the argv; all loads share one boot.
            spec0 = CampaignSpec(
                model=args.model, corpus=loads[0][0], configs=[cfg], load=LoadSpec(max_tokens=args.max_tokens),
                base=base_decision, server_cmd=args.server_cmd, extra_args=extra, api=args.api,
                boot_timeout_s=args.boot_timeout,
            )  # fmt: skip
            argv = server_argv(spec0, cfg)
            decision = probe_decision(cfg, base_decision)
            safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in cfg.label)
            log_path = out / f"server-{safe}.log"
            print(f"[{time.strftime('%H:%M:%S')}] {cfg.label}: booting {' '.join(argv)}", flush=True)
            try:
                with running_server(
                    argv, log_path=log_path, env=dict(decision.env), boot_timeout_s=args.boot_timeout, api=args.api,
                    model=args.model,
                ) as srv:  # fmt: skip
                    version = _server_version(srv.base_url)
                    print(f"  booted in {srv.boot_s:.0f}s (vLLM {version}, api {srv.api})", flush=True)
                    if args.warmup_load:
                        wpath, wconc, wstart, wend = parse_load(args.warmup_load)
                        wc = corpora.get(wpath) or load_corpus(wpath, max_chars=2 * room)
                        wspec = LoadSpec(concurrency=wconc, duration_s=None, max_requests=wend - wstart,
                                         max_tokens=args.max_tokens, temperature=0.0, ignore_eos=args.ignore_eos,
                                         max_wall_s=300)  # fmt: skip
                        t0 = time.monotonic()
                        wprompts = wc.prompts[wstart:wend]
                        wload = run_load(srv.base_url, srv.served_model, srv.api, wprompts,
                                         wspec.model_copy(update={"keep_responses": True}),
                                         alive=lambda: srv.process.poll() is None)  # fmt: skip
                        # saved so that an offline replay can feed the same responses to its suffix tree first
                        write_responses(out / f"warmup-{safe}.jsonl", wload, wprompts, wstart, cfg.label, srv.api, wconc)
                        print(f"  warm-up load c{wconc} [{wstart}:{wend}] in {time.monotonic() - t0:.1f}s (discarded)", flush=True)
                    seen: dict[tuple[str, int], int] = {}
                    for path, conc, start, end in loads:
                        corpus = corpora[path]
                        prompts = corpus.prompts[start:end]
                        lspec = LoadSpec(
                            concurrency=conc, duration_s=None, max_requests=len(prompts), max_tokens=args.max_tokens,
                            temperature=0.0, ignore_eos=args.ignore_eos, keep_responses=True, max_wall_s=600,
                        )  # fmt: skip
                        spec = spec0.model_copy(update={"corpus": path, "load": lspec})
                        cid = campaign_id(spec, host["fingerprint"])
                        rec_base = record_fields(spec, cfg, cid=cid, host=host, argv=srv.argv, log_path=log_path)
                        rec_base.update(boot_s=round(srv.boot_s, 2), vllm_version=version)
                        loops = [cpu_loop() for _ in range(3)] if args.cpu_check else []
                        cpu0 = hostcpu.tree_cpu(srv.process.pid) if args.cpu_check else {}
                        own0, t0 = os.times(), time.time()
                        before = metrics.scrape(srv.base_url)
                        with hostcpu.watch(srv.process.pid) as cpu:
                            load = run_load(srv.base_url, srv.served_model, srv.api, prompts, lspec,
                                            alive=lambda: srv.process.poll() is None)  # fmt: skip
                        after = metrics.scrape(srv.base_url)
                        if args.cpu_check:
                            cpu1, own1, t1 = hostcpu.tree_cpu(srv.process.pid), os.times(), time.time()
                            procs = [{"pid": pid, "name": name, "cpu_s": round(sec - cpu0[pid][1], 3), "core": core}
                                     for pid, (name, sec, core) in cpu1.items() if pid in cpu0]  # fmt: skip
                            with (out / "cpu.jsonl").open("a") as cfh:
                                cfh.write(json.dumps({
                                    "config": cfg.label, "corpus": Path(path).stem, "concurrency": conc, "start": start,
                                    "end": end, "t0": round(t0, 3), "t1": round(t1, 3), "loop_s": loops,
                                    "client_cpu_s": round(own1.user + own1.system - own0.user - own0.system, 3),
                                    "procs": procs,
                                }) + "\n")  # fmt: skip
                        # the measured window is the load's own, as in advisor probe (the scrapes' time is outside it)
                        win = metrics.window(before, after, seconds=load.elapsed_s or None)
                        vt = vanilla_tput.get((path, conc))
                        rec = measured_record(rec_base, load, win, cfg, vt, cpu=cpu[0])
                        if cfg.is_vanilla and rec.outcome == "ok":
                            vanilla_tput[(path, conc)] = rec.throughput_tok_s
                        store.insert(rec)
                        records_fh.write(rec.model_dump_json(exclude={"host"}) + "\n")
                        records_fh.flush()
                        name = Path(path).stem
                        nth = seen[(path, conc)] = seen.get((path, conc), -1) + 1  # a later load of the same corpus and
                        write_responses(out / responses_name(cfg.label, path, conc, nth), load, prompts, start,  # concurrency
                                        cfg.label, srv.api, conc)  # gets its own file (advisor.kbar.runs.responses_name)
                        print(f"  {name} c{conc} [{start}:{end}]: {summary_line(rec, vt)}", flush=True)
            except BootFailure as exc:
                rec = ProbeRecord(
                    campaign_id="boot", model=args.model, config=cfg.label, corpus=loads[0][0], concurrency=loads[0][1],
                    gpu=host["gpu"], gpus=host["gpus"], host_fingerprint=host["fingerprint"], started_at=_now(),
                    command=argv, outcome=exc.outcome, failure=str(exc.failure), weights=spec0.weights,
                )  # fmt: skip
                records_fh.write(rec.model_dump_json(exclude={"host"}) + "\n")
                print(f"  {cfg.label}: {exc.outcome}: {exc.failure}", flush=True)
    records_fh.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
