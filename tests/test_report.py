"""`advisor report` / `recommend --html`: one self-contained HTML page, rendered for a dense model,
an MoE model and a configuration that does not boot, checked for external resources and opened in
real headless Chromium (screenshot, not blank; every text box inside its card, from the DOM)."""

from __future__ import annotations

import html as htmllib
import json
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from advisor.cli.app import main

CASES = {
    "dense": ("report", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "B200", "--gpus", "8", "--corpus", "mix"),
    "moe": ("recommend", "Qwen/Qwen3-30B-A3B", "--gpu", "H200", "--gpus", "2", "--corpus", "sharegpt"),
    "no_boot": ("report", "meta-llama/Llama-3.1-70B-Instruct", "--gpu", "H100", "--gpus", "1"),
    "mtp": ("report", "deepseek-ai/DeepSeek-R1", "--gpu", "H200", "--gpus", "8"),
}
"""``moe`` goes through ``recommend --html`` so both entry points are rendered."""

EXTERNAL = re.compile(r"""(?:\b(?:src|href|xlink:href|srcset|action|poster|data)\s*=\s*["']?\s*(?:https?:)?//)"""
                      r"""|(?:url\(\s*["']?\s*(?:https?:)?//)|(?:@import)""", re.I)  # fmt: skip
"""An attribute or CSS reference that would make the browser fetch something off the file."""


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ADVISOR_")}
    env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"), XDG_DATA_HOME=str(home / ".local" / "share"),
               HF_HOME=str(home / ".hf"), HF_HUB_OFFLINE="1", MPLCONFIGDIR=str(home / ".mpl"))  # fmt: skip
    return env


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> dict[str, dict]:
    """The three pages (rendered once per module: the first one runs and caches the evaluation) with
    the ``recommend --json`` object of the same arguments."""
    from advisor.cli import common

    root = tmp_path_factory.mktemp("reports")
    data = root / "data"
    out: dict[str, dict] = {}
    with pytest.MonkeyPatch.context() as mp:
        for name, value in _env(root / "home").items():
            mp.setenv(name, value)
        for name in [n for n in os.environ if n.startswith("ADVISOR_")]:
            mp.delenv(name)
        common.set_global_overrides()
        for name, (cmd, *args) in CASES.items():
            page = root / f"{name}.html"
            flag = ["--out", str(page)] if cmd == "report" else ["--html", str(page)]
            # recommend --html and report exit 8 when nothing boots, after writing the page
            assert main(["--data-dir", str(data), cmd, *args, *flag]) == (8 if name == "no_boot" else 0)
            assert page.is_file()
            import contextlib
            import io

            buf = io.StringIO()
            with contextlib.redirect_stdout(buf):
                # recommend exits 8 when nothing boots (the JSON is still printed); report writes its page
                assert main(["--data-dir", str(data), "recommend", *args, "--json"]) == (8 if name == "no_boot" else 0)
            out[name] = {"path": page, "html": page.read_text(encoding="utf-8"), "rec": json.loads(buf.getvalue())}
        common.set_global_overrides()
    out["_data"] = {"path": data}
    return out


@pytest.mark.parametrize("case", sorted(CASES))
def test_page_is_self_contained(reports, case):
    text = reports[case]["html"]
    assert text.startswith("<!DOCTYPE html>")
    assert not EXTERNAL.findall(text), EXTERNAL.findall(text)[:5]
    assert "<script" not in text.lower() and "<link" not in text.lower() and "<img" not in text.lower()
    assert "<?xml" not in text and "<!DOCTYPE svg" not in text  # the SVGs are inlined bare
    assert text.count("<svg") >= 3  # K-R plane, predicted vs measured, memory


def test_the_external_resource_check_catches_what_it_looks_for():
    for bad in ('<img src="https://x/y.png">', "<link href='//cdn/x.css'>", "a{background:url( https://x/i.png)}",
                '<use xlink:href="http://x/s.svg#a"/>', "@import 'x.css';"):  # fmt: skip
        assert EXTERNAL.search(bad), bad
    assert not EXTERNAL.search('<svg xmlns="http://www.w3.org/2000/svg"><use xlink:href="#m1"/></svg>')


