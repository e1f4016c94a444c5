"""Options shared by ``recommend``, ``render`` and ``report``: one definition (``SHARED``), one
values object (``RecommendOptions``), one decorator that gives a command all of them."""

from __future__ import annotations

import typer

from advisor import vllm_facts as _vllm

GPU = typer.Option(None, "--gpu", help="GPU model: B200, H200, H100, A100, L40S, MI300X (detected when omitted).")
GPUS = typer.Option(None, "--gpus", min=1, max=4096, help="GPUs for one server, at most 4096 (detected when omitted).")
TP = typer.Option(None, "--tp", min=1, max=4096, help="tensor_parallel_size (default: searched, TP x DP over --gpus).")
CORPUS = typer.Option(
    None, "--corpus",
    help="Traffic: a seed corpus name (sharegpt, wildchat, lmsys, humaneval, mbpp, swebench, mix), a corpus with a published acceptance figure (specbench, blazedit, agenticsql) or a trace file (K̄ is measured from it).",
)  # fmt: skip
TOKENIZER = typer.Option(None, "--tokenizer", help="Tokenizer for a --corpus file (default: the model's).")
DEFAULT_CONCURRENCY = 32
"""Requests in flight assumed when --concurrency is not given and no limit asks for the operating point."""
CONCURRENCY = typer.Option(
    None, "--concurrency", min=1,
    help=f"Requests in flight: your load (default {DEFAULT_CONCURRENCY}; with --max-tpot-ms/--max-ttft-ms and no --concurrency the search chooses the load, max_num_seqs and max_num_batched_tokens).",
)  # fmt: skip
MAX_MODEL_LEN = typer.Option(None, "--max-model-len", min=16, help="Longest prompt+output (default: what the rules set, else the model's context; capped at the model's context).")
K = typer.Option(None, "--k", min=1, max=64, help="num_speculative_tokens when suffix is chosen (default: what the rules set, else rules/policy/decider.yaml's).")
GMU = typer.Option(None, "--gmu", min=0.05, max=0.99,
                   help=f"gpu_memory_utilization (default: what the rules set, else vLLM's {_vllm.facts().gpu_memory_utilization:g}).")
SPEC = typer.Option(None, "--spec", help="Launch this speculative method whatever the prediction says: none (plain decoding), suffix, ngram, mtp, eagle3, eagle or draft_model (advisor.methods; default: the one predicted fastest for the objective; the output says when the forced one is predicted to lose).", rich_help_panel="Layout search")
DRAFT = typer.Option(None, "--draft", metavar="DIR_OR_ID", help="The drafter for the model-drafted methods: an EAGLE-3 / EAGLE head or a draft model (local directory with config.json, catalog id, or HF cache). Default: the catalog's heads and draft models paired with MODEL (advisor.model.drafter.drafters_for); none: those methods are not candidates.", rich_help_panel="Layout search")
DRAFT_K = typer.Option(None, "--draft-k", min=1, max=16, help="num_speculative_tokens of the drafter methods (EAGLE-3, EAGLE, draft model; default: searched over drafter_k_grid of rules/policy/decider.yaml).", rich_help_panel="Layout search")
ARRIVAL = typer.Option(None, "--arrival", help="Load pattern --max-tpot-ms/--max-ttft-ms are judged on: closed (vllm bench serve --max-concurrency C, fixed lengths: prompts arrive in waves; the default without --request-rate) or poisson (Poisson arrivals; the default and only choice with --request-rate). The output says which.", rich_help_panel="Layout search")
NGRAM_K = typer.Option(None, "--ngram-k", min=1, max=64, help="num_speculative_tokens of the n-gram candidates (default: advisor.kbar.ngram's 4).")
NGRAM_LOOKUP = typer.Option(None, "--ngram-lookup", metavar="MIN:MAX",
                            help="n-gram prompt_lookup_min:prompt_lookup_max (default: vLLM's, advisor.vllm_facts).")  # fmt: skip
