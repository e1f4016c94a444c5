"""Prefill-free decode and verification step times of real vLLM, one engine boot per call.

Runs on the GPU machine (vLLM 0.26.0, dummy weights, token-id prompts, no tokenizer). For each
draft cap d and concurrency c it runs two batches of c requests that differ only in output length
(--out-short, --out-long); their difference removes prefill, so the figures are decode steps only.

Draft length: the engine boots with suffix decoding at K (default 32); with dummy weights the model's
output repeats, so the suffix tree drafts its cap of min(K, 12) tokens (tree depth 24 x
max_spec_factor 1.0) and nearly all are accepted. A cap d < 12 truncates each draft inside the
engine (collective_rpc wraps SuffixDecodingProposer.propose, vllm/v1/spec_decode/suffix_decoding.py).
Because the engine was booted at K=32, its uniform-decode query length is 33 (gpu_model_runner.py
`uniform_decode_query_len = 1 + self.num_spec_tokens`), so every verification batch is non-uniform
and runs the PIECEWISE CUDA graphs under FULL_AND_PIECEWISE, as variable-length suffix drafts of
real traffic do. K-bar from these runs says nothing about real traffic.

  python3 gridbench.py --model DIR --spec none|suffix:K|ngram:K [--drafts 12,8,4,2,1] --conc 1,8,32,64 \
      --reps 2 --results grid.jsonl --boots boots.jsonl [--lookup 3,5]

n-gram (vLLM's CPU prompt-lookup proposer, ``--spec ngram:K``, window ``--lookup MIN,MAX``): with dummy weights
the output repeats one token, so the lookup matches once a few are out and drafts up to K; a cap d < K truncates
each draft the same way (NgramProposer.propose, vllm/v1/spec_decode/ngram_proposer.py). Uncapped n-gram drafts
are K long, so their verification batches are uniform (1 + K per sequence) and may run FULL graphs.

One JSON line per (draft cap, concurrency, repetition) to --results, one per boot to --boots
(attention backend, CUDA-graph mode and capture sizes, KV blocks, scheduler limits).
"""
import argparse
import json
import os
import random
import time

ap = argparse.ArgumentParser()
ap.add_argument("--model", required=True)
ap.add_argument("--spec", default="none")
ap.add_argument("--drafts", default="12")
ap.add_argument("--conc", default="1,8,32,64")
ap.add_argument("--reps", type=int, default=2)
ap.add_argument("--prompt-len", type=int, default=1024)
ap.add_argument("--out-short", type=int, default=128)
ap.add_argument("--out-long", type=int, default=512)
ap.add_argument("--gmu", type=float, default=0.85)
ap.add_argument("--max-model-len", type=int, default=16384)
ap.add_argument("--cudagraph", default="FULL_AND_PIECEWISE")
ap.add_argument("--label", default=None)
ap.add_argument("--boot", default=None, help="this boot's name (its log's stem), written into --boots")
ap.add_argument("--lookup", default=None, help="n-gram prompt_lookup_min,max (vLLM's default when not given)")
ap.add_argument("--results", required=True)
ap.add_argument("--boots", required=True)
a = ap.parse_args()
os.environ.setdefault("VLLM_ALLOW_INSECURE_SERIALIZATION", "1")  # collective_rpc with a function

from vllm import LLM, SamplingParams  # noqa: E402
from vllm.inputs import TokensPrompt  # noqa: E402

spec = None
k = 0
if a.spec != "none":
    method, k_text = a.spec.split(":")
    k = int(k_text)
    spec = {"method": method, "num_speculative_tokens": k}
    if method == "ngram" and a.lookup:
        lo, hi = (int(x) for x in a.lookup.split(","))
        spec.update(prompt_lookup_min=lo, prompt_lookup_max=hi)
natural = (min(k, 12) if spec["method"] == "suffix" else k) if spec else 0
"""The longest draft the method makes here uncapped: suffix's tree depth 24 x max_spec_factor 1.0 caps at 12."""
name = a.label or os.path.basename(a.model.rstrip("/"))

t0 = time.time()
llm = LLM(model=a.model, load_format="dummy", skip_tokenizer_init=True, gpu_memory_utilization=a.gmu,
          max_model_len=a.max_model_len, speculative_config=spec, seed=0, enable_prefix_caching=False,
          compilation_config={"cudagraph_mode": a.cudagraph}, disable_log_stats=False)
boot_s = time.time() - t0


def _info(self):
    mr = self.model_runner
    out = {}
    try:
        cc = mr.compilation_config
        out["cudagraph_mode"] = str(cc.cudagraph_mode)
        out["capture_sizes"] = list(cc.cudagraph_capture_sizes or [])
        out["max_capture_size"] = getattr(cc, "max_cudagraph_capture_size", None)
    except Exception as e:  # noqa: BLE001 - report, do not fail the run
        out["cudagraph_error"] = repr(e)
    try:
        names = set()
        for groups in mr.attn_groups:
            for g in groups:
                names.add(g.backend.get_name())
        out["attention_backends"] = sorted(names)
    except Exception as e:  # noqa: BLE001
        out["attention_error"] = repr(e)
    out["uniform_decode_query_len"] = getattr(mr, "uniform_decode_query_len", None)
    out["model_memory_gib"] = round(getattr(mr, "model_memory_usage", 0) / 2**30, 3)
    try:
        import torch
        free, total = torch.cuda.mem_get_info()
        out["gpu_free_gib"] = round(free / 2**30, 3)
        out["gpu_total_gib"] = round(total / 2**30, 3)
        out["gpu_name"] = torch.cuda.get_device_name()
    except Exception as e:  # noqa: BLE001
        out["gpu_error"] = repr(e)
    return out