@pytest.mark.parametrize("case", sorted(CASES))
def test_page_shows_what_recommend_decides(reports, case):
    from advisor.domain.decision import Decision
    from advisor.render.flags import serve_argv

    text, rec = htmllib.unescape(reports[case]["html"]), reports[case]["rec"]
    d = rec["decision"]
    spec = f"{d['speculative_method']}, K={d['num_speculative_tokens']}" if d["speculative_method"] else "off (plain decoding)"
    assert f'<div class="v">{spec}</div>' in text
    ep = "on" if d["enable_expert_parallel"] else "off"
    assert f"TP {d['tensor_parallel_size']} · DP {d['data_parallel_size']} · EP {ep}" in text
    assert shlex.join(serve_argv(rec["model"]["id"], Decision.model_validate(d))) in text
    for section in ('id="kr"', 'id="pvm"', 'id="mem"', 'id="trace"'):
        assert section in text
    for fired in rec["rules_fired"]:
        assert fired["id"] in text and fired["source"] in text
    for line in rec["warnings"] + rec["trace"]:
        assert line in text
    assert re.search(r"fingerprint</th><td>[0-9a-f]{64}<", text)
    # the layout search's candidates are drawn when the recommendation carries them
    assert ('id="layout"' in text) == bool(rec.get("candidates"))
    if rec["prediction"] and d["speculative_method"]:  # plain decoding's gain is 1 by definition: no card
        assert f"x{rec['prediction']['gain']:.2f}" in text
    # the first cards carry the launched configuration's figures (the search's chosen candidate)
    chosen = [c for c in rec.get("candidates") or [] if c.get("chosen")]
    if chosen:
        figs = chosen[0]["prediction"]
        assert f"{figs['throughput_tok_s']['value']:,.0f} tok/s · {figs['tpot_ms']['value']:.1f} ms" in text
        if d["speculative_method"]:
            assert f"predicted gain of {d['speculative_method']} (90 %)</div><div class=\"v\">x{figs['speculative_gain']['value']:.2f}" in text
    # the seed sweep: 70 rows with the host's DSA queues OFF (the ON column has 63 measured pairs)
    assert "70 rows with the host's DSA work queues OFF" in text and "median |log(predicted / measured)|" in text
    assert "leave-one-concurrency-out" in text


def test_moe_and_non_booting_pages(reports):
    moe, nb = reports["moe"], reports["no_boot"]
    assert moe["rec"]["model"]["arch"] == "moe"
    assert nb["rec"]["memory"]["boots"] is False
    text = htmllib.unescape(nb["html"])
    assert "DOES NOT BOOT" in text
    # the planner's smallest TP that boots is drawn beside the chosen configuration
    need = nb["rec"]["memory"]["min_gpus_for_weights"]
    assert need and f"no speculation, TP {need} ({need} GPUs)" in text
    assert nb["rec"]["memory"]["reason"] in text


def test_evaluation_is_cached_for_the_next_report(reports):
    cached = list((reports["_data"]["path"] / "cache").glob("report-seed-*.json"))
    assert len(cached) == 1
    data = json.loads(cached[0].read_text())
    assert {"OFF", "ON"} <= set(data["lomo"]["lomo"]) and len(data["seed_kr"]) == 133  # 70 OFF + 63 ON


def test_out_is_not_written_through_a_directory(run_cli, tmp_path):
    (tmp_path / "page.html").mkdir()
    code, _out, err = run_cli("report", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H200", "--gpus", "1",
                              "--out", str(tmp_path / "page.html"))  # fmt: skip
    assert code == 73 and err.strip().startswith("error:") and "directory" in err
    assert len(err.strip().splitlines()) == 1


