#!/usr/bin/env python3
"""llama.cpp's perplexity of a GGUF over a text file, by the SAME strided-window method as
Loom's loom_ppl (models/eval/perplexity.h), through llama-cpp-python:

  * tokenize the text once (llama_tokenize, parse_special=false, no BOS unless --add-bos),
    keep the first --max-tokens tokens t[0..N);
  * window w covers t[w*stride, min(w*stride + context, N)); windows are taken while one
    has a scored token; each is evaluated as a fresh sequence (KV cache cleared), with
    logits for every position;
  * in-window position p is scored when p >= max(1, context - stride), from the logits at
    p - 1; the window's last token is only a target, so tokens [0, n-1) are evaluated;
  * --add-bos replaces each window's first input token by BOS;
  * log p = logit[target] - logsumexp(logits), in float64; ppl = exp(mean nll).

Prints the same summary as loom_ppl, including the FNV-1a-64 hash of the token ids used
(equal hashes = identical tokenization). This is not llama.cpp's `llama-perplexity`
binary, which scores only the second half of non-overlapping n_ctx chunks.

  python3 scripts/llamacpp_ppl.py --text ~/.cache/loom/eval/heldout.txt --max-tokens 20000
"""
import argparse
import math
import os
import sys
import time

import numpy as np


def default_model():
    if os.environ.get("LOOM_MODEL"):
        return os.environ["LOOM_MODEL"]
    cache = os.environ.get("LOOM_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
        "loom")
    return os.path.join(cache, "SmolLM2-135M-Instruct.Q4_1.gguf")


def plan_windows(n_tokens, context, stride):
    """[(start, end, first_scored)], as models/eval/perplexity.h PlanWindows."""
    first = max(1, context - stride)
    out, s = [], 0
    while s + first < n_tokens:
        out.append((s, min(s + context, n_tokens), first))
        s += stride
    return out


def token_hash(ids):
    h = 14695981039346656037
    for b in np.asarray(ids, dtype="<i4").tobytes():
        h = ((h ^ b) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return h


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default=default_model())
    ap.add_argument("--text", required=True)
    ap.add_argument("--context", type=int, default=512)
    ap.add_argument("--stride", type=int, default=256)
    ap.add_argument("--max-tokens", type=int, default=50000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--add-bos", action="store_true")
    ap.add_argument("--lora", default=None, help="GGUF-LoRA adapter (llama.cpp format)")
    ap.add_argument("--verbose", action="store_true")
    a = ap.parse_args()
    if a.context < 2 or not 1 <= a.stride <= a.context:
        sys.exit("need context >= 2 and 1 <= stride <= context")

    from llama_cpp import Llama  # imported late so --help works without it

    llm = Llama(model_path=a.model, n_ctx=a.context, n_batch=a.context, n_ubatch=a.context,
                logits_all=True, n_threads=a.threads, n_threads_batch=a.threads,
                lora_path=a.lora, verbose=False)
    with open(a.text, "rb") as f:
        text = f.read()
    ids = llm.tokenize(text, add_bos=False, special=False)
    used = ids[: a.max_tokens]
    windows = plan_windows(len(used), a.context, a.stride)
    if not windows:
        sys.exit("nothing to score")
    bos = llm.token_bos()

    nll_total, scored, evaluated = 0.0, 0, 0
    t0 = time.perf_counter()
    for w, (s, e, first) in enumerate(windows):
        inp = list(used[s:e - 1])
        if a.add_bos:
            inp[0] = bos
        llm.reset()
        llm.eval(inp)
        logits = np.asarray(llm.scores[first - 1:len(inp)], dtype=np.float64)
        targets = np.asarray(used[s + first:e])
        mx = logits.max(axis=1)
        lse = mx + np.log(np.exp(logits - mx[:, None]).sum(axis=1))
        nll = -(logits[np.arange(len(targets)), targets] - lse)
        if not np.all(np.isfinite(nll)):
            sys.exit("non-finite log-probability in window %d" % w)
        nll_total += float(nll.sum())
        scored += len(targets)
        evaluated += len(inp)
        if a.verbose:
            print("[%d/%d] ppl %.4f" % (w + 1, len(windows), math.exp(nll_total / scored)),
                  file=sys.stderr)
    secs = time.perf_counter() - t0
    nll_mean = nll_total / scored
    print("model:            %s (llama.cpp via llama-cpp-python)" % a.model)
    if a.lora:
        print("adapter:          %s" % a.lora)
    print("text:             %s (%d tokens)" % (a.text, len(ids)))
    print("window:           context %d, stride %d, add_bos %s" %
          (a.context, a.stride, "true" if a.add_bos else "false"))
    print("tokens used:      %d (hash %016x)" % (len(used), token_hash(used)))
    print("windows:          %d" % len(windows))
    print("tokens scored:    %d" % scored)
    print("tokens evaluated: %d" % evaluated)
    print("nll:              %.6f" % nll_mean)
    print("ppl:              %.4f" % math.exp(nll_mean))
    print("time:             %.1f s (%.1f tokens/s evaluated, %d threads)" %
          (secs, evaluated / secs, a.threads))


if __name__ == "__main__":
    main()
