"""Decode step time of real vLLM on this GPU, dummy weights, with and without speculation.

One engine boot per (model, speculative config); inside it, for each concurrency, two batches with
different output lengths: the difference removes prefill, so the figures are decode steps only.
With dummy weights the suffix cache accepts almost every draft (outputs repeat), so a suffix run
measures the verification step at about 1 + min(K, 12) tokens per sequence (tree depth 24,
max_spec_factor 1.0 cap a draft at 12). K-bar from these runs says nothing about real traffic.

  python3 stepbench.py --model DIR --spec none|suffix:K|ngram:K --conc 1,8,32,64 --results R.jsonl

Prints one JSON line per concurrency; "Available KV cache memory" is in vLLM's own log lines.
"""
import argparse, json, os, random, time

ap = argparse.ArgumentParser()
ap.add_argument("--model", required=True)
ap.add_argument("--spec", default="none")
ap.add_argument("--conc", default="1,8,32,64")
ap.add_argument("--prompt-len", type=int, default=1024)
ap.add_argument("--out-short", type=int, default=256)
ap.add_argument("--out-long", type=int, default=1024)
ap.add_argument("--gmu", type=float, default=0.85)
ap.add_argument("--max-model-len", type=int, default=16384)
ap.add_argument("--cudagraph", default="FULL_AND_PIECEWISE")
ap.add_argument("--results", required=True)
ap.add_argument("--draft", default=None, help="drafter dir for eagle3:K / eagle:K / draft_model:K")
a = ap.parse_args()

from vllm import LLM, SamplingParams  # noqa: E402
from vllm.inputs import TokensPrompt  # noqa: E402

spec = None
if a.spec != "none":
    method, k = a.spec.split(":")
    spec = {"method": method, "num_speculative_tokens": int(k)}
    if method == "ngram":
        spec.update(prompt_lookup_min=2, prompt_lookup_max=4)
    if method in ("eagle3", "eagle", "draft_model"):
        spec["model"] = a.draft

t0 = time.time()
llm = LLM(model=a.model, load_format="dummy", skip_tokenizer_init=True, gpu_memory_utilization=a.gmu,
          max_model_len=a.max_model_len, speculative_config=spec, seed=0, enable_prefix_caching=False,
          compilation_config={"cudagraph_mode": a.cudagraph}, disable_log_stats=False)
boot_s = time.time() - t0
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
    c0 = counters(); t = time.time()
    outs = llm.generate(prompts, sp, use_tqdm=False)
    dt = time.time() - t; c1 = counters()
    tokens = sum(len(o.outputs[0].token_ids) for o in outs)
    acc = c1.get("vllm:spec_decode_num_accepted_tokens", 0) - c0.get("vllm:spec_decode_num_accepted_tokens", 0)
    return dt, tokens, acc


batch(8, 32)  # warm-up
for conc in [int(c) for c in a.conc.split(",")]:
    t_s, n_s, acc_s = batch(conc, a.out_short)
    t_l, n_l, acc_l = batch(conc, a.out_long)
    steps = ((n_l - acc_l) - (n_s - acc_s)) / conc  # decode steps per sequence in the difference
    row = dict(model=os.path.basename(a.model.rstrip("/")), spec=a.spec, conc=conc, prompt_len=a.prompt_len,
               out_short=a.out_short, out_long=a.out_long, boot_s=round(boot_s, 1),
               decode_s=round(t_l - t_s, 4), decode_tokens=n_l - n_s, decode_steps_per_seq=round(steps, 2),
               step_ms=round(1000 * (t_l - t_s) / max(steps, 1e-9), 3),
               tokens_per_seq_step=round((n_l - n_s) / conc / max(steps, 1e-9), 3),
               decode_tok_s=round((n_l - n_s) / (t_l - t_s), 1))
    print("RESULT " + json.dumps(row), flush=True)
    with open(a.results, "a") as f:
        f.write(json.dumps(row) + "\n")