def test_layout_candidates_are_read_by_name_and_drawn():
    from advisor.report import figures
    from advisor.report.evidence import layout_candidates

    assert layout_candidates({}) is None and layout_candidates({"candidates": []}) is None
    cands = layout_candidates({"candidates": [
        {"tensor_parallel_size": 4, "data_parallel_size": 2, "prediction": {"throughput_tok_s": {"value": 9000, "low": 8000, "high": 9900},
                                                                           "tpot_ms": {"value": 21.0}}},
        {"label": "TP 8", "throughput_tok_s": 6000.0, "tpot_ms": 15.5, "why": "fewer replicas"},
        {"label": "TP 1 x 8", "boots": False},
    ]})  # fmt: skip
    assert [c["label"] for c in cands] == ["tensor_parallel_size=4 data_parallel_size=2", "TP 8", "TP 1 x 8"]
    assert [c["chosen"] for c in cands] == [True, False, False]  # best first, as the search ranks them
    assert cands[0]["throughput_tok_s"] == 9000 and cands[0]["tpot_ms"] == 21.0 and cands[2]["tpot_ms"] is None
    svg = figures.candidates(cands)
    assert svg.startswith("<svg") and svg.rstrip().endswith("</svg>")
    flagged = layout_candidates({"candidates": [{"label": "a"}, {"label": "b", "chosen": True}]})
    assert [c["chosen"] for c in flagged] == [False, True]
    assert figures.candidates(flagged) is None  # nothing to plot: the page lists them in the table only


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(_chromium() is None, reason="Chromium is not installed (Debian: apt-get install -y chromium; scripts/test.sh does)")
@pytest.mark.parametrize("case", sorted(CASES))
def test_opens_in_headless_chromium_and_is_not_blank(reports, case, tmp_path):
    import numpy as np
    from PIL import Image

    from advisor.report import figures

    shot = tmp_path / "shot.png"
    argv = _chromium_argv(tmp_path, f"--screenshot={shot}", "--window-size=1280,2600", reports[case]["path"].resolve().as_uri())
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, env={**os.environ, "HOME": str(tmp_path)})
    assert proc.returncode == 0 and shot.is_file(), proc.stderr[-2000:]
    im = Image.open(shot).convert("RGB")
    assert im.size == (1280, 2600)
    colours = im.resize((320, 650)).getcolors(maxcolors=1 << 16) or []
    assert len(colours) > 200  # text, figures and cards, not an empty or error page
    px = np.asarray(im, dtype=int)
    assert (px.sum(axis=2) < 200).mean() > 0.02  # the dark header and text

    def near(hex_colour: str, tol: int = 20) -> int:
        rgb = np.array([int(hex_colour[i:i + 2], 16) for i in (1, 3, 5)])
        return int((np.abs(px - rgb) < tol).all(axis=2).sum())

    # the figures were drawn: this recommendation's star and interval on the K-R plane, and the
    # memory planner's stacked terms (weights or KV cache) further down
    assert near(figures.REC_COLOUR) > 300
    assert near(figures.TERMS[0][1]) + near(figures.TERMS[-1][1]) > 2000


def test_report_probe_draws_this_hosts_measurement(tmp_path, monkeypatch, capsys):
    """`report --probe` runs the campaign the recommendation proposes (the stand-in vLLM server of
    tests/vllm_helpers, a real probe store) and draws what it measured on this host."""
    import sys

    from advisor.hardware.host import collect_host

    from tests.test_host_collect import H200_QUERY, fake_nvidia_smi

    fake = Path(__file__).resolve().parent / "vllm_helpers" / "fake_vllm.py"
    # report and the probe see one "8 x H200" host: GPU-less probes are not fitted (measurement scope)
    bindir = tmp_path / "bin"
    bindir.mkdir()
    fake_nvidia_smi(bindir, "".join(H200_QUERY.replace("0, ", f"{i}, ", 1) for i in range(8)))
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_TOKEN_S", "0.01")
    monkeypatch.setenv("FAKE_TOKENS", "64")
    # K̄ = 2 > R = 1.05 at 10 ms a token: suffix ≈ 1.9x on this "host" (x1.66-1.90 with three CPU hogs on two cores),
    # clear of the draft model's predicted x1.44 on 8 x H200; at R = 1.25 and 5 ms a token a loaded CI machine measured
    # x1.46 and the draft model was launched instead (the client's overhead compresses a short fake step's gain)
    monkeypatch.setenv("FAKE_SPEC_STEP_COST", "1.05")
    data, page = tmp_path / "data", tmp_path / "page.html"
    # a deployment the prediction is unsure about on this host class (8 x H200: P(win) in the probe band)
    assert main(["--data-dir", str(data), "report", "meta-llama/Llama-3.1-70B-Instruct", "--corpus", "humaneval", "--tp", "8",
                 "--probe", "--probe-requests", "6", "--server-cmd", f"{sys.executable} {fake}", "--out", str(page)]) == 0  # fmt: skip
    assert capsys.readouterr().out.strip() == str(page)
    text = htmllib.unescape(page.read_text())
    assert "2 ok probe record(s) of this host" in text  # vanilla and suffix:32 of one campaign
    assert "probes on this host: median |log(predicted / measured)|" in text and "over 1 observation(s)" in text
    assert "measurement outranks the prediction" in text and "measured on this host" in text
    # the same records, as the report reads them, sit on the K-R plane at their measured K̄
    from advisor.cli.common import set_global_overrides, settings
    from advisor.predict.dataset import default_profile_of
    from advisor.report import evidence as ev

    set_global_overrides(data_dir=str(data))
    s = settings()
    records, _note = ev.host_probes(s, collect_host(s).fingerprint)
    (obs, point), = ev.probe_points(records, default_profile_of(s))
    assert point.k_bar == pytest.approx(2.0) and obs.gain > 1.1 and point.r > 1


