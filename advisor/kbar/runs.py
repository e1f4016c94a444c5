"""Own-output K̄ of a recorded real-weight run: the vanilla boot's outputs replayed offline.

A run folder (``calibration/gpu_real/real_campaign.py``'s output) holds ``records.jsonl`` and
``responses-<config>-<corpus>-c<N>.jsonl`` (prompt, chat messages, response, completion tokens;
vLLM's token ids when recorded). One vLLM boot per configuration served every load in turn, so
suffix decoding's global tree was warm from the earlier loads: :func:`replay_boot` feeds the loads
of a boot in the same order into one cache (each at its own concurrency, request ids never reused)
and reports each load's figures. :func:`own_rows` does that for every speculative record with the
**vanilla** boot's outputs for the same prompts: what a user replays from a plain server's logs
(``recommend --corpus FILE`` of own outputs), with no speculative run's counters in it.

``calibration/gpu_real/replay_own.py`` writes these rows (with the reference-response and
same-run replays beside them) to ``replay.json``; ``calibrate --evaluate`` replays them itself when
Arctic Inference and the tokenizer are here and reads the committed file otherwise
(``tests/test_real_probes_own.py`` checks the two agree).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from advisor.kbar.formats import AutoPrompt, _messages
from advisor.kbar.ngram import NgramConfig, replay_ngram
from advisor.kbar.replay import ReplayConfig, new_cache, replay
from advisor.kbar.stats import Counts, figures


def safe_label(label: str) -> str:
    """A configuration label as real_campaign.py puts it in file names (``suffix:32`` -> ``suffix_32``)."""
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in label)


def read_records(run: Path) -> list[dict]:
    """The ok records of ``run/records.jsonl``, in file order (loads are appended as they finish)."""
    rows = [json.loads(x) for x in (run / "records.jsonl").read_text().splitlines() if x.strip()]
    return [r for r in rows if r.get("outcome") == "ok"]


REPLAYED = ("suffix", "ngram")
"""The methods the offline replay reproduces (advisor.kbar.replay, advisor.kbar.ngram); other configurations of a
run (``ngram_gpu``: the same lookup as ``ngram``, measured for its step cost) are not replayed."""


def _jsonl(path: Path, *, missing_ok: bool = False) -> list[dict] | None:
    """The lines of ``path`` or, where only that is committed, of ``path``.gz (None when neither is and ``missing_ok``)."""
    gz = path.with_name(path.name + ".gz")
    if not path.is_file() and missing_ok and not gz.is_file():
        return None
    text = path.read_text() if path.is_file() else gzip.decompress(gz.read_bytes()).decode()
    return [json.loads(x) for x in text.splitlines() if x.strip()]


def responses_name(config: str, corpus: str, concurrency: int, nth: int = 0) -> str:
    """The file real_campaign.py writes the outputs of one load to: ``responses-<config>-<corpus>-c<N>.jsonl`` for
    the first load of that corpus and concurrency in the configuration's boot, ``...-c<N>.<nth>.jsonl`` for a later
    one (session 9 on; before that a second such load overwrote the first's file)."""
    tail = f".{nth}" if nth else ""
    return f"responses-{safe_label(config)}-{Path(corpus).stem}-c{concurrency}{tail}.jsonl"


def responses(run: Path, config: str, record: dict, nth: int = 0, *, missing_ok: bool = False) -> list[dict] | None:
    """The recorded outputs of ``config`` for ``record``'s load (corpus, concurrency; the ``nth`` such load of the
    boot). None where the file is not there and ``missing_ok``."""
    return _jsonl(run / responses_name(config, record["corpus"], record["concurrency"], nth), missing_ok=missing_ok)


def warmup(run: Path, config: str) -> list[dict] | None:
    """The discarded warm-up load's outputs of ``config``'s boot (``real_campaign.py --warmup-load``, saved from
    session 7's campaign on), or None where the run did not save them."""
    return _jsonl(run / f"warmup-{safe_label(config)}.jsonl", missing_ok=True)


def pairs(tok, rows: list[dict], max_tokens: int, texts: list[str | None] | None = None) -> list:
    """(prompt ids, response ids) of each row: the prompt as sent, the response (or ``texts[i]``).

    vLLM's own ids are used as they are when a row has them (EOS among them when generated); a
    text-only row is tokenized (chat template for chat messages), EOS appended unless the output
    was cut at ``max_tokens``. ``tok`` may be None when every row carries ids."""
    if texts is None and all(r.get("prompt_token_ids") and r.get("token_ids") for r in rows):
        return [(r["prompt_token_ids"], r["token_ids"]) for r in rows]
    prompts = [_messages(r["messages"]) if r.get("messages") else AutoPrompt(r["prompt"]) for r in rows]
    body = [r["response"] for r in rows] if texts is None else texts
    keep = [i for i, t in enumerate(body) if t and t.strip()]
    enc = tok.encode_pairs([(prompts[i], body[i]) for i in keep])
    out = []
    for i, (p, ids) in zip(keep, enc):
        row = rows[i]
        if texts is None and row.get("prompt_token_ids") and row.get("token_ids"):
            out.append((row["prompt_token_ids"], row["token_ids"]))
            continue
        if texts is None:
            cut = (row.get("completion_tokens") or 0) >= max_tokens
        else:
            cut, ids = len(ids) >= max_tokens, ids[:max_tokens]
        out.append((p, ids + ([] if cut or tok.eos_id is None else [tok.eos_id])))
    return out


def figure(stats) -> dict:
    """vLLM-style figures of replayed requests (tokens per step = K̄)."""
    c = Counts()
    for s in stats:
        c.add(s)
    f = figures(c.total("output_tokens"), c.total("steps"), c.total("drafts"), c.total("draft_tokens"), c.total("accepted"))
    return {"tokens_per_step": f["tokens_per_step"], "mean_acceptance_length": f["mean_acceptance_length"],
            "drafts": c.total("drafts"), "draft_tokens": c.total("draft_tokens"), "accepted_tokens": c.total("accepted"),
            "tokens": c.total("output_tokens"), "requests": c.n}  # fmt: skip


def replay_boot(method: str, k: int, loads: list[tuple[int, list]], warm: tuple[int, list] | None = None) -> list[dict]:
    """Per-load figures of one boot's loads replayed in order (suffix: one warm cache). ``warm`` is the boot's
    discarded warm-up load (concurrency, pairs): fed to the suffix tree first, as vLLM's was, and not reported."""
    out, rid = [], 0
    cache = new_cache(ReplayConfig(num_speculative_tokens=k)) if method == "suffix" else None
    if warm is not None and method == "suffix":
        list(replay(warm[1], ReplayConfig(num_speculative_tokens=k, concurrency=warm[0]), cache, first_id=rid))
        rid += len(warm[1])
    for conc, prs in loads:
        if method == "suffix":
            stats = list(replay(prs, ReplayConfig(num_speculative_tokens=k, concurrency=conc), cache, first_id=rid))
        else:
            stats = list(replay_ngram(prs, NgramConfig(num_speculative_tokens=k)))
        rid += len(prs)
        out.append(figure(stats))
    return out


def method_k(config: str) -> tuple[str, int]:
    """(``suffix``/``ngram``, K) of a configuration label such as ``suffix:32``."""
    method, k = config.split(":")[0], int(config.split(":")[1].split("@")[0])
    return method, k


def by_config(records: list[dict]) -> dict[str, list[dict]]:
    """Records grouped by configuration, each group in load order."""
    out: dict[str, list[dict]] = {}
    for r in records:
        out.setdefault(r["config"], []).append(r)
    return out


WARMUP_CONCURRENCY = 32
"""The warm-up load's concurrency where its lines do not record it (smol-g, device_run3.sh: ``--warmup-load
FILE:32:...``); real_campaign.py writes ``concurrency`` on every line from session 7's last change on."""


def warm_load(tok, rows: list[dict] | None, max_tokens: int, texts: list[str | None] | None = None) -> tuple[int, list] | None:
    """(concurrency, pairs) of a boot's saved warm-up load, for :func:`replay_boot` (None: none saved)."""
    if not rows:
        return None
    return (int(rows[0].get("concurrency") or WARMUP_CONCURRENCY), pairs(tok, rows, max_tokens, texts))


def by_occurrence(records: list[dict]) -> dict[tuple[str, int, int], dict]:
    """``records`` of one boot keyed by (corpus, concurrency, n): n counts earlier loads of the same corpus and
    concurrency in that boot (file order), the ``nth`` of :func:`responses_name`."""
    seen: dict[tuple[str, int], int] = {}
    out = {}
    for r in records:
        key = (r["corpus"], r["concurrency"])
        seen[key] = seen.get(key, -1) + 1
        out[(*key, seen[key])] = r
    return out


def own_rows(run: Path, tok, *, methods: tuple[str, ...] = REPLAYED) -> list[dict]:
    """For every speculative record of ``run`` (in the order replay.json lists them), the replay of the
    vanilla boot's outputs for the same prompts: ``{config, corpus, concurrency, started_at, own}``."""
    groups = by_config(read_records(run))
    plain = by_occurrence(groups.get("vanilla", []))
    out = []
    for cfg, recs in groups.items():
        if cfg == "vanilla" or cfg.split(":")[0] not in methods:
            continue
        method, k = method_k(cfg)
        max_tokens = recs[0].get("max_tokens") or 256
        outputs = [responses(run, "vanilla", plain[key], key[2], missing_ok=True) if key in plain else None
                   for key in by_occurrence(recs)]  # fmt: skip
        if any(o is None for o in outputs):  # a load's plain outputs were not kept: its boot cannot be replayed in order
            continue
        loads = [(r["concurrency"], pairs(tok, o, max_tokens)) for r, o in zip(recs, outputs)]
        for r, fig in zip(recs, replay_boot(method, k, loads, warm_load(tok, warmup(run, "vanilla"), max_tokens))):
            out.append({"config": cfg, "corpus": Path(r["corpus"]).stem, "concurrency": r["concurrency"],
                        "started_at": r.get("started_at"), "own": fig})  # fmt: skip
    return out
