#!/usr/bin/env python3
"""Base-model throughput of llama.cpp (via llama-cpp-python's low-level API), measured the
same way as //models/llama:llama_benchmark measures Loom, for a side-by-side comparison.

For each configuration (B sequences of P prompt tokens):
  prefill: all B*P tokens submitted in llama_decode calls of at most --token_budget tokens
           (sequences laid out one after another, one seq_id per sequence, logits only for
           each sequence's last prompt token); tokens/s = B*P / time.
  decode:  then --decode_steps steps, each one llama_decode call with one token per
           sequence (llama.cpp's batched-bench); the next token is the argmax of the
           sequence's logits; aggregate tokens/s = B*D / time.
One warm-up run, then the median of --runs runs (and the fastest run). Prints a table and one JSON line (also
written to --json_out when given).

Not part of the test suite; run by scripts/bench_base_model.sh.
"""
import argparse
import ctypes
import json
import os
import random
import statistics
import sys
import time

import numpy as np

import llama_cpp


def default_model_path():
    m = os.environ.get("LOOM_MODEL")
    if m:
        return m
    return os.path.join(os.environ.get("HOME", "/root"), ".cache/loom/SmolLM2-135M-Instruct.Q4_1.gguf")


@llama_cpp.llama_log_callback
def _quiet_log(level, text, user_data):
    pass


class Bench:
    def __init__(self, model_path, threads, n_seq_max, n_ctx, token_budget, kv_unified):
        llama_cpp.llama_log_set(_quiet_log, ctypes.c_void_p(0))
        llama_cpp.llama_backend_init()
        mp = llama_cpp.llama_model_default_params()
        mp.n_gpu_layers = 0
        self.model = llama_cpp.llama_model_load_from_file(model_path.encode(), mp)
        if not self.model:
            raise RuntimeError(f"cannot load {model_path}")
        vocab = llama_cpp.llama_model_get_vocab(self.model)
        self.n_vocab = llama_cpp.llama_vocab_n_tokens(vocab)
        cp = llama_cpp.llama_context_default_params()
        cp.n_ctx = n_ctx
        cp.n_batch = token_budget
        cp.n_ubatch = token_budget
        cp.n_seq_max = n_seq_max
        cp.n_threads = threads
        cp.n_threads_batch = threads
        cp.kv_unified = kv_unified
        cp.no_perf = True
        self.ctx = llama_cpp.llama_init_from_model(self.model, cp)
        if not self.ctx:
            raise RuntimeError("cannot create the llama.cpp context")
        self.mem = llama_cpp.llama_get_memory(self.ctx)
        self.token_budget = token_budget
        self.capacity = max(token_budget, n_seq_max)
        self.batch = llama_cpp.llama_batch_init(self.capacity, 0, 1)

    def close(self):
        llama_cpp.llama_batch_free(self.batch)
        llama_cpp.llama_free(self.ctx)
        llama_cpp.llama_model_free(self.model)

    def _decode(self, entries):
        """entries: list of (token, pos, seq, want_logits). Returns {seq: logits row index}."""
        b = self.batch
        rows = {}
        n_out = 0
        for i, (tok, pos, seq, want) in enumerate(entries):
            b.token[i] = tok
            b.pos[i] = pos
            b.n_seq_id[i] = 1
            b.seq_id[i][0] = seq
            b.logits[i] = 1 if want else 0
            if want:
                rows[seq] = i
                n_out += 1
        b.n_tokens = len(entries)
        rc = llama_cpp.llama_decode(self.ctx, b)
        if rc != 0:
            raise RuntimeError(f"llama_decode returned {rc}")
        return rows

    def _argmax(self, i):
        p = llama_cpp.llama_get_logits_ith(self.ctx, i)
        return int(np.argmax(np.ctypeslib.as_array(p, shape=(self.n_vocab,))))

    def run(self, prompts, decode_steps):
        """Returns (prefill seconds, decode seconds)."""
        llama_cpp.llama_memory_clear(self.mem, True)
        flat = []
        for s, p in enumerate(prompts):
            for j, tok in enumerate(p):
                flat.append((tok, j, s, j == len(p) - 1))
        next_tok = {}
        t0 = time.perf_counter()
        for start in range(0, len(flat), self.token_budget):
            rows = self._decode(flat[start:start + self.token_budget])
            for seq, i in rows.items():
                next_tok[seq] = self._argmax(i)
        t1 = time.perf_counter()
        B = len(prompts)
        for step in range(decode_steps):
            entries = [(next_tok[s], len(prompts[s]) + step, s, True) for s in range(B)]
            rows = self._decode(entries)
            for seq, i in rows.items():
                next_tok[seq] = self._argmax(i)
        t2 = time.perf_counter()
        return t1 - t0, t2 - t1