def test_page_without_prediction_or_memory_plan(tmp_path):
    """The pure core without a predictor or a planner (what recommend falls back to when the
    predictor declines): the page says so instead of failing on a missing figure."""
    from advisor.cli.common import settings
    from advisor.model.load import load_profile
    from advisor.domain.host import HostContext
    from advisor.plan.recommend import recommend
    from advisor.domain.workload import Workload
    from advisor.report.page import build_report
    from advisor.rules.loader import load_rules

    s = settings()
    profile = load_profile("meta-llama/Llama-3.1-8B-Instruct", s)
    rec = recommend(profile, HostContext(gpu="H200", gpus=1, origin="command line"), Workload(concurrency=8),
                    load_rules(s.rules_dirs))  # fmt: skip
    # without a predictor no suffix candidate is scored; a recommendation with no prediction at all
    # is what nothing booting leaves (advisor.plan.recommend._not_bootable)
    assert rec.memory is None and not any(c.p_win for c in rec.candidates)
    rec = rec.model_copy(update={"prediction": None, "candidates": []})
    text = htmllib.unescape(build_report(rec, profile, s.model_copy(update={"data_dir": tmp_path / "data"})))
    assert "none (the predictor declined)" in text and "No prediction for this recommendation" in text
    assert "No memory plan in this recommendation." in text
    assert text.count("<svg") == 2 and not EXTERNAL.findall(text)


def _report_of_model_dir(reports, tmp_path, name: str) -> str:
    """The page `advisor report` writes for Llama-3.1-8B-Instruct's config in a directory called ``name``."""
    from conftest import CATALOG

    model = tmp_path / name
    model.mkdir()
    shutil.copy(CATALOG / "meta-llama" / "Llama-3.1-8B-Instruct" / "config.json", model / "config.json")
    page = tmp_path / "page.html"
    assert main(["--data-dir", str(reports["_data"]["path"]), "report", str(model), "--gpu", "H200", "--gpus", "1",
                 "--out", str(page)]) == 0  # fmt: skip
    return page.read_text()


def test_hostile_model_path_is_escaped(reports, tmp_path):
    """A model directory whose name is markup: the page shows it as text, never as an element."""
    text = _report_of_model_dir(reports, tmp_path, "m<script>alert(1)<img src=x onerror=alert(2)>")
    assert "<script" not in text and "<img" not in text and not EXTERNAL.findall(text)
    assert "m&lt;script&gt;alert(1)&lt;img src=x onerror=alert(2)&gt;" in text


def test_non_suffix_launch_is_labelled_as_launched(reports):
    """DeepSeek-R1 on 8xH200 launches MTP: the cards say so and give MTP's gain, K̄ and R (the
    recommendation's prediction is MTP's, advisor.plan.choose); suffix is a candidate with its own
    figures, and the memory bars name MTP."""
    text, rec = htmllib.unescape(reports["mtp"]["html"]), reports["mtp"]["rec"]
    p = rec["prediction"]
    assert rec["decision"]["speculative_method"] == "mtp" and p["method"] == "mtp" and p["p_win"] is None
    assert "suffix, K=" not in text.split('id="kr"')[0]  # nothing above the K-R plane calls it suffix
    assert "P(suffix wins)" not in text.split('id="kr"')[0]
    assert f"mtp: K̄ · R</div><div class=\"v\">{p['k_bar']:.2f} · {p['r']:.2f}" in text
    assert f"chosen: mtp K={rec['decision']['num_speculative_tokens']}" in text
    assert "Star: this recommendation (mtp, K=1, launched" in text


