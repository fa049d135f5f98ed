#!/usr/bin/env bash
# Multi-adapter LoRA decode throughput (Punica's Identical / Distinct / Uniform / Skewed
# workloads and no adapters, same run) with SGMV vs a gather-per-token baseline: builds
# //models/llama:lora_benchmark with -c opt and runs it (see models/llama/lora_benchmark.cc
# for what is measured). Not part of the test suite.
#
# Usage: scripts/bench_lora.sh [--model PATH] [--threads N] [--runs N] [--out DIR]
#                              [-- EXTRA BENCHMARK FLAGS...]
# The benchmark spin-waits between ops, so other load on the machine distorts the numbers:
# the script prints the load average before and after the run.
# Environment: LOOM_MODEL (default model), BAZEL (default: bazel).
set -euo pipefail

cd "$(dirname "$0")/.."
MODEL="${LOOM_MODEL:-${HOME:-/root}/.cache/loom/SmolLM2-135M-Instruct.Q4_1.gguf}"
THREADS=2
RUNS=3
OUT=""
EXTRA=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --model) MODEL="$2"; shift 2 ;;
    --threads) THREADS="$2"; shift 2 ;;
    --runs) RUNS="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    --) shift; EXTRA=("$@"); break ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
[[ -f "$MODEL" || -d "$MODEL" ]] || { echo "model not found: $MODEL" >&2; exit 1; }
OUT="${OUT:-$(mktemp -d /tmp/bench_lora.XXXXXX)}"
mkdir -p "$OUT"

"${BAZEL:-bazel}" build -c opt //models/llama:lora_benchmark
BIN="$("${BAZEL:-bazel}" info -c opt bazel-bin 2>/dev/null)/models/llama/lora_benchmark"

echo "== machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
echo "== before: $(uptime)"
"$BIN" --model="$MODEL" --threads="$THREADS" --runs="$RUNS" --batch=32 --decode_steps=32 \
  --rank=16 --json_out="$OUT/lora.json" ${EXTRA[@]+"${EXTRA[@]}"} | grep -v '^{' | tee "$OUT/lora.txt"
echo "== after: $(uptime)"
echo "raw output in $OUT (lora.txt, lora.json)"
