"""Load generator: streaming OpenAI-API requests at fixed concurrency, bounded in time and count.

``run_load(base_url, model, api, prompts, spec)`` keeps ``spec.concurrency`` requests in flight
(each worker sends its next prompt when the previous one finishes) until the corpus, the request
budget or the time budget runs out; at the deadline the requests still in flight are cancelled (the
server aborts them when the connection closes). Time to first token and the gaps between streamed
chunks (ITL; with speculative decoding one chunk may carry several tokens) are measured per request.
Targets must be loopback addresses.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Mapping, Sequence
from urllib.parse import urlparse

from pydantic import BaseModel, ConfigDict, Field

from advisor.errors import UsageError
from advisor.probe.corpus import Prompt

LOOPBACK = ("127.0.0.1", "localhost", "::1")


class LoadSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    concurrency: int = Field(default=32, ge=1, le=1_000_000)  # ProbeRecord.MAX_CONCURRENCY
    duration_s: float | None = Field(default=120.0, gt=0)
    """Stop issuing and cut in-flight requests after this long; None: only ``max_requests`` bounds it."""
    max_requests: int | None = Field(default=None, ge=1)
    max_tokens: int = Field(default=1024, ge=1)
    temperature: float = Field(default=0.0, ge=0)
    ignore_eos: bool = False
    """vLLM's ``ignore_eos``: every request generates ``max_tokens`` (fixed output length)."""
    request_timeout_s: float = Field(default=600.0, gt=0)
    max_wall_s: float = Field(default=3600.0, gt=0)
    """Hard ceiling when only ``max_requests`` bounds the run."""
    keep_responses: bool = False
    """Keep each finished request's generated text and token ids (``LoadResult.responses``): the
    model's own outputs, which ``advisor kbar`` replays to predict K̄ offline. The requests then ask
    for vLLM's ``return_token_ids`` (the prompt's ids in the first chunk, each chunk's new ids:
    vllm/entrypoints/openai/chat_completion/protocol.py:423-430, 0.32.0), so the replay sees
    exactly the tokens vLLM generated, not a re-tokenisation of their text."""


class Response(BaseModel):
    """One finished request's output, as the server streamed it."""

    model_config = ConfigDict(extra="forbid")

    index: int = Field(ge=0)
    """Position of the prompt in the prompt sequence given to ``run_load``."""
    text: str
    completion_tokens: int | None = None
    finish_reason: str | None = None
    """``stop`` (EOS or a stop token), ``length`` (cut at max_tokens), as the server said."""
    prompt_token_ids: list[int] | None = None
    """The prompt as vLLM tokenized it (chat template applied), when the server returned it."""
    token_ids: list[int] | None = None
    """The generated token ids, EOS included when the model stopped on it, when returned."""


class LoadResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    requests_ok: int = 0
    requests_failed: int = 0
    requests_rejected: int = 0
    """HTTP 400 (e.g. prompt + max_tokens longer than max_model_len): skipped, not an error."""
    requests_cut: int = 0
    """In flight at the deadline, cancelled."""
    output_tokens: int = 0
    """Completion tokens of the finished requests (from the stream's usage block)."""
    elapsed_s: float = 0.0
    corpus_exhausted: bool = False
    ttft_ms_p50: float | None = None
    ttft_ms_p99: float | None = None
    itl_ms_p50: float | None = None
    itl_ms_p99: float | None = None
    busy_s: float = 0.0
    """Summed lifetimes (send to last byte) of the finished requests. Over ``elapsed_s`` it is the load's
    mean number of requests in flight (Little's law): below the nominal concurrency by the ramp-down
    of the last wave, which a short load at a high concurrency cannot hide."""
    errors: list[str] = Field(default_factory=list)
    """The first few failures, for the log."""
    responses: list[Response] = Field(default_factory=list)
    """Finished requests' texts, in completion order (only with ``LoadSpec.keep_responses``)."""


def percentile(values: Sequence[float], q: float) -> float | None:
    """Linear-interpolated percentile (numpy's default), None for no values."""
    if not values:
        return None
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def check_loopback(base_url: str) -> None:
    host = urlparse(base_url).hostname
    if host not in LOOPBACK and not (host or "").startswith("127."):
        raise UsageError(f"probe load goes to loopback addresses only, not {host!r}")


