"""Committed probe records and own-output replays under ``calibration/`` (the lab's inputs, read here)."""

from __future__ import annotations

import json


def read_jsonl_records(folder) -> list:
    """The ProbeRecords of ``folder``/records.jsonl (lines that are not a record are skipped)."""
    from advisor.probe.record import ProbeRecord

    out = []
    for line in (folder / "records.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            try:
                out.append(ProbeRecord.model_validate_json(line))
            except ValueError:
                continue
    return out


def reader_with_hosts(records: list):
    """``read_jsonl_records`` with each record's host filled in from ``records``' (``calibration_records``) of the
    same host fingerprint (records.jsonl files leave the host to the probe store)."""
    hosts = {r.host_fingerprint: r.host for r in records if r.host and r.host_fingerprint}

    def read(folder) -> list:
        return [r if r.host or r.host_fingerprint not in hosts else r.model_copy(update={"host": hosts[r.host_fingerprint]})
                for r in read_jsonl_records(folder)]  # fmt: skip

    return read


def calibration_records(calibration_dir) -> list:
    """Every ProbeRecord committed under ``calibration_dir`` (probe stores and records.jsonl files), deduplicated."""
    from advisor.probe.store import ProbeStore

    seen: dict[tuple, object] = {}
    for path in sorted(calibration_dir.rglob("probes.sqlite")):
        with ProbeStore(path, busy_timeout_s=2.0, read_only=True) as store:  # committed: read, never switched to WAL
            for r in store.list_records():
                seen[(r.campaign_id, r.config, r.started_at)] = r
    for path in sorted(calibration_dir.rglob("records.jsonl")):
        for r in read_jsonl_records(path.parent):
            key = (r.campaign_id, r.config, r.started_at)
            if r.host is None and key in seen and seen[key].host is not None:
                r = r.model_copy(update={"host": seen[key].host})  # records.jsonl leaves the host to the store
            seen[key] = r
    return list(seen.values())


def own_output_replays(calibration_dir, *, live: bool | None = None) -> dict:
    """Own-output K̄ of every committed real-weight run folder (``records.jsonl`` + ``responses-vanilla-*``):
    the vanilla boot's outputs replayed offline (advisor.kbar.runs), keyed by (campaign, config,
    started_at) of the speculative record it stands in for, as {"k_bar", "source"}.

    Replayed here when the method's replay can run (suffix needs Arctic Inference; both need the
    model's tokenizer unless the responses carry vLLM's token ids); otherwise the committed
    ``replay.json`` beside the records (calibration/gpu_real/replay_own.py, the same code) is read.
    ``live=False`` forces the committed files (the test that checks they agree uses both)."""
    from pathlib import Path

    from advisor.errors import AdvisorError
    from advisor.kbar import runs
    from advisor.kbar.replay import arctic_available

    out: dict[tuple, dict] = {}
    for rec_path in sorted(Path(calibration_dir).rglob("records.jsonl")):
        run = rec_path.parent
        if not any(run.glob("responses-vanilla-*.jsonl*")):  # .jsonl or .jsonl.gz
            continue
        try:
            records = runs.read_records(run)
        except (OSError, ValueError):
            continue
        specs = [r for r in records if r.get("config", "").split(":")[0] in runs.REPLAYED and r.get("weights") == "real"]
        if not specs:
            continue
        rel = str(run.relative_to(Path(calibration_dir).parent)) if run.is_relative_to(Path(calibration_dir).parent) else str(run)
        tok, why_not = None, None
        model = specs[0].get("model") or ""
        local = Path(calibration_dir).parent / ".cache" / "models" / model.rstrip("/").rsplit("/", 1)[-1]
        try:
            from advisor.kbar.tokenize import load_tokenizer

            tok = load_tokenizer(str(local) if local.is_dir() else model, allow_fallback=False)
        except (AdvisorError, OSError, ValueError) as exc:
            why_not = f"tokenizer of {model} not here ({exc})"
        committed = {}
        replay_file = run / "replay.json"
        if replay_file.is_file():
            rows = json.loads(replay_file.read_text())["rows"]
            groups = runs.by_config(specs)
            seen: dict[str, int] = {}
            for row in rows:  # replay_own.py lists each configuration's records in file order
                i = seen[row["config"]] = seen.get(row["config"], -1) + 1
                group = groups.get(row["config"]) or []
                if i < len(group) and group[i].get("tokens_per_step") == row["measured"]["tokens_per_step"]:
                    committed[(row["config"], i)] = row["own"]["tokens_per_step"]
        for method in ("suffix", "ngram"):
            can = tok is not None and (method == "ngram" or arctic_available())
            if live is False:
                can = False
            live_rows = {}
            if can:
                seen = {}
                for row in runs.own_rows(run, tok, methods=(method,)):
                    i = seen[row["config"]] = seen.get(row["config"], -1) + 1
                    live_rows[(row["config"], i)] = row["own"]["tokens_per_step"]
            for cfg, group in runs.by_config(specs).items():
                if cfg.split(":")[0] != method:
                    continue
                for i, r in enumerate(group):
                    key = (r["campaign_id"], cfg, r["started_at"])
                    if (cfg, i) in live_rows:
                        out[key] = {"k_bar": live_rows[(cfg, i)], "source": f"replayed now ({rel}, advisor.kbar.runs)"}
                    elif (cfg, i) in committed:
                        why = "asked for" if live is False else why_not or "Arctic Inference not installed"
                        out[key] = {"k_bar": committed[(cfg, i)], "source": f"committed {rel}/replay.json ({why})"}
    return out
