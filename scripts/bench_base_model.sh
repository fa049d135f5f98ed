#!/usr/bin/env bash
# Base-model throughput, Loom vs llama.cpp, on the same GGUF, thread count and machine, back
# to back: builds //models/llama:llama_benchmark (-c opt), runs it and
# scripts/bench_llamacpp.py (llama-cpp-python), and prints a side-by-side markdown table
# plus Loom's batch-1 decode bandwidth-bound line. Not part of the test suite.
#
# Usage: scripts/bench_base_model.sh [--model PATH] [--threads N] [--runs N] [--out DIR]
#                                    [--quiet_wait SECONDS]
# Both sides spin-wait between ops, so other load on the machine distorts the numbers badly
# (llama.cpp's OpenMP barriers most of all): before each side the script waits up to
# --quiet_wait seconds (default 600) for the CPUs to be < 15% busy, and prints the busy
# share it saw.
# Environment: LOOM_MODEL (default model), BAZEL (default: bazel).
set -euo pipefail

cd "$(dirname "$0")/.."
MODEL="${LOOM_MODEL:-${HOME:-/root}/.cache/loom/SmolLM2-135M-Instruct.Q4_1.gguf}"
THREADS=2
RUNS=3
OUT=""
QUIET_WAIT=600
while [[ $# -gt 0 ]]; do
  case "$1" in
    --model) MODEL="$2"; shift 2 ;;
    --threads) THREADS="$2"; shift 2 ;;
    --runs) RUNS="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    --quiet_wait) QUIET_WAIT="$2"; shift 2 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
[[ -f "$MODEL" || -d "$MODEL" ]] || { echo "model not found: $MODEL" >&2; exit 1; }
OUT="${OUT:-$(mktemp -d /tmp/bench_base_model.XXXXXX)}"
mkdir -p "$OUT"

# Percent of all CPU time that was busy over the next 3 seconds.
busy_pct() {
  local a b
  a=($(head -1 /proc/stat))
  sleep 3
  b=($(head -1 /proc/stat))
  local total=0 idle=$(( (b[4] - a[4]) + (b[5] - a[5]) ))
  for i in 1 2 3 4 5 6 7 8; do total=$(( total + b[i] - a[i] )); done
  echo $(( total > 0 ? 100 * (total - idle) / total : 0 ))
}

# Waits (up to QUIET_WAIT seconds) until the machine is < 15% busy; prints what it saw.
wait_quiet() {
  local start=$SECONDS pct
  while :; do
    pct=$(busy_pct)
    if (( pct < 15 )); then
      echo "== $1: machine ${pct}% busy (load average $(cut -d' ' -f1-3 /proc/loadavg))"
      return
    fi
    if (( SECONDS - start >= QUIET_WAIT )); then
      echo "== WARNING $1: machine still ${pct}% busy after ${QUIET_WAIT}s" \
           "(load average $(cut -d' ' -f1-3 /proc/loadavg)); numbers are distorted"
      return
    fi
  done
}

CONFIGS=(1x512 1x128 8x128 32x128)
COMMON=(--threads="$THREADS" --runs="$RUNS" --decode_steps=64 --token_budget=512)

"${BAZEL:-bazel}" build -c opt //models/llama:llama_benchmark
BIN="$("${BAZEL:-bazel}" info -c opt bazel-bin 2>/dev/null)/models/llama/llama_benchmark"

echo "== machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
# The two sides alternate configuration by configuration so that both see about the same
# background load.
for cfg in "${CONFIGS[@]}"; do
  wait_quiet "before Loom $cfg"
  "$BIN" --model="$MODEL" --configs="$cfg" "${COMMON[@]}" \
    --json_out="$OUT/loom_$cfg.json" | tee "$OUT/loom_$cfg.txt" | grep -v '^{'
  wait_quiet "before llama.cpp $cfg"
  python3 scripts/bench_llamacpp.py --model "$MODEL" --configs "$cfg" "${COMMON[@]}" \
    --json_out "$OUT/llamacpp_$cfg.json" | tee "$OUT/llamacpp_$cfg.txt" | grep -v '^{'
done

python3 - "$OUT" <<'EOF'
import glob, json, os, sys

def merge(pattern):
    docs = [json.load(open(f)) for f in sorted(glob.glob(os.path.join(sys.argv[1], pattern)))]
    doc = dict(docs[0])
    doc["results"] = [r for d in docs for r in d["results"]]
    # Each Loom invocation probes bandwidth once; keep each bound with its own probe.
    doc["bandwidth_bound"] = [dict(b, read_bw=d["read_bandwidth_bytes_s"])
                              for d in docs for b in d.get("bandwidth_bound", [])]
    return doc

loom = merge("loom_*.json")
lcpp = merge("llamacpp_*.json")

def rate(doc, phase, b, p, key="tok_s"):
    for r in doc["results"]:
        if r["phase"] == phase and r["batch"] == b and r["prompt_len"] == p:
            return r[key]
    return None

rows = [("prefill B=1 P=512", "prefill", 1, 512),
        ("prefill B=1 P=128", "prefill", 1, 128),
        ("prefill B=8 P=128", "prefill", 8, 128),
        ("prefill B=32 P=128", "prefill", 32, 128),
        ("decode B=1 (after P=512)", "decode", 1, 512),
        ("decode B=1 (after P=128)", "decode", 1, 128),
        ("decode B=8 (after P=128)", "decode", 8, 128),
        ("decode B=32 (after P=128)", "decode", 32, 128)]
print()
print(f"Base model {loom['model'].split('/')[-1]}, {loom['threads']} threads, "
      f"Loom backend {loom['backend']}, llama.cpp {lcpp['version']} (llama-cpp-python); "
      f"median of {loom['runs']}, decode {loom['decode_steps']} steps")
print()
print("| workload | Loom tok/s | llama.cpp tok/s | ratio | Loom best | llama.cpp best | best ratio |")
print("|---|---:|---:|---:|---:|---:|---:|")
for label, phase, b, p in rows:
    a, c = rate(loom, phase, b, p), rate(lcpp, phase, b, p)
    if a is None or c is None:
        continue
    ab, cb = rate(loom, phase, b, p, "best_tok_s"), rate(lcpp, phase, b, p, "best_tok_s")
    print(f"| {label} | {a:.1f} | {c:.1f} | {a / c:.2f} | {ab:.1f} | {cb:.1f} | {ab / cb:.2f} |")
print()
print("(tok/s and ratio: median of the runs; best: the fastest run)")
for bnd in loom["bandwidth_bound"]:
    bw = bnd["read_bw"]
    c = rate(lcpp, "decode", 1, bnd["prompt_len"])
    extra = f"; llama.cpp {c:.1f} tok/s = {100 * c / bnd['bound_tok_s']:.1f}%" if c else ""
    print(f"Bandwidth bound, decode B=1 after P={bnd['prompt_len']}: {bw / 1e9:.2f} GB/s read / "
          f"{bnd['bytes_per_token'] / 1e6:.2f} MB per token = {bnd['bound_tok_s']:.1f} tok/s; "
          f"Loom {bnd['tok_s']:.1f} tok/s = {100 * bnd['fraction']:.1f}%{extra}")
EOF
echo
echo "raw output in $OUT"
