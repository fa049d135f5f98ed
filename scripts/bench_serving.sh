#!/usr/bin/env bash
# The README's serving benchmark: loom-bench against loomd (SmolLM2-135M-Instruct Q4_1, 32
# rank-16 LoRA adapters on all seven projections), workloads distinct and skewed, each at
# a low and a high arrival rate; then, on the same machine in the same run, the same
# request streams (same loom-bench binary and seed) against a llama.cpp peer serving the
# same 32 adapters (scripts/llamacpp_lora_peer.py: llama-cpp-python, llama-server's rule
# of one adapter per batch). Prints one markdown table and keeps every JSON report.
#
#   scripts/bench_serving.sh [OUT_DIR]          (default OUT_DIR: a new /tmp/loom_bench_serving.*)
#
# Settings (environment): DURATION=60 (seconds of arrivals per run), ADAPTERS=32,
# THREADS=2 (loomd --threads and the peer's llama.cpp threads), PROMPT_LEN=64 (words, each
# one token), MAX_TOKENS=64 (with ignore_eos: every request generates exactly that many),
# REQUEST_TIMEOUT=30 (per-request deadline in seconds, so an overloaded system cannot run
# the script long: expired requests count as DEADLINE_EXCEEDED errors), LOW=0.5 and
# HIGH=1.0 (the two rates as fractions of loomd's capacity, measured first by a burst of
# CAPACITY_REQUESTS=32 requests sent at once, distinct adapters), RATES="r1 r2" (use these
# rates instead), SEED=1, PEER=1 (0: skip the peer), PEER_THREADS (default THREADS),
# WORKLOADS="distinct skewed", LOOM_MODEL (default: fetch_model.sh).
# Everything listens on 127.0.0.1 on free ports; every process started here is stopped on
# exit.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

DURATION=${DURATION:-60}
ADAPTERS=${ADAPTERS:-32}
THREADS=${THREADS:-2}
PROMPT_LEN=${PROMPT_LEN:-64}
MAX_TOKENS=${MAX_TOKENS:-64}
REQUEST_TIMEOUT=${REQUEST_TIMEOUT:-30}
LOW=${LOW:-0.5}
HIGH=${HIGH:-1.0}
CAPACITY_REQUESTS=${CAPACITY_REQUESTS:-32}
SEED=${SEED:-1}
PEER=${PEER:-1}
WORKLOADS=${WORKLOADS:-"distinct skewed"}

out=${1:-$(mktemp -d /tmp/loom_bench_serving.XXXXXX)}
mkdir -p "$out"
work=$(mktemp -d /tmp/loom_bench_work.XXXXXX)
mkdir -p "$work/peft" "$work/gguf"
pids=()
cleanup() {
  for p in "${pids[@]}"; do
    if kill -0 "$p" 2>/dev/null; then
      kill -TERM "$p" 2>/dev/null || true
      for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.2; done
      kill -KILL "$p" 2>/dev/null || true
    fi
  done
  rm -rf "$work"
}
trap cleanup EXIT
log() { echo "[bench_serving $(date +%T)] $*" >&2; }

bazel build -c opt //server:loomd //clients/bench:loom_bench //models/lora:make_test_adapter
bin=$(bazel info -c opt bazel-bin 2>/dev/null)
model=${LOOM_MODEL:-$(scripts/fetch_model.sh)}
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

{
  echo "date: $(date -u +%FT%TZ)"
  echo "host: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
  echo "git: $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
  echo "uptime before: $(uptime)"
} > "$out/machine.txt"
log "$(tail -1 "$out/machine.txt")"

log "making $ADAPTERS rank-16 adapters (PEFT + GGUF-LoRA, all seven projections)"
preload=()
peer_adapters=()
for ((i = 0; i < ADAPTERS; i++)); do
  "$bin/models/lora/make_test_adapter" --base="$model" --out="$work/peft/adapter-$i" \
    --gguf_out="$work/gguf/adapter-$i.gguf" --rank=16 --alpha=32 --seed=$((i + 1)) > /dev/null
  preload+=("adapter-$i=$work/peft/adapter-$i")
  peer_adapters+=(--adapter "adapter-$i=$work/gguf/adapter-$i.gguf")
done
preload_csv=$(IFS=,; echo "${preload[*]}")

# run_bench NAME ADDR RATE WORKLOAD [extra loom_bench flags]: writes $out/NAME.json
run_bench() {
  local name=$1 addr=$2 rate=$3 workload=$4
  shift 4
  log "$name: rate $rate req/s, workload $workload"
  "$bin/clients/bench/loom_bench" --addr "$addr" --rate "$rate" --workload "$workload" \
    --adapters "$ADAPTERS" --prompt-len "$PROMPT_LEN" --max-tokens "$MAX_TOKENS" --ignore-eos \
    --seed "$SEED" --request-timeout "$REQUEST_TIMEOUT" --drain-timeout $((REQUEST_TIMEOUT + 15)) \
    --json "$@" > "$out/$name.json" 2> "$out/$name.err" || log "$name: loom_bench exited $?"
}