def _set_cap(self, d):
    dr = self.model_runner.drafter
    if not hasattr(dr, "_advisor_orig_propose"):
        dr._advisor_orig_propose = dr.propose
    orig = dr._advisor_orig_propose
    if d is None:
        dr.propose = orig
        return "reset"

    def propose(*args, **kwargs):
        return [list(t)[:d] for t in orig(*args, **kwargs)]

    dr.propose = propose
    return type(dr).__name__


info = llm.collective_rpc(_info)[0]
vc = llm.llm_engine.vllm_config
boot = dict(model=name, spec=a.spec, k=k, lookup=a.lookup, boot_s=round(boot_s, 1), gmu=a.gmu, max_model_len=a.max_model_len,
            cudagraph_requested=a.cudagraph, num_gpu_blocks=vc.cache_config.num_gpu_blocks,
            block_size=vc.cache_config.block_size, max_num_seqs=vc.scheduler_config.max_num_seqs,
            max_num_batched_tokens=vc.scheduler_config.max_num_batched_tokens,
            kv_cache_dtype=str(vc.cache_config.cache_dtype), dtype=str(vc.model_config.dtype),
            quantization=vc.model_config.quantization, **info)
import vllm as _v  # noqa: E402
boot["vllm_version"] = _v.__version__
if a.boot:
    boot["boot"] = a.boot
print("BOOT " + json.dumps(boot), flush=True)
with open(a.boots, "a") as f:
    f.write(json.dumps(boot) + "\n")
rng = random.Random(0)


def counters():
    out = {}
    for m in llm.get_metrics():
        v = getattr(m, "value", None)
        if isinstance(v, (int, float)):
            out[m.name] = v
    return out


def batch(conc, out_len):
    prompts = [TokensPrompt(prompt_token_ids=[rng.randrange(1000, 30000) for _ in range(a.prompt_len)])
               for _ in range(conc)]
    sp = SamplingParams(temperature=0.0, max_tokens=out_len, ignore_eos=True, detokenize=False)
    c0 = counters()
    t = time.perf_counter()
    outs = llm.generate(prompts, sp, use_tqdm=False)
    dt = time.perf_counter() - t
    c1 = counters()
    tokens = sum(len(o.outputs[0].token_ids) for o in outs)
    acc = c1.get("vllm:spec_decode_num_accepted_tokens", 0) - c0.get("vllm:spec_decode_num_accepted_tokens", 0)
    drafts = c1.get("vllm:spec_decode_num_draft_tokens", 0) - c0.get("vllm:spec_decode_num_draft_tokens", 0)
    return dt, tokens, acc, drafts


caps = [int(d) for d in a.drafts.split(",")] if spec else [0]
batch(8, 32)  # warm-up
for d in caps:
    if spec:
        llm.collective_rpc(_set_cap, args=(None if d >= natural else d,))
        batch(8, 32)
    for conc in [int(c) for c in a.conc.split(",")]:
        # Warm this shape up first: vLLM 0.26 JIT-compiles Triton kernels (rejection_greedy_sample_kernel
        # among them) at the first batch of a new shape during inference ("Triton kernel JIT compilation
        # during inference" in the probe's server log), which lands in whichever timed call comes first.
        batch(conc, 16)
        for rep in range(a.reps):
            t_s, n_s, acc_s, dr_s = batch(conc, a.out_short)
            t_l, n_l, acc_l, dr_l = batch(conc, a.out_long)
            steps = ((n_l - acc_l) - (n_s - acc_s)) / conc  # decode steps per sequence in the difference
            row = dict(model=name, spec=a.spec, k=k, draft_cap=min(d, natural) if spec else 0, conc=conc, rep=rep,
                       prompt_len=a.prompt_len, out_short=a.out_short, out_long=a.out_long,
                       decode_s=round(t_l - t_s, 5), decode_tokens=n_l - n_s, decode_steps_per_seq=round(steps, 3),
                       step_ms=round(1000 * (t_l - t_s) / max(steps, 1e-9), 4),
                       tokens_per_seq_step=round((n_l - n_s) / conc / max(steps, 1e-9), 4),
                       drafted_per_seq_step=round((dr_l - dr_s) / conc / max(steps, 1e-9), 4),
                       decode_tok_s=round((n_l - n_s) / max(t_l - t_s, 1e-9), 1),
                       t_short_s=round(t_s, 4), t_long_s=round(t_l, 4))
            print("RESULT " + json.dumps(row), flush=True)
            with open(a.results, "a") as f:
                f.write(json.dumps(row) + "\n")