def _body(api: str, model: str, prompt: Prompt, spec: LoadSpec) -> dict:
    body: dict = {
        "model": model,
        "max_tokens": spec.max_tokens,
        "temperature": spec.temperature,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if spec.ignore_eos:
        body["ignore_eos"] = True
    if spec.keep_responses:
        body["return_token_ids"] = True
    if api == "chat":
        body["messages"] = prompt.chat()
    else:
        body["prompt"] = prompt.text
    return body


def _chunk_parts(chunk: object) -> tuple[dict | None, list[dict]]:
    """(usage, choices) of one SSE chunk; ValueError when it is not the OpenAI shape (an object
    whose ``usage`` is an object and ``choices`` a list of objects)."""
    if not isinstance(chunk, dict):
        raise ValueError(f"SSE chunk is a {type(chunk).__name__}, not an object")
    usage, choices = chunk.get("usage"), chunk.get("choices") or []
    if usage is not None and not isinstance(usage, dict):
        raise ValueError(f"SSE chunk usage is a {type(usage).__name__}, not an object")
    if not isinstance(choices, list) or not all(isinstance(c, dict) for c in choices):
        raise ValueError("SSE chunk choices is not a list of objects")
    return usage, choices


def _piece(api: str, choice: dict) -> str | None:
    if api == "completions":
        text = choice.get("text")
        return text if isinstance(text, str) else None
    delta = choice.get("delta") or {}
    if not isinstance(delta, dict):
        return None
    for key in ("content", "reasoning_content", "reasoning"):
        if isinstance(delta.get(key), str) and delta[key]:
            return delta[key]
    return None


class _Tally:
    def __init__(self) -> None:
        self.result = LoadResult()
        self.ttfts: list[float] = []
        self.itls: list[float] = []

    def error(self, text: str) -> None:
        self.result.requests_failed += 1
        if len(self.result.errors) < 5:
            from advisor.errors import printable

            self.result.errors.append(printable(text[:300], keep_newlines=False))


def _kept_ids(chunk: dict, prompt_ids: list[int] | None, ids: list[int] | None, finish: str | None,
              ) -> tuple[list[int] | None, list[int] | None, str | None]:  # fmt: skip
    """What a streamed chunk adds to a kept response: vLLM's ``return_token_ids`` fields (chat: the
    prompt's ids at the top of the first chunk, completions: in its choice; each choice's new
    ``token_ids``) and the ``finish_reason``. Malformed parts are ignored, never raised on."""
    def _int_list(v: object) -> list[int] | None:
        # token ids are int32 (every vocabulary; advisor kbar's arrays): a larger or negative id is a lying server
        return v if isinstance(v, list) and all(isinstance(t, int) and not isinstance(t, bool) and 0 <= t < 2**31
                                                for t in v) else None  # fmt: skip

    prompt_ids = _int_list(chunk.get("prompt_token_ids")) or prompt_ids
    choices = chunk.get("choices")
    for choice in choices if isinstance(choices, list) else ():
        if not isinstance(choice, dict):
            continue
        reason = choice.get("finish_reason")
        finish = reason if isinstance(reason, str) else finish
        prompt_ids = _int_list(choice.get("prompt_token_ids")) or prompt_ids
        new = _int_list(choice.get("token_ids"))
        if new is not None:
            ids = (ids or []) + new
    return prompt_ids, ids, finish


async def _one(client, url: str, api: str, body: dict, tally: _Tally, index: int | None = None) -> None:
    """One streamed request; with ``index`` set, its generated text is kept in the tally."""
    start = time.perf_counter()
    first = last = None
    gaps: list[float] = []
    pieces: list[str] = []
    tokens = None
    finish = None
    prompt_ids: list[int] | None = None
    ids: list[int] | None = None
    async with client.stream("POST", url, json=body) as resp:
        if resp.status_code != 200:
            head = bytearray()
            async for piece in resp.aiter_bytes():  # an error body is read only as far as it is shown
                head += piece
                if len(head) >= 65536:
                    break
            text = bytes(head).decode("utf-8", "replace")
            if resp.status_code == 400:
                tally.result.requests_rejected += 1
            else:
                tally.error(f"HTTP {resp.status_code}: {text}")
            return
        async for line in resp.aiter_lines():
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
            if data == "[DONE]":
                break
            chunk = json.loads(data)
            usage, choices = _chunk_parts(chunk)
            if usage:
                tokens = usage.get("completion_tokens")
                if tokens is not None and (not isinstance(tokens, int) or isinstance(tokens, bool) or tokens < 0):
                    raise ValueError(f"usage.completion_tokens is {tokens!r}, not a count")
            if index is not None:
                prompt_ids, ids, finish = _kept_ids(chunk, prompt_ids, ids, finish)
            for choice in choices:
                piece = _piece(api, choice)
                if piece:
                    pieces.append(piece)
                    now = time.perf_counter()
                    if first is None:
                        first = now
                    else:
                        gaps.append(now - last)
                    last = now
    tally.result.requests_ok += 1
    tally.result.output_tokens += int(tokens or 0)
    tally.result.busy_s += time.perf_counter() - start
    if index is not None:
        tally.result.responses.append(Response(index=index, text="".join(pieces), completion_tokens=tokens,
                                               finish_reason=finish, prompt_token_ids=prompt_ids, token_ids=ids))
    if first is not None:
        tally.ttfts.append(first - start)
        tally.itls.extend(gaps)


async def _run(base_url, model, api, prompts, spec: LoadSpec, progress, alive, headers=None) -> LoadResult:
    import httpx

    url = f"{base_url}/v1/chat/completions" if api == "chat" else f"{base_url}/v1/completions"
    tally = _Tally()
    it = iter(enumerate(prompts))
    issued = 0
    t0 = time.monotonic()
    budget = spec.duration_s if spec.duration_s is not None else spec.max_wall_s

    async def worker(client) -> None:
        nonlocal issued
        while spec.max_requests is None or issued < spec.max_requests:
            item = next(it, None)
            if item is None:
                tally.result.corpus_exhausted = True
                return
            index, prompt = item
            issued += 1
            try:
                await _one(client, url, api, _body(api, model, prompt, spec), tally, index if spec.keep_responses else None)
            except asyncio.CancelledError:
                tally.result.requests_cut += 1
                raise
            except (httpx.HTTPError, ValueError, RecursionError) as exc:  # ValueError: bad JSON or a chunk of another shape
                tally.error(f"{type(exc).__name__}: {exc}")

    limits = httpx.Limits(max_connections=spec.concurrency + 4, max_keepalive_connections=spec.concurrency + 4)
    timeout = httpx.Timeout(spec.request_timeout_s, connect=10.0)
    async with httpx.AsyncClient(limits=limits, timeout=timeout, trust_env=False, headers=dict(headers or {})) as client:
        tasks = [asyncio.create_task(worker(client)) for _ in range(spec.concurrency)]
        try:
            while True:
                left = budget - (time.monotonic() - t0)
                done, pending = await asyncio.wait(tasks, timeout=max(0.0, min(0.5, left)))
                if progress is not None:
                    progress(tally.result, time.monotonic() - t0)
                if not pending or left <= 0 or (alive is not None and not alive()):
                    break
        finally:
            # Also on Ctrl-C (asyncio.run cancels this task): every worker is cancelled and awaited
            # before the client closes, so none is left to fail on a closed client and print a
            # "Task exception was never retrieved" traceback.
            for task in tasks:
                task.cancel()
            results = await asyncio.gather(*tasks, return_exceptions=True)
    for res in results:
        if isinstance(res, BaseException) and not isinstance(res, asyncio.CancelledError):
            raise res
    r = tally.result
    r.elapsed_s = time.monotonic() - t0
    r.ttft_ms_p50, r.ttft_ms_p99 = (_ms(percentile(tally.ttfts, q)) for q in (50, 99))
    r.itl_ms_p50, r.itl_ms_p99 = (_ms(percentile(tally.itls, q)) for q in (50, 99))
    return r


def mean_in_flight(result: LoadResult) -> float | None:
    """Requests in flight on average over the load (Little's law), None when nothing finished."""
    if result.requests_ok == 0 or result.elapsed_s <= 0:
        return None
    return round(result.busy_s / result.elapsed_s, 2)


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000.0, 3)