# ---- loomd ----
port=$(free_port); admin_port=$(free_port); metrics_port=$(free_port)
log "starting loomd on 127.0.0.1:$port (threads $THREADS, $ADAPTERS adapters preloaded)"
"$bin/server/loomd" --model "$model" --threads "$THREADS" --host 127.0.0.1 --port "$port" \
  --admin_host 127.0.0.1 --admin_port "$admin_port" --metrics_host 127.0.0.1 \
  --metrics_port "$metrics_port" --adapter_roots "$work/peft" --preload "$preload_csv" \
  --on_demand_adapters=false \
  --shutdown_grace 5s --log_level warn > "$out/loomd.log" 2>&1 &
loomd_pid=$!
pids+=("$loomd_pid")
for _ in $(seq 240); do
  curl -sf "http://127.0.0.1:$metrics_port/healthz" > /dev/null 2>&1 && break
  kill -0 "$loomd_pid" 2>/dev/null || { log "loomd exited:"; tail "$out/loomd.log" >&2; exit 1; }
  sleep 0.5
done
curl -sf "http://127.0.0.1:$metrics_port/healthz" > /dev/null || { log "loomd not healthy"; exit 1; }
if grep -q preload_failed "$out/loomd.log"; then log "a preload failed:"; grep preload_failed "$out/loomd.log" >&2; exit 1; fi

if [[ -n "${RATES:-}" ]]; then
  read -r rate_low rate_high <<< "$RATES"
else
  # Capacity: CAPACITY_REQUESTS requests at once (distinct adapters); completed / elapsed.
  run_bench loom_capacity "127.0.0.1:$port" 10000 distinct --requests "$CAPACITY_REQUESTS" \
    --request-timeout 0 --drain-timeout 600
  cap=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["throughput"]["requests_per_s"])' "$out/loom_capacity.json" || echo 0)
  python3 -c "import sys; sys.exit(0 if $cap > 0 else 1)" || { log "capacity probe failed"; cat "$out/loom_capacity.err" >&2; exit 1; }
  read -r rate_low rate_high < <(python3 -c "c=$cap; print(f'{c*$LOW:.2f} {c*$HIGH:.2f}')")
  log "loomd capacity ~$cap req/s: rates $rate_low and $rate_high"
fi
echo "rates: $rate_low $rate_high" >> "$out/machine.txt"

runs=()
for wl in $WORKLOADS; do
  for rate in $rate_low $rate_high; do
    run_bench "loom_${wl}_${rate}" "127.0.0.1:$port" "$rate" "$wl" --duration "$DURATION"
    runs+=("loomd=$out/loom_${wl}_${rate}.json")
  done
done
kill -TERM "$loomd_pid"; wait "$loomd_pid" 2>/dev/null || true

# ---- llama.cpp peer ----
if [[ "$PEER" == 1 ]]; then
  PYTHON=/usr/bin/python3 sh clients/python/gen_stubs.sh "$work/stubs" > /dev/null
  peer_port=$(free_port)
  log "starting the llama.cpp peer on 127.0.0.1:$peer_port"
  python3 scripts/llamacpp_lora_peer.py --model "$model" --host 127.0.0.1 --port "$peer_port" \
    --stubs "$work/stubs" --threads "${PEER_THREADS:-$THREADS}" "${peer_adapters[@]}" > "$out/peer.log" 2>&1 &
  peer_pid=$!
  pids+=("$peer_pid")
  for _ in $(seq 240); do
    grep -q "ready in" "$out/peer.log" && break
    kill -0 "$peer_pid" 2>/dev/null || { log "peer exited:"; tail "$out/peer.log" >&2; exit 1; }
    sleep 0.5
  done
  for wl in $WORKLOADS; do
    for rate in $rate_low $rate_high; do
      run_bench "peer_${wl}_${rate}" "127.0.0.1:$peer_port" "$rate" "$wl" --duration "$DURATION"
      runs+=("llama.cpp peer=$out/peer_${wl}_${rate}.json")
    done
  done
  kill -TERM "$peer_pid"; wait "$peer_pid" 2>/dev/null || true
fi

echo "uptime after: $(uptime)" >> "$out/machine.txt"
python3 scripts/bench_serving_table.py "${runs[@]}" > "$out/table.md"
cat "$out/machine.txt"
echo
cat "$out/table.md"
log "reports in $out"