PROBE = typer.Option(
    False, "--probe",
    help="When the prediction is unsure, run the probe campaign it proposes (real vLLM on this host, a few minutes), then recommend again from the recalibrated predictor.",
    rich_help_panel="Probing",
)  # fmt: skip
PROBE_DURATION = typer.Option(120.0, "--probe-duration", min=1, help="Seconds of load per probed configuration.", rich_help_panel="Probing")
PROBE_REQUESTS = typer.Option(None, "--probe-requests", min=1, help="At most this many requests per probed configuration.", rich_help_panel="Probing")
SERVER_CMD = typer.Option("vllm serve", "--server-cmd", help="Program that starts vLLM for --probe (and verify --boot); MODEL follows it (after --model unless it ends in 'serve').", rich_help_panel="Probing")
HTML = typer.Option(
    None, "--html", metavar="FILE",
    help="Also write the recommendation as a self-contained HTML report to FILE (what `advisor report` writes).",
)  # fmt: skip
OBJECTIVE = typer.Option("throughput", "--objective", help="What the layout search optimises: throughput (host output tok/s) or latency (shortest request: TTFT + output-len x TPOT).", rich_help_panel="Layout search")
MAX_TPOT_MS = typer.Option(None, "--max-tpot-ms", min=0.001, help="Only configurations predicted at or under this time per output token (ms).", rich_help_panel="Layout search")
MAX_TTFT_MS = typer.Option(None, "--max-ttft-ms", min=0.001, help="Only configurations predicted at or under this time to first token (ms).", rich_help_panel="Layout search")
REQUEST_RATE = typer.Option(None, "--request-rate", min=0.001, help="Requests per second to serve (open loop): the fewest GPUs that serve it within --max-tpot-ms/--max-ttft-ms.", rich_help_panel="Layout search")
KV_CACHE_DTYPE = typer.Option("auto", "--kv-cache-dtype", help="KV cache dtype: auto (the model's, vLLM's default), fp8 (half the bytes; numerics change) or search (both, the faster wins).", rich_help_panel="Layout search")
MAX_REQUEST_TOKENS = 16_777_216
"""2^24 tokens: above the longest context any model serves (Llama 4 Scout's 10M); a larger length is no request
(at 3e8 output tokens every figure rounds to zero)."""
PROMPT_LEN = typer.Option(1024, "--prompt-len", min=1, max=MAX_REQUEST_TOKENS, help="Prompt tokens per request the figures are predicted for.", rich_help_panel="Layout search")
OUTPUT_LEN = typer.Option(512, "--output-len", min=1, max=MAX_REQUEST_TOKENS, help="Output tokens per request the figures are predicted for.", rich_help_panel="Layout search")
LENGTH_SPREAD = typer.Option(
    0.0, "--length-spread", metavar="R",
    help="Spread the prompt and output lengths as vllm bench serve --random-range-ratio R does: each request's lengths "
    "drawn uniformly from [L x (1 - R), L x (1 + R)] around --prompt-len and --output-len (their means), one R for both, "
    "0 <= R < 1 (default 0: every request has the same lengths). The emitted benchmark passes --random-range-ratio R; "
    "the closed loop is simulated request by request with the drawn lengths (its synchronised waves break up), the "
    "other figures are at the mean lengths.",
    rich_help_panel="Layout search",
)  # fmt: skip
VLLM_VERSION = typer.Option(
    None, "--vllm-version", metavar="X.Y",
    help=f"vLLM version the flags and files target: {', '.join(_vllm.versions())} (advisor.vllm_facts). "
    f"Default: ADVISOR_VLLM_VERSION, else the vLLM installed here, else {_vllm.DEFAULT_VERSION}.",
)  # fmt: skip


SHARED = (
    ("gpu", "str | None", GPU), ("gpus", "int | None", GPUS), ("tp", "int | None", TP), ("corpus", "str | None", CORPUS),
    ("tokenizer", "str | None", TOKENIZER), ("concurrency", "int | None", CONCURRENCY), ("max_model_len", "int | None", MAX_MODEL_LEN),
    ("k", "int | None", K), ("gmu", "float | None", GMU), ("objective", "str", OBJECTIVE),
    ("max_tpot_ms", "float | None", MAX_TPOT_MS), ("max_ttft_ms", "float | None", MAX_TTFT_MS),
    ("prompt_len", "int", PROMPT_LEN), ("output_len", "int", OUTPUT_LEN), ("vllm_version", "str | None", VLLM_VERSION),
    ("probe", "bool", PROBE), ("probe_duration", "float", PROBE_DURATION), ("probe_requests", "int | None", PROBE_REQUESTS),
    ("server_cmd", "str", SERVER_CMD), ("ngram_k", "int | None", NGRAM_K), ("ngram_lookup", "str | None", NGRAM_LOOKUP),
    ("request_rate", "float | None", REQUEST_RATE), ("kv_cache_dtype", "str", KV_CACHE_DTYPE),
    ("spec", "str | None", SPEC), ("arrival", "str | None", ARRIVAL), ("draft", "str | None", DRAFT),
    ("draft_k", "int | None", DRAFT_K), ("length_spread", "float", LENGTH_SPREAD),
)  # fmt: skip
"""The options ``recommend``, ``render`` and ``report`` share: one place to add a flag (name, type, Option)."""


class RecommendOptions:
    """The shared options' values, as one object (``with_recommend_options`` builds it)."""

    __slots__ = tuple(name for name, _, _ in SHARED)

    def __init__(self, **values) -> None:
        for name, _, opt in SHARED:
            setattr(self, name, values.get(name, opt.default))

    def replace(self, **changes) -> "RecommendOptions":
        return RecommendOptions(**{**{n: getattr(self, n) for n in self.__slots__}, **changes})


def with_recommend_options(fn):
    """Give a command every shared option: ``fn(model, …, opts: RecommendOptions, …own options)``.
    The options join the command's signature (Typer reads ``__signature__``), so ``--help`` lists them."""
    import functools
    import inspect

    sig = inspect.signature(fn, eval_str=True)
    own = [p for p in sig.parameters.values() if p.name != "opts"]
    types = {"str | None": str | None, "int | None": int | None, "float | None": float | None, "int": int,
             "str": str, "float": float, "bool": bool}  # fmt: skip
    shared = [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, default=opt, annotation=types[t]) for n, t, opt in SHARED]
    first, rest = own[0], [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own[1:]]  # MODEL, then own options
    params = [first, *rest, *shared]

    @functools.wraps(fn)
    def command(*a, **kwargs):
        opts = RecommendOptions(**{n: kwargs.pop(n) for n, _, _ in SHARED if n in kwargs})
        return fn(*a, opts=opts, **kwargs)

    command.__signature__ = sig.replace(parameters=params, return_annotation=None)
    command.__annotations__ = {p.name: p.annotation for p in params}
    del command.__wrapped__
    return command