def run_load(
    base_url: str,
    model: str,
    api: str,
    prompts: Sequence[Prompt],
    spec: LoadSpec,
    *,
    show_progress: bool = False,
    label: str = "load",
    alive: Callable[[], bool] | None = None,
    headers: Mapping[str, str] | None = None,
) -> LoadResult:
    """Run one bounded load against ``base_url``; ``alive`` (if given) is polled to stop early; ``headers`` go
    with every request (the server's API key: advisor.probe.server.Server.headers)."""
    check_loopback(base_url)
    if api not in ("chat", "completions"):
        raise UsageError(f"api must be 'chat' or 'completions', not {api!r}")
    if not show_progress:
        return asyncio.run(_run(base_url, model, api, prompts, spec, None, alive, headers))
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    total = spec.duration_s if spec.duration_s is not None else float(spec.max_requests or 1)
    with Progress(
        TextColumn("[bold]{task.description}"), BarColumn(), TextColumn("{task.fields[stats]}"), TimeElapsedColumn(),
        console=Console(stderr=True), transient=True,
    ) as bar:  # fmt: skip
        task = bar.add_task(label, total=total, stats="")

        def update(res: LoadResult, elapsed: float) -> None:
            done = elapsed if spec.duration_s is not None else res.requests_ok + res.requests_failed
            rate = res.output_tokens / elapsed if elapsed > 0 else 0.0
            bar.update(task, completed=min(done, total), stats=f"{res.requests_ok} req, {res.output_tokens} tok, {rate:,.0f} tok/s")

        return asyncio.run(_run(base_url, model, api, prompts, spec, update, alive, headers))