def test_layout_table_says_why(reports):
    """Every candidate row has its reason: the search's why_not / why_lost, the chosen one its objective."""
    for case in ("mtp", "dense"):
        rec = reports[case]["rec"]
        if not rec.get("candidates"):
            continue
        table = reports[case]["html"].split('id="layout"')[1].split("</table>")[0]
        rows = [(htmllib.unescape(a), htmllib.unescape(b)) for a, b in re.findall(r"<tr><td>(.*?)</td>.*?<td>([^<]*)</td></tr>", table)]
        assert len(rows) == len(rec["candidates"])
        for cand, (label, why) in zip(rec["candidates"], rows):
            assert cand["label"] in label
            want = cand.get("why_not") or cand.get("why_lost")
            assert why == want if want else why.startswith("chosen: the highest host throughput"), (cand["label"], why)


def test_candidate_labels_do_not_overlap_or_leave_the_axes(reports):
    """The drawn labels (Agg's own text extents) of the 32 DeepSeek-R1 candidates: inside the axes,
    no two overlapping, the chosen one labelled."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from advisor.report import figures
    from advisor.report.evidence import layout_candidates

    cands = layout_candidates(reports["mtp"]["rec"])
    fig = figures.candidates_figure(cands)
    renderer = FigureCanvasAgg(fig).get_renderer()
    (ax,) = fig.axes
    frame = ax.get_window_extent(renderer)
    boxes = {t.get_text(): t.get_window_extent(renderer) for t in ax.texts}
    assert next(c["label"] for c in cands if c["chosen"]) in boxes and len(boxes) >= 3
    for label, b in boxes.items():
        assert frame.x0 <= b.x0 and b.x1 <= frame.x1 and frame.y0 <= b.y0 and b.y1 <= frame.y1, label
    items = list(boxes.items())
    for i, (la, a) in enumerate(items):
        for lb, b in items[i + 1:]:
            assert not a.overlaps(b), (la, lb)


def test_place_labels_keeps_apart_and_inside():
    from advisor.report.figures import _text_box, place_labels

    pts = [(100.0, 100.0), (102.0, 101.0), (104.0, 99.0), (395.0, 295.0)]
    labels = ["TP 8, mtp K=1", "TP 4 x DP 2 + EP, mtp K=1", "TP 2 x DP 4, mtp K=1", "TP 8, plain"]
    offs = place_labels(pts, labels, (0.0, 0.0, 400.0, 300.0), must=frozenset({0}))
    assert offs[0] is not None and offs[3] is not None  # the chosen one, and the one in the corner (flipped inside)
    boxes = [(x + o[0], y + o[1], x + o[0] + _text_box(t)[0], y + o[1] + _text_box(t)[1])
             for (x, y), t, o in zip(pts, labels, offs) if o is not None]  # fmt: skip
    for i, a in enumerate(boxes):
        assert 0 <= a[0] and a[2] <= 400 and 0 <= a[1] and a[3] <= 300
        for b in boxes[i + 1:]:
            assert not (a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3])


OVERFLOW_PROBE = """<script>
(function () {
  // every text node's line boxes, and every figure, table, pre and card, against its card
  // (the nearest .card, section or header); the result is written into the DOM for --dump-dom
  const CARD = ".card, section, header", tol = 1.5, bad = [];
  const within = (r, c) => r.left >= c.left - tol && r.right <= c.right + tol && r.top >= c.top - tol && r.bottom <= c.bottom + tol;
  const box = (r) => [r.left, r.top, r.right, r.bottom].map(Math.round);
  const name = (el) => el.id ? "#" + el.id : el.tagName.toLowerCase() + (el.className ? "." + el.className : "");
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  let texts = 0;
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    if (!n.data.trim() || n.parentElement.closest("svg, script, style")) continue;
    const card = n.parentElement.closest(CARD);
    if (!card) { bad.push({text: n.data.trim().slice(0, 80), card: null}); continue; }
    const range = document.createRange();
    range.selectNodeContents(n);
    const c = card.getBoundingClientRect();
    texts++;
    for (const r of range.getClientRects()) {
      if (r.width && r.height && !within(r, c)) { bad.push({text: n.data.trim().slice(0, 80), card: name(card), box: box(r), card_box: box(c)}); break; }
    }
  }
  for (const el of document.querySelectorAll("svg, table, pre, .card, .cards")) {
    const card = el.parentElement.closest(CARD);
    if (card && !within(el.getBoundingClientRect(), card.getBoundingClientRect()))
      bad.push({element: name(el), card: name(card), box: box(el.getBoundingClientRect()), card_box: box(card.getBoundingClientRect())});
  }
  const out = document.createElement("pre");
  out.id = "__overflow";
  out.textContent = JSON.stringify({texts: texts, overflow: bad, page_width: document.documentElement.scrollWidth,
                                    viewport: document.documentElement.clientWidth});
  document.body.appendChild(out);
})();
</script>"""
"""Injected before ``</body>`` of a copy of the page (the page itself carries no script)."""


def _chromium_argv(tmp_path: Path, *extra: str) -> list[str]:
    # --host-resolver-rules: any fetch off the file would fail, as on an air-gapped host
    return [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--host-resolver-rules=MAP * ~NOTFOUND",
            f"--user-data-dir={tmp_path / 'profile'}", *extra]  # fmt: skip


def overflow_report(page: Path, tmp_path: Path, width: int) -> dict:
    """What OVERFLOW_PROBE finds in ``page`` laid out by headless Chromium at ``width`` CSS pixels."""
    probe = tmp_path / f"probe-{width}.html"
    probe.write_text(page.read_text(encoding="utf-8").replace("</body>", OVERFLOW_PROBE + "\n</body>"), encoding="utf-8")
    proc = subprocess.run(_chromium_argv(tmp_path, f"--window-size={width},1600", "--dump-dom", probe.resolve().as_uri()),
                          capture_output=True, text=True, timeout=120, env={**os.environ, "HOME": str(tmp_path)})  # fmt: skip
    found = re.search(r'<pre id="__overflow">(.*?)</pre>', proc.stdout, re.S)
    assert proc.returncode == 0 and found, proc.stderr[-2000:]
    return json.loads(htmllib.unescape(found.group(1)))


@pytest.mark.skipif(_chromium() is None, reason="Chromium is not installed (Debian: apt-get install -y chromium; scripts/test.sh does)")
@pytest.mark.parametrize("width", [1280, 820])
@pytest.mark.parametrize("case", sorted(CASES))
def test_no_text_overflows_its_card(reports, case, width, tmp_path):
    """Element boxes from Chromium's layout: every line of text, figure, table and code block lies
    inside its card (section or summary card), and the page is no wider than the window."""
    found = overflow_report(reports[case]["path"], tmp_path, width)
    assert found["texts"] > 150  # the probe saw the page's text
    assert found["overflow"] == [], found["overflow"][:8]
    assert found["page_width"] <= found["viewport"]


@pytest.mark.skipif(_chromium() is None, reason="Chromium is not installed (Debian: apt-get install -y chromium; scripts/test.sh does)")
def test_overflow_probe_catches_text_outside_its_card(reports, tmp_path):
    """The probe is not blind: the rules table as the page had it before (what a rule sets on one
    unbreakable line, the table free to grow) is reported."""
    text = reports["mtp"]["html"].replace("</style>", "table.fixed { table-layout: auto; } td code { white-space: nowrap; }</style>")
    text = text.replace("</code></div><div><code>", " ")
    page = tmp_path / "wide.html"
    page.write_text(text, encoding="utf-8")
    found = overflow_report(page, tmp_path, 1280)
    assert any(o.get("card") == "#trace" for o in found["overflow"]), found["overflow"][:3]


def test_bidi_and_escape_characters_in_a_model_path_are_made_visible(reports, tmp_path):
    """A bidi override (U+202E, "Trojan Source") or an ESC in a model's path reaches neither the page
    nor the terminal as the character itself: both show its \\uNNNN / \\xNN escape."""
    text = _report_of_model_dir(reports, tmp_path, "evil\u202egpj.exe\u2066\x1b[31m")
    assert not any(c in text for c in "\u202e\u2066\x1b")
    assert "evil\\u202egpj.exe\\u2066\\x1b[31m" in text
