"""Options shared by ``recommend`` and ``render`` (one definition, two commands)."""

from __future__ import annotations

import typer

from advisor import vllm_facts as _vllm

GPU = typer.Option(None, "--gpu", help="GPU model: B200, H200, H100, A100, L40S, MI300X (detected when omitted).")
GPUS = typer.Option(None, "--gpus", min=1, help="GPUs for one server (detected when omitted).")
TP = typer.Option(None, "--tp", min=1, help="tensor_parallel_size (default: --gpus).")
CORPUS = typer.Option(
    None, "--corpus",
    help="Traffic: a seed corpus name (sharegpt, wildchat, lmsys, humaneval, mbpp, swebench, mix) or a trace file (K̄ is measured from it).",
)  # fmt: skip
TOKENIZER = typer.Option(None, "--tokenizer", help="Tokenizer for a --corpus file (default: the model's).")
CONCURRENCY = typer.Option(32, "--concurrency", min=1, help="Requests in flight.")
MAX_MODEL_LEN = typer.Option(None, "--max-model-len", min=16, help="Longest prompt+output (default 16384, capped at the model's context).")
K = typer.Option(None, "--k", min=1, max=64, help="num_speculative_tokens when suffix is chosen (default from rules: 32).")
NGRAM_K = typer.Option(None, "--ngram-k", min=1, max=64, help="num_speculative_tokens of the n-gram candidates (default 4).")
NGRAM_LOOKUP = typer.Option(None, "--ngram-lookup", metavar="MIN:MAX",
                            help="n-gram prompt_lookup_min:prompt_lookup_max (default vLLM's 5:5).")  # fmt: skip
GMU = typer.Option(None, "--gmu", min=0.05, max=0.99, help="gpu_memory_utilization (default from rules: 0.85).")
PROBE = typer.Option(
    False, "--probe",
    help="When the prediction is unsure, run the probe campaign it proposes (real vLLM on this host, a few minutes), then recommend again from the recalibrated predictor.",
    rich_help_panel="Probing",
)  # fmt: skip
PROBE_DURATION = typer.Option(120.0, "--probe-duration", min=1, help="Seconds of load per probed configuration.", rich_help_panel="Probing")
PROBE_REQUESTS = typer.Option(None, "--probe-requests", min=1, help="At most this many requests per probed configuration.", rich_help_panel="Probing")
SERVER_CMD = typer.Option("vllm serve", "--server-cmd", help="Program that starts vLLM for --probe.", rich_help_panel="Probing")
HTML = typer.Option(
    None, "--html", metavar="FILE",
    help="Also write the recommendation as a self-contained HTML report to FILE (what `advisor report` writes).",
)  # fmt: skip
OBJECTIVE = typer.Option("throughput", "--objective", help="What the layout search optimises: throughput (host output tok/s) or latency (shortest request: TTFT + output-len x TPOT).", rich_help_panel="Layout search")
MAX_TPOT_MS = typer.Option(None, "--max-tpot-ms", min=0.001, help="Only configurations predicted at or under this time per output token (ms).", rich_help_panel="Layout search")
MAX_TTFT_MS = typer.Option(None, "--max-ttft-ms", min=0.001, help="Only configurations predicted at or under this time to first token (ms).", rich_help_panel="Layout search")
PROMPT_LEN = typer.Option(1024, "--prompt-len", min=1, help="Prompt tokens per request the figures are predicted for.", rich_help_panel="Layout search")
OUTPUT_LEN = typer.Option(512, "--output-len", min=1, help="Output tokens per request the figures are predicted for.", rich_help_panel="Layout search")
VLLM_VERSION = typer.Option(
    None, "--vllm-version", metavar="X.Y",
    help=f"vLLM version the flags and files target: {', '.join(_vllm.versions())} (advisor.vllm_facts). "
    f"Default: ADVISOR_VLLM_VERSION, else the vLLM installed here, else {_vllm.DEFAULT_VERSION}.",
)  # fmt: skip