def parse_configs(text):
    out = []
    for item in text.split(","):
        b, p = item.lower().split("x")
        out.append((int(b), int(p)))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default=default_model_path())
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--configs", default="1x512,1x128,8x128,32x128",
                    help="comma-separated BxP (sequences x prompt tokens)")
    ap.add_argument("--decode_steps", type=int, default=64)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--token_budget", type=int, default=512)
    ap.add_argument("--kv_unified", action="store_true",
                    help="one KV stream shared by all sequences (default: one per sequence)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json_out", default="")
    args = ap.parse_args()

    configs = parse_configs(args.configs)
    n_seq_max = max(b for b, _ in configs)
    longest = max(p for _, p in configs) + args.decode_steps
    # Non-unified KV gives each sequence n_ctx / n_seq_max cells.
    per_seq = ((longest + 255) // 256) * 256
    n_ctx = per_seq * n_seq_max if not args.kv_unified else max(
        b * (p + args.decode_steps) for b, p in configs) + 256
    bench = Bench(args.model, args.threads, n_seq_max, n_ctx, args.token_budget, args.kv_unified)
    rng = random.Random(args.seed)

    results = []
    for B, P in configs:
        # Random ids in the same range on both sides (3 .. 49000); content does not
        # change the cost of a dense forward pass.
        prompts = [[3 + rng.randrange(49000) for _ in range(P)] for _ in range(B)]
        bench.run(prompts, args.decode_steps)  # warm-up
        pre, dec = [], []
        for _ in range(args.runs):
            tp, td = bench.run(prompts, args.decode_steps)
            pre.append(tp)
            dec.append(td)
        mp, md = statistics.median(pre), statistics.median(dec)
        results.append({"phase": "prefill", "batch": B, "prompt_len": P, "tokens": B * P,
                        "median_s": mp, "tok_s": B * P / mp, "best_tok_s": B * P / min(pre)})
        results.append({"phase": "decode", "batch": B, "prompt_len": P,
                        "tokens": B * args.decode_steps, "median_s": md,
                        "tok_s": B * args.decode_steps / md,
                        "best_tok_s": B * args.decode_steps / min(dec)})
    bench.close()

    print(f"llama.cpp {llama_cpp.__version__} (llama-cpp-python), {args.threads} threads, "
          f"token budget {args.token_budget}, n_ctx {n_ctx}, kv_unified {args.kv_unified}, "
          f"median of {args.runs}")
    print(f"{'phase':<8} {'B':>3} {'P':>4} {'tokens':>7} {'seconds':>9} {'tok/s':>9} {'best':>9}")
    for r in results:
        print(f"{r['phase']:<8} {r['batch']:>3} {r['prompt_len']:>4} {r['tokens']:>7} "
              f"{r['median_s']:>9.4f} {r['tok_s']:>9.1f} {r['best_tok_s']:>9.1f}")
    doc = {"impl": "llama.cpp", "version": llama_cpp.__version__, "model": args.model,
           "threads": args.threads, "token_budget": args.token_budget,
           "decode_steps": args.decode_steps, "runs": args.runs, "results": results}
    line = json.dumps(doc)
    print(line)
    if args.json_out:
        with open(args.json_out, "w") as f:
            f.write(line + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
