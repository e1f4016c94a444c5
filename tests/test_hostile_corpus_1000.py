"""A hostile corpus of more than 1,000 inputs, each really executed through the CLI entry point
(advisor.cli.app.main, in-process) across inspect, recommend, render, host diff, probe, the probe
store, the settings (advisor.toml, ADVISOR_*), user rules and catalogs: 0 tracebacks, 0 exit 70,
0 hangs past a bound (each call runs under a 20 s alarm), 0 privileged or mixed outputs (a rendered
unit's Exec lines never start with a systemd prefix; a render writes every file or none). The
campaigns against a misbehaving server are in tests/test_probe_hostile.py (14 more inputs); the
HTML page's bidi/markup cases in tests/test_report.py.

Runtime: about 40 s on 2 cores (inputs are generated; one recommendation fit is cached for all)."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
from pathlib import Path


from tests.render_helpers.corpus import HOSTILE

ROOT = Path(__file__).resolve().parents[1]
LLAMA_DIR = ROOT / "catalog" / "models" / "meta-llama" / "Llama-3.1-8B-Instruct"
M = "meta-llama/Llama-3.1-8B-Instruct"
HOST = ("--gpu", "H100", "--gpus", "1")
DOCUMENTED = {0, 1, 2, 3, 4, 5, 6, 7, 8, 73}
"""advisor.errors exit codes (and click's usage error 2)."""
BOUND_S = 20
PREFIXES = tuple("+!@:-|")


class Hang(Exception):
    pass


def _alarm(*_):
    raise Hang()


def _llama() -> dict:
    return json.loads((LLAMA_DIR / "config.json").read_text())


VALUES = [0, -1, 1.5, "x", None, True, 10**30, [], {}, float("nan"), float("inf"), -(10**12), "1e9", [1, 2], {"a": 1},
          2**63]  # fmt: skip
FIELDS = ["hidden_size", "num_hidden_layers", "vocab_size", "num_attention_heads", "num_key_value_heads",
          "intermediate_size", "max_position_embeddings", "head_dim", "torch_dtype", "model_type", "architectures",
          "rope_scaling", "quantization_config", "tie_word_embeddings"]  # fmt: skip


def _cases(tmp: Path):
    """(label, argv, env, check) for every input; files the inputs need are written under ``tmp``."""
    n = 0

    def folder(name: str) -> Path:
        nonlocal n
        n += 1
        d = tmp / f"{n:04d}-{name}"
        d.mkdir(parents=True)
        return d

    # --- config.json field values (inspect; every 4th also recommend) -------------------------
    for i, (field, value) in enumerate((f, v) for f in FIELDS for v in VALUES):
        cfg = _llama()
        cfg[field] = value
        d = folder("cfg")
        (d / "config.json").write_text(json.dumps(cfg))
        yield f"config {field}={value!r}", ["inspect", str(d)], {}, None
        if i % 4 == 0:
            yield f"config {field}={value!r} recommend", ["recommend", str(d), *HOST], {}, None

    # --- config.json shapes -------------------------------------------------------------------
    shapes = {
        "list": b"[1,2]", "string": b'"x"', "null": b"null", "empty": b"", "bom": b"\xef\xbb\xbf{}", "latin1": b"{\"a\": \"\xe9\"}",
        "deep-arrays": b"[" * 1100 + b"]" * 1100, "deep-objects": b'{"a":' * 1100 + b"1" + b"}" * 1100,
        "very-deep": b"[" * 100000 + b"]" * 100000, "nested-in-field": json.dumps({**_llama(), "rope_scaling": 0}).encode()[:-1] + b', "x": ' + b"[" * 5000 + b"]" * 5000 + b"}",
        "truncated": json.dumps(_llama()).encode()[:-5], "nul": b"{\x00}", "big-number": b'{"hidden_size": 1' + b"0" * 5000 + b"}",
        "duplicate-keys": b'{"model_type": "llama", "model_type": "mixtral"}', "nan": b'{"hidden_size": NaN}',
        "text-config-list": json.dumps({**_llama(), "text_config": [1]}).encode(),
        "text-config-deep": json.dumps({"model_type": "llava", "text_config": {"text_config": {"text_config": 1}}}).encode(),
    }  # fmt: skip
    for name, raw in shapes.items():
        d = folder("shape")
        (d / "config.json").write_bytes(raw)
        yield f"config shape {name}", ["inspect", str(d)], {}, None
        yield f"config shape {name} (as a file)", ["inspect", str(d / "config.json")], {}, None
    for name in ("esc\x1b]0;title\x07", "bidi\u202eexe", "csi\x1b[2J"):
        d = folder("named")
        named = d / name
        named.mkdir()
        (named / "config.json").write_text(json.dumps(_llama()))
        yield f"model dir {name!r}", ["inspect", str(named)], {}, None
        yield f"model dir {name!r} recommend", ["recommend", str(named), *HOST], {}, None
    fifo_model = folder("fifo-model")
    os.mkfifo(fifo_model / "config.json")
    yield "config.json is a FIFO", ["inspect", str(fifo_model)], {}, None
    for model in ["", " ", "-x", "--help", "a--b", "org/..x", "/dev/null", "/", "org/name/extra", "x" * 5000, "\x1b[2J",
                  "org/\u202ename", "~nouser/x", "./", "../../../../etc", "org/name\n", "%s%n", "$(id)"]:  # fmt: skip
        yield f"model {model[:20]!r}", ["inspect", model], {}, None
        yield f"model {model[:20]!r} recommend", ["recommend", model, *HOST], {}, None

    # --- catalog card.yaml ----------------------------------------------------------------------
    cards = [b": : :\n- [", b"\xff\xfe", b"- a\n- b\n", b"family: nonsense\n", b"family: 5\n", b"family: [instruct]\n",
             b"family: instruct\n", b"", b"null\n", b"&a [*a]\n", b"a: " + b"[" * 2000 + b"]" * 2000, b"!!python/object:os.system x\n",
             b"family: base\npublished: [1, 2]\n", b"\x00\x01", b"a: b\n" * 10000, b"family: reasoning-distill\n",
             b"? [a]\n: b\n", b"family: \"\\x1b[31m\"\n", b"--- a\n--- b\n", b"family: !!binary aGVsbG8=\n"]  # fmt: skip
    for i, card in enumerate(cards):
        cat = folder("cat")
        (cat / "org" / "m").mkdir(parents=True)
        (cat / "org" / "m" / "config.json").write_text(json.dumps(_llama()))
        (cat / "org" / "m" / "card.yaml").write_bytes(card)
        yield f"card {i}", ["--catalog-dir", str(cat), "inspect", "org/m"], {}, None
        yield f"card {i} recommend", ["--catalog-dir", str(cat), "recommend", "org/m", *HOST], {}, None
    cat = folder("cat-fifo")
    (cat / "org" / "m").mkdir(parents=True)
    (cat / "org" / "m" / "config.json").write_text(json.dumps(_llama()))
    os.mkfifo(cat / "org" / "m" / "card.yaml")
    yield "card is a FIFO", ["--catalog-dir", str(cat), "inspect", "org/m"], {}, None

    # --- settings: advisor.toml, ADVISOR_CONFIG, ADVISOR_* -------------------------------------
    tomls = ["x = [", "default_gpus = -1", "default_gpus = 0", "default_gpus = 999999999", "default_gpus = 'x'",
             "default_gpus = 1e30", "vllm_version = '9.9'", "vllm_version = 5", "data_dir = ''", "data_dir = 5",
             "catalog_dirs = ['']", "catalog_dirs = 5", "rules_dirs = [5]", "unknown = 1", "hub_offline = 'maybe'",
             "x = " + "[" * 1100 + "]" * 1100, "[a]\n" + "b = 1\n" * 3, "default_gpu = 'NOPE'", "default_gpu = ''",
             "sysfs_root = ''", "etc_root = '/nonexistent'", "hf_cache_dir = ''", "\x00", "default_gpus = 4096"]  # fmt: skip
    for i, text in enumerate(tomls):
        d = folder("toml")
        (d / "advisor.toml").write_text(text)
        env = {"ADVISOR_CONFIG": str(d / "advisor.toml")}
        yield f"toml {text[:30]!r}", ["inspect", M], env, None
        yield f"toml {text[:30]!r} recommend", ["recommend", M, "--gpu", "H100"], env, None
    d = folder("toml-bytes")
    (d / "advisor.toml").write_bytes(b"\xff\xfe = 1")
    yield "toml not UTF-8", ["inspect", M], {"ADVISOR_CONFIG": str(d / "advisor.toml")}, None
    for value in ["", str(tmp / "missing.toml"), str(tmp), "/dev/null", "/nonexistent/dir/x.toml", " "]:
        yield f"ADVISOR_CONFIG={value!r}", ["inspect", M], {"ADVISOR_CONFIG": value}, None
    env_values = {
        "ADVISOR_DEFAULT_GPUS": ["0", "-1", "999999999", "x", "", "1e3", "4097", "8"],
        "ADVISOR_VLLM_VERSION": ["9.9", "", "0.32", "0.3", "x", "0.32.0rc1", "\x1b"],
        "ADVISOR_DATA_DIR": ["", " ", "/dev/null", "/nonexistent/x"],
        "ADVISOR_RULES_DIRS": ["", ":", "/nonexistent", "[5]", "[\"\"]", "["],
        "ADVISOR_CATALOG_DIRS": ["", ":", "/nonexistent", "[", "[5]"],
        "ADVISOR_HUB_OFFLINE": ["maybe", "", "1"],
        "ADVISOR_DEFAULT_GPU": ["NOPE", "", "h100"],
    }  # fmt: skip
    for name, values in env_values.items():
        for value in values:
            yield f"{name}={value!r}", ["recommend", M, "--gpu", "H100"], {name: value}, None

    # --- global flags with odd paths -------------------------------------------------------------
    a_file = tmp / "a-file"
    a_file.write_text("x")
    fifo = tmp / "a-fifo"
    os.mkfifo(fifo)
    for flag in ("--data-dir", "--rules-dir", "--catalog-dir"):
        for value in ["", " ", "/dev/null", "/nonexistent", str(a_file), str(fifo), "-x", "\x1b[1m"]:
            yield f"{flag} {value!r}", [flag, value, "recommend", M, *HOST], {}, None

    # --- user rules directories ------------------------------------------------------------------
    rule = "rules:\n  - id: {id}\n    priority: 100\n    when: {when}\n    then: {{speculation: open}}\n    rationale: r\n    source: s\n"
    rules = {
        "catastrophic-regex": rule.format(id="evil", when="{model.id: {matches: '(a+)+$'}}"),
        "catastrophic-regex-2": rule.format(id="evil2", when="{model.id: {matches: '(x+x+)+y'}}"),
        "catastrophic-regex-3": rule.format(id="evil3", when="{model.id: {matches: '(a|aa)+$'}}"),
        "bad-regex": rule.format(id="bad", when="{model.id: {matches: '('}}"),
        "unknown-fact": rule.format(id="u", when="{nonexistent_fact: {eq: 1}}"),
        "empty-condition": rule.format(id="e", when="{model.id: {}}"),
        "not-a-mapping": "- a\n- b\n",
        "no-rules": "x: 1\n",
        "rules-not-list": "rules: 5\n",
        "rule-not-mapping": "rules: [5]\n",
        "yaml-error": "rules: [\n",
        "deep": "rules: " + "[" * 3000 + "]" * 3000 + "\n",
        "huge-priority": rule.format(id="p", when="{host.gpus: {gte: 1}}").replace("priority: 100", "priority: 1e400"),
        "nan-bound": rule.format(id="n", when="{host.gpus: {gte: .nan}}"),
        "two-ops": rule.format(id="t", when="{host.gpus: {gte: 1, eq: 2}}"),
        "dup-ids": rule.format(id="d", when="{host.gpus: {gte: 1}}") + rule.format(id="d", when="{host.gpus: {gte: 1}}").replace("rules:\n", ""),
        "escape-id": rule.format(id="'\x1b[31mred'", when="{host.gpus: {gte: 1}}"),
    }  # fmt: skip
    near_miss = []
    for name in ("a" * 40 + "!", "x" * 40):  # model ids on which the catastrophic patterns backtrack
        d = folder("near-miss") / name
        d.mkdir()
        (d / "config.json").write_text(json.dumps(_llama()))
        near_miss.append(str(d))
    for name, text in rules.items():
        d = folder("rules")
        (d / "user.yaml").write_text(text)
        for model in (M, *near_miss):
            yield f"rules {name} on {model[:10]}", ["--rules-dir", str(d), "recommend", model, *HOST], {}, None
    d = folder("rules-fifo")
    os.mkfifo(d / "blocks.yaml")
    yield "rules FIFO", ["--rules-dir", str(d), "recommend", M, *HOST], {}, None
    d = folder("rules-bytes")
    (d / "x.yaml").write_bytes(b"\xff\xfe")
    yield "rules not UTF-8", ["--rules-dir", str(d), "recommend", M, *HOST], {}, None
    d = folder("rules-dir-entry")
    (d / "sub.yaml").mkdir()
    yield "rules: a directory named *.yaml", ["--rules-dir", str(d), "recommend", M, *HOST], {}, None

    # --- the probe store -------------------------------------------------------------------------
    good = tmp / "store-template"
    good.mkdir()
    from advisor.probe.store import ProbeStore

    ProbeStore(good / "probes.sqlite").close()
    row = {"campaign_id": "c", "model": M, "config": "suffix:32", "outcome": "ok", "corpus": "humaneval", "concurrency": 32,
           "started_at": "2026-01-01T00:00:00+00:00", "throughput_tok_s": 100.0, "gpu": "H100", "num_speculative_tokens": 32}  # fmt: skip
    bad_records = [{**row, "num_speculative_tokens": 10**9}, {**row, "gpu_memory_utilization": 5}, {**row, "max_model_len": -1},
                   {**row, "throughput_tok_s": 1e300}, {**row, "concurrency": 0}, {**row, "failure": "\x1b]0;x\x07"},
                   {**row, "gpus": 10**9}, {**row, "tensor_parallel_size": 0}, {**row, "outcome": "weird"}, "not json",
                   "[" * 3000 + "]" * 3000, 5, b"\xff\xfe", {**row, "extra_field": 1}]  # fmt: skip
    sqls = ["UPDATE schema_version SET version='abc'",
            "DROP TABLE schema_version; CREATE TABLE schema_version (version); INSERT INTO schema_version VALUES (NULL)",
            "UPDATE schema_version SET version=99", "DELETE FROM schema_version", "ALTER TABLE probes DROP COLUMN record_json",
            "DROP TABLE probes; CREATE TABLE probes (id INTEGER)", "DROP TABLE probes", "DROP TABLE schema_version",
            "INSERT INTO schema_version VALUES (1)"]  # fmt: skip
    variants: list[tuple[str, object]] = [(f"row {i}", rec) for i, rec in enumerate(bad_records)] + [(s[:40], s) for s in sqls]
    for name, what in variants:
        d = folder("store")
        db = d / "probes.sqlite"
        db.write_bytes((good / "probes.sqlite").read_bytes())
        conn = sqlite3.connect(db)
        if isinstance(what, str) and what.split(" ", 1)[0] in ("UPDATE", "DROP", "DELETE", "ALTER", "INSERT"):
            conn.executescript(what)
        else:
            text = what if isinstance(what, (str, int, bytes)) else json.dumps(what)
            conn.execute("INSERT INTO probes (campaign_id, model, config, outcome, corpus, concurrency, started_at, record_json)"
                         " VALUES ('c', ?, 'suffix:32', 'ok', 'humaneval', 32, 'now', ?)", (M, text))  # fmt: skip
        conn.commit()
        conn.close()
        yield f"store {name}", ["--data-dir", str(d), "recommend", M, *HOST], {}, None
    for name, raw in (("garbage", b"not a database" * 100), ("empty", b""), ("truncated", (good / "probes.sqlite").read_bytes()[:500])):
        d = folder("store-file")
        (d / "probes.sqlite").write_bytes(raw)
        yield f"store file {name}", ["--data-dir", str(d), "recommend", M, *HOST], {}, None
    d = folder("store-dir")
    (d / "probes.sqlite").mkdir()
    yield "store is a directory", ["--data-dir", str(d), "recommend", M, *HOST], {}, None

    # --- host diff ---------------------------------------------------------------------------------
    host_docs = [b"[" * 1100 + b"]" * 1100, b'{"a":' * 1100 + b"1" + b"}" * 1100, b"[]", b"{}", b"null", b"5", b'"x"', b"",
                 b"\xff", b'{"host": 5}', b'{"host": {"gpus": []}}', b'{"gpus": 5, "fingerprint": 1}', b"{" * 10,
                 b'{"gpus": [], "fingerprint": "x", "cpu": null}', b'{"gpus": [{"name": 5}]}', b"\x00",
                 json.dumps({"host": {"host": {"host": []}}}).encode()]  # fmt: skip
    for i, raw in enumerate(host_docs):
        d = folder("host")
        (d / "a.json").write_bytes(raw)
        yield f"host diff doc {i}", ["host", "diff", str(d / "a.json"), str(d / "a.json")], {}, None
        yield f"host diff doc {i} vs missing", ["host", "diff", str(d / "a.json"), str(d / "nope.json")], {}, None
    yield "host diff FIFO", ["host", "diff", str(fifo), str(fifo)], {}, None
    yield "host diff dir", ["host", "diff", str(tmp), str(tmp)], {}, None

    # --- recommend / render numeric flags ------------------------------------------------------------
    for flag, values in {"--gpus": ["0", "-1", "999999999", "4097", "x", "1e3", ""], "--tp": ["0", "3", "999999", "-1"],
                         "--k": ["0", "65", "999999999", "x"], "--gmu": ["0", "1", "5", "nan", "-0.5", "0.0001"],
                         "--max-model-len": ["-1", "0", "15", "999999999999", "nan"], "--concurrency": ["0", "-1", "999999999"],
                         "--corpus": ["", "/nonexistent", str(fifo), str(tmp), "/dev/null", "\x1b"]}.items():  # fmt: skip
        for value in values:
            yield f"recommend {flag} {value!r}", ["recommend", M, "--gpu", "H100", "--gpus", "1", flag, value] if flag != "--gpus" \
                else ["recommend", M, "--gpu", "H100", flag, value], {}, None  # fmt: skip
    for gpus in ["999999999", "0", "-5"]:
        yield f"ADVISOR_DEFAULT_GPUS {gpus} via TOML", ["recommend", M, "--gpu", "H100"], \
            {"ADVISOR_DEFAULT_GPUS": gpus}, None  # fmt: skip

    # --- render: every hostile value in --vllm-bin, --env, --image (compose), --host ------------------
    for i, value in enumerate(HOSTILE + ["+vllm", "!vllm", "!!vllm", "@vllm", ":vllm", "-vllm", "|vllm", "+/usr/bin/vllm"]):
        out = tmp / "r" / f"bin{i}"
        yield f"render --vllm-bin {value[:20]!r}", ["render", M, *HOST, "--out", str(out), "--vllm-bin", value], {}, ("systemd", out)
    for i, value in enumerate(HOSTILE):
        out = tmp / "r" / f"env{i}"
        yield f"render --env {value[:20]!r}", ["render", M, *HOST, "--out", str(out), "--env", f"VLLM_X={value}"], {}, ("systemd", out)
    for i, value in enumerate(HOSTILE + ["img:${HOME}", "", "-x", "a b", "registry:5000/a/b:c@sha256:" + "0" * 64]):
        out = tmp / "r" / f"img{i}"
        yield f"render --image {value[:20]!r}", ["render", M, *HOST, "--out", str(out), "--format", "compose", "--image", value], {}, ("compose", out)
    for i, value in enumerate(["localhost", "0.0.0.0", "::1", "::", "fe80::1%eth0", "", "-h", "a b", "1.2.3.4", "example.com",
                               "\x1b", "256.1.1.1", "[::1]", "host:80"]):  # fmt: skip
        for fmt in ("systemd", "compose", "k8s"):
            out = tmp / "r" / f"host{i}{fmt}"
            yield f"render {fmt} --host {value!r}", ["render", M, *HOST, "--out", str(out), "--format", fmt, "--host", value], {}, (fmt, out)
    for value in ["", " ", "/dev/null", str(a_file), str(fifo), "/proc/self/x"]:
        yield f"render --out {value!r}", ["render", M, *HOST, "--out", value], {}, None
    for value in ["x", "", "SYSTEMD", "-x"]:
        yield f"render --format {value!r}", ["render", M, *HOST, "--out", str(tmp / "r" / "fmt"), "--format", value], {}, None
    for value in ["0", "3", "999999", "-1"]:
        yield f"render --gpus-per-node {value}", ["render", "meta-llama/Llama-3.1-405B-Instruct-FP8", "--gpu", "H100", "--gpus", "16",
                                                  "--out", str(tmp / "r" / f"gpn{value}"), "--gpus-per-node", value], {}, None  # fmt: skip
    yield "render /tmp model", ["render", str(LLAMA_DIR), *HOST, "--out", str(tmp / "r" / "tmpmodel")], {}, None

    # --- probe arguments (no server is started for refused inputs; a missing program is a recorded failure) ---
    for value in ["", "x", "suffix:0", "suffix:999", "suffix:-1", "ngram:x", "vanilla@gmu=5", "vanilla@x=1", "suffix:4@gmu=",
                  ",,,", "vanilla,vanilla", "\x1b[2J", "mtp:1", "suffix:" + "9" * 100]:  # fmt: skip
        yield f"probe --configs {value!r}", ["--data-dir", str(tmp / "pd"), "probe", M, "--configs", value,
                                             "--server-cmd", "/nonexistent-vllm", "--requests", "1", "--duration", "1"], {}, None  # fmt: skip
    for flag, value in [("--campaign", "../../etc"), ("--duration", "0"), ("--duration", "nan"), ("--requests", "0"),
                        ("--concurrency", "0"), ("--max-tokens", "0"), ("--boot-timeout", "-1"), ("--corpus", str(fifo)),
                        ("--corpus", "/nonexistent"), ("--server-cmd", ""), ("--server-cmd", "'unbalanced")]:  # fmt: skip
        yield f"probe {flag} {value!r}", ["--data-dir", str(tmp / "pd"), "probe", M, flag, value, "--configs", "vanilla",
                                          "--server-cmd", "/nonexistent-vllm", "--requests", "1"] if flag != "--server-cmd" else \
            ["--data-dir", str(tmp / "pd"), "probe", M, flag, value, "--configs", "vanilla", "--requests", "1"], {}, None  # fmt: skip


EXPECTED = {"systemd": {"launch.sh", "vllm.service", "vllm.env"}, "compose": {"compose.yaml"}, "k8s": {"vllm-secret.yaml", "vllm-deployment.yaml"}}


def _check_outputs(fmt: str, out: Path, code: int) -> str | None:
    files = {p.name for p in out.iterdir()} if out.is_dir() else set()
    files = {f for f in files if not f.startswith(".advisor")}
    if code != 0:
        return f"refused but left files {sorted(files)}" if files else None
    want = EXPECTED[fmt]
    if not want <= files:
        return f"mixed output: {sorted(files)}"
    if fmt == "systemd":
        for line in (out / "vllm.service").read_text().splitlines():
            if line.startswith("Exec") and "=" in line:
                value = line.split("=", 1)[1]
                if not value.startswith('"') or value[1:2] in PREFIXES:
                    return f"privileged or prefixed Exec line: {line[:120]}"
    return None


def test_hostile_corpus(run_cli, tmp_path, monkeypatch):
    from advisor.cli import common

    old = signal.signal(signal.SIGALRM, _alarm)
    cases = list(_cases(tmp_path / "in"))
    assert len(cases) >= 1000, len(cases)
    failures: list[str] = []
    try:
        for label, argv, env, check in cases:
            with monkeypatch.context() as mp:
                for name, value in env.items():
                    mp.setenv(name, value)
                common.set_global_overrides()
                signal.alarm(BOUND_S)
                try:
                    code, out, err = run_cli(*argv)
                except Hang:
                    failures.append(f"{label}: hang past {BOUND_S} s")
                    continue
                finally:
                    signal.alarm(0)
            if code == 70 or code not in DOCUMENTED or "Traceback" in err or "internal error" in err:
                failures.append(f"{label}: exit {code}: {err.strip().splitlines()[-1:] if err.strip() else ''}")
            if "\x1b" in err or "\x1b" in out or "\u202e" in out:
                failures.append(f"{label}: ESC or a bidi control reached the terminal: {(err + out)[:200]!r}")
            if check is not None:
                problem = _check_outputs(*check, code)
                if problem:
                    failures.append(f"{label}: {problem}")
    finally:
        signal.signal(signal.SIGALRM, old)
    print(f"hostile corpus: {len(cases)} inputs, {len(failures)} failures")
    assert not failures, f"{len(failures)} of {len(cases)} inputs failed:\n" + "\n".join(failures[:40])
