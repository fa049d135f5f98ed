#!/usr/bin/env bash
# Base-model throughput, Loom vs llama.cpp, on the same GGUF, thread count and machine, back
# to back: builds //models/llama:llama_benchmark (-c opt), runs it and
# scripts/bench_llamacpp.py (llama-cpp-python), and prints a side-by-side markdown table
# plus Loom's batch-1 decode bandwidth-bound line. Not part of the test suite.
#
# Usage: scripts/bench_base_model.sh [--model PATH] [--threads N] [--runs N] [--out DIR]
# Environment: LOOM_MODEL (default model), BAZEL (default: bazel).
set -euo pipefail

cd "$(dirname "$0")/.."
MODEL="${LOOM_MODEL:-${HOME:-/root}/.cache/loom/SmolLM2-135M-Instruct.Q4_1.gguf}"
THREADS=2
RUNS=3
OUT=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --model) MODEL="$2"; shift 2 ;;
    --threads) THREADS="$2"; shift 2 ;;
    --runs) RUNS="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
[[ -f "$MODEL" || -d "$MODEL" ]] || { echo "model not found: $MODEL" >&2; exit 1; }
OUT="${OUT:-$(mktemp -d /tmp/bench_base_model.XXXXXX)}"
mkdir -p "$OUT"

CONFIGS="1x512,1x128,8x128,32x128"
COMMON=(--threads="$THREADS" --runs="$RUNS" --decode_steps=64 --token_budget=512)

"${BAZEL:-bazel}" build -c opt //models/llama:llama_benchmark
BIN="$("${BAZEL:-bazel}" info -c opt bazel-bin 2>/dev/null)/models/llama/llama_benchmark"

echo "== machine: $(nproc) CPUs; load average before Loom: $(cut -d' ' -f1-3 /proc/loadavg)"
"$BIN" --model="$MODEL" --configs="$CONFIGS" "${COMMON[@]}" \
  --json_out="$OUT/loom.json" | tee "$OUT/loom.txt"
echo "== load average before llama.cpp: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 scripts/bench_llamacpp.py --model "$MODEL" --configs "$CONFIGS" "${COMMON[@]}" \
  --json_out "$OUT/llamacpp.json" | tee "$OUT/llamacpp.txt"

python3 - "$OUT/loom.json" "$OUT/llamacpp.json" <<'EOF'
import json, sys
loom = json.load(open(sys.argv[1]))
lcpp = json.load(open(sys.argv[2]))

def rate(doc, phase, b, p):
    for r in doc["results"]:
        if r["phase"] == phase and r["batch"] == b and r["prompt_len"] == p:
            return r["tok_s"]
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
print("| workload | Loom tok/s | llama.cpp tok/s | Loom / llama.cpp |")
print("|---|---:|---:|---:|")
for label, phase, b, p in rows:
    a, c = rate(loom, phase, b, p), rate(lcpp, phase, b, p)
    if a is None or c is None:
        continue
    print(f"| {label} | {a:.1f} | {c:.1f} | {a / c:.2f} |")
print()
bw = loom["read_bandwidth_bytes_s"]
for bnd in loom["bandwidth_bound"]:
    c = rate(lcpp, "decode", 1, bnd["prompt_len"])
    extra = f"; llama.cpp {c:.1f} tok/s = {100 * c / bnd['bound_tok_s']:.1f}%" if c else ""
    print(f"Bandwidth bound, decode B=1 after P={bnd['prompt_len']}: {bw / 1e9:.2f} GB/s read / "
          f"{bnd['bytes_per_token'] / 1e6:.2f} MB per token = {bnd['bound_tok_s']:.1f} tok/s; "
          f"Loom {bnd['tok_s']:.1f} tok/s = {100 * bnd['fraction']:.1f}%{extra}")
EOF
echo
echo "raw output in $OUT"
