"""A small stand-in for a vLLM OpenAI server, for fast tests of the probe harness (no model, no torch).

    python fake_vllm.py --model NAME --host 127.0.0.1 --port P [any vLLM flags...]

Serves /health, /version, /v1/models, streaming /v1/completions and /v1/chat/completions, and
/metrics with vLLM's counter names (spec-decode counters only when --speculative-config is given).
Behaviour is picked by the model name (so a campaign can mix good and broken configurations):
- ``broken`` (or --gpu-memory-utilization below 0.2): prints vLLM's KV-cache boot error, exits 1;
- ``hang``: never answers /health;
- ``nowarm``: /health 200 but every completion is HTTP 500;
- ``stubborn``: ignores SIGTERM (must be killed);
- ``spawner``: starts a child process that sleeps (must be reaped with the group);
- ``setsider``: starts a child that sleeps in a session of its own (setsid: out of the group; must be stopped too);
- ``nochat``: /v1/chat/completions answers 400 (no chat template), completions work;
- ``nometrics``: /metrics is 404;
- ``dies``: the process exits (status 3) on its third completion request, mid-load;
- anything else: a working server.
FAKE_MISBEHAVE (with FAKE_MISBEHAVE_ONLY=spec: only a server given --speculative-config) picks one
malformed answer: version_list, version_int (/version), models_str, models_list, models_empty
(/v1/models), sse_list, usage_str, choices_str (the streamed chunks), warm_hang (completions never
answer), metrics_slow (one byte a second), metrics_huge (an endless body), metrics_esc (terminal
escapes and bidi controls in /metrics), metrics_garbage, metrics_x100 (the generation counter x100),
metrics_accept_gt_draft (more tokens accepted than drafted), metrics_60_per_step (~60 tokens per step at any K).
Environment: FAKE_LOG_SPAM_BYTES (bytes printed at start), FAKE_BOOT_S (delay before /health is 200, default 0.2), FAKE_TOKEN_S (time per token,
default 0.002), FAKE_TOKENS (tokens per response when max_tokens is larger, default 16),
FAKE_SPEC_STEP_COST (cost R of a speculative step that emits two tokens, in plain-token times;
default 2: suffix no faster than vanilla; 1.25: suffix ≈ 1.6x faster), FAKE_SPIN (set: a child process spins
on one core for the server's life, as vLLM's EngineCore does when its steps are host-bound).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

STATE = {"gen": 0, "drafts": 0, "draft_tokens": 0, "accepted": 0, "inflight": 0, "max_inflight": 0, "requests": 0}
LOCK = threading.Lock()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("model_tag", nargs="?")
    parser.add_argument("--model")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--speculative-config")
    parser.add_argument("--max-model-len", type=int, default=512)
    parser.add_argument("--gpu-memory-utilization", type=float, default=0.9)
    parser.add_argument("--api-key", nargs="+")
    args, _unknown = parser.parse_known_args()
    model = args.model or args.model_tag or "fake"
    kind = os.path.basename(model.rstrip("/"))
    spec = json.loads(args.speculative_config) if args.speculative_config else None
    k = spec["num_speculative_tokens"] if spec else 0
    boot_s = float(os.environ.get("FAKE_BOOT_S", "0.2"))
    token_s = float(os.environ.get("FAKE_TOKEN_S", "0.002"))
    tokens_per_reply = int(os.environ.get("FAKE_TOKENS", "16"))
    step_cost = float(os.environ.get("FAKE_SPEC_STEP_COST", "2"))
    print(f"fake vLLM {kind} on {args.host}:{args.port} spec={spec}", flush=True)
    spam = int(os.environ.get("FAKE_LOG_SPAM_BYTES", "0"))  # a server that prints without end (issue 43 item 5)
    while spam > 0:
        sys.stdout.write("x" * 1023 + "\n")
        spam -= 1024
    sys.stdout.flush()
    if os.environ.get("FAKE_SPIN"):  # reaped with the process group, as the real EngineCore is
        subprocess.Popen([sys.executable, "-c", "while True: pass"])
    if kind == "broken" or args.gpu_memory_utilization < 0.2:
        time.sleep(0.3)
        print("(EngineCore pid=1) ValueError: No available memory for the cache blocks. Try increasing "
              "`gpu_memory_utilization` when initializing the engine.", flush=True)
        return 1
    if kind == "stubborn":
        signal.signal(signal.SIGTERM, lambda *_: print("ignoring SIGTERM", flush=True))
    if kind in ("spawner", "setsider"):
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=kind == "setsider")
        print(f"child pid {child.pid}", flush=True)
    started = time.monotonic()
    # vLLM's AuthenticationMiddleware (vllm/entrypoints/serve/middleware/register.py, authenticate.py, 0.33.0):
    # --api-key (it wins) else VLLM_API_KEY; /v1 paths without "Authorization: Bearer <one of them>" get 401.
    tokens = [t for t in (args.api_key or [os.environ.get("VLLM_API_KEY")]) if t]
    bad = os.environ.get("FAKE_MISBEHAVE", "")
    if os.environ.get("FAKE_MISBEHAVE_ONLY") == "spec" and spec is None:
        bad = ""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, fmt, *a):  # keep the log short
            pass

        def _json(self, code: int, obj: object) -> None:
            body = json.dumps(obj).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _refused(self) -> bool:
            scheme, _, token = (self.headers.get("Authorization") or "").partition(" ")
            if tokens and self.path.startswith(("/v1", "/v2")) and not (scheme.lower() == "bearer" and token in tokens):
                self._json(401, {"error": "Unauthorized"})
                return True
            return False

        def do_GET(self) -> None:
            if self._refused():
                return
            if self.path == "/health":
                if kind == "hang" or time.monotonic() - started < boot_s:
                    self._json(503, {"status": "starting"})
                else:
                    self._json(200, {})
            elif self.path == "/version":
                self._json(200, {"version_list": ["0.0.fake"], "version_int": {"version": 5}}.get(bad, {"version": "0.0.fake"}))
            elif self.path == "/v1/models":
                self._json(200, {"models_str": {"data": [model]}, "models_list": [{"id": model}], "models_empty": {"data": []},
                                 }.get(bad, {"data": [{"id": model}]}))  # fmt: skip
            elif self.path == "/metrics" and bad in ("metrics_slow", "metrics_huge"):
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.end_headers()
                try:
                    while True:
                        if bad == "metrics_slow":
                            self.wfile.write(b"#")
                            self.wfile.flush()
                            time.sleep(1.0)
                        else:
                            self.wfile.write(b"# padding " + b"x" * 65536 + b"\n")
                except OSError:
                    return
            elif self.path == "/metrics" and bad in ("metrics_esc", "metrics_garbage"):
                text = metrics_text(model, spec is not None, k)
                text += ('vllm:bogus{x="\x1b]0;pwned\x07\u202e"} 1\n' if bad == "metrics_esc" else "\x1b[2J{{{ not metrics\n")
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.end_headers()
                self.wfile.write(text.encode())
            elif self.path == "/metrics" and kind != "nometrics":
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.end_headers()
                self.wfile.write(metrics_text(model, spec is not None, k, bad).encode())
            elif self.path == "/stats":
                with LOCK:
                    self._json(200, dict(STATE))
            else:
                self._json(404, {})

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
            if self._refused():
                return
            chat = self.path == "/v1/chat/completions"
            if bad == "warm_hang":
                time.sleep(3600)
                return
            if kind == "nowarm" or (kind == "nochat" and chat):
                self._json(400 if chat and kind == "nochat" else 500, {"error": {"message": "no"}})
                return
            if body.get("prompt") == "TOO LONG" or body.get("messages", [{}])[-1].get("content") == "TOO LONG":
                self._json(400, {"error": {"message": "maximum context length"}})
                return
            n = min(int(body.get("max_tokens", 16)), tokens_per_reply)
            if kind == "dies" and STATE["requests"] >= 2:
                print("Fatal Python error: Segmentation fault", flush=True)
                os._exit(3)
            with LOCK:
                STATE["inflight"] += 1
                STATE["requests"] += 1
                STATE["max_inflight"] = max(STATE["max_inflight"], STATE["inflight"])
            try:
                self._stream(body, n, chat, token_s, k)
            finally:
                with LOCK:
                    STATE["inflight"] -= 1

        def _stream(self, body: dict, n: int, chat: bool, token_s: float, k: int) -> None:
            if not body.get("stream"):
                with LOCK:
                    STATE["gen"] += n
                self._json(200, {"choices": [{"text": "x" * n}], "usage": {"completion_tokens": n}})
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            step = 2 if k else 1  # with speculation, two tokens per chunk (one accepted draft token)
            sent = 0
            ids = bool(body.get("return_token_ids"))  # vLLM's shapes: chat_completion/serving.py, completion/serving.py
            text = body.get("prompt") or "".join(str(m.get("content", "")) for m in body.get("messages", []))
            prompt_ids = [ord(c) % 1000 for c in text]
            while sent < n:
                time.sleep(token_s * (step_cost if k else 1))
                m = min(step, n - sent)
                piece = "ab"[:m]
                choice = {"delta": {"content": piece}} if chat else {"text": piece}
                chunk: dict = {"choices": [choice]}
                if ids:
                    choice["token_ids"] = [97, 98][:m]
                    if sent == 0:
                        (chunk if chat else choice)["prompt_token_ids"] = prompt_ids
                if sent + m >= n:
                    choice["finish_reason"] = "length"
                chunk = {"sse_list": [choice], "choices_str": {"choices": "ab"}}.get(bad, chunk)
                self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                self.wfile.flush()
                sent += m
                with LOCK:
                    STATE["gen"] += m
                    if k:
                        STATE["drafts"] += 1
                        STATE["draft_tokens"] += k
                        STATE["accepted"] += m - 1
            usage = {"choices": [], "usage": "lots" if bad == "usage_str" else {"completion_tokens": n}}
            self.wfile.write(f"data: {json.dumps(usage)}\n\ndata: [DONE]\n\n".encode())
            self.wfile.flush()

    server = ThreadingHTTPServer((args.host, args.port), Handler)
    server.daemon_threads = True
    server.serve_forever()
    return 0


def metrics_text(model: str, spec: bool, k: int, bad: str = "") -> str:
    labels = f'engine="0",model_name="{model}"'
    with LOCK:
        s = dict(STATE)
    if bad == "metrics_x100":
        s["gen"] *= 100
    elif bad == "metrics_accept_gt_draft":
        s["accepted"] = 2 * s["draft_tokens"] + 10
    elif bad == "metrics_60_per_step":  # drafts and acceptance consistent with K, but 60 tokens per step
        s["accepted"] = s["draft_tokens"] = s["gen"] * 59 // 60
        s["drafts"] = -(-s["draft_tokens"] // max(1, k))
    out = [
        "# HELP vllm:generation_tokens_total Number of generation tokens processed.",
        "# TYPE vllm:generation_tokens_total counter",
        f"vllm:generation_tokens_total{{{labels}}} {float(s['gen'])}",
    ]
    if spec:
        for name, key in (("drafts", "drafts"), ("draft_tokens", "draft_tokens"), ("accepted_tokens", "accepted")):
            out += [f"# TYPE vllm:spec_decode_num_{name}_total counter", f"vllm:spec_decode_num_{name}_total{{{labels}}} {float(s[key])}"]
        out.append("# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter")
        for pos in range(k):
            value = float(s["accepted"]) if pos == 0 else 0.0
            out.append(f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{{labels},position="{pos}"}} {value}')
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
