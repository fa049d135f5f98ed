#!/usr/bin/env bash
# The simulator checked against reality at small scale (issue 7c), one command:
#
#   scripts/sim_vs_reality.sh [--requests=N] [--load=F] [--rate=R] [--out=DIR] [--no_wait]
#
# 1. Calibration: one loomd pinned to core 0 (`taskset -c 0`, --threads=1, the same engine
#    and kernels as a worker) is timed with loom_bench: decode steps at batch 1/4/16/32
#    (median inter-token latency of B requests sent together = one step of batch B), and
#    the prefill step of the workload's prompt (TTFT of a request alone). Those rows are
#    fitted by loom_sim (--hardware_json, FitStepLatency): base, per decode token, per
#    prefill token.
# 2. Reality: 2 workers (`loomd --role=worker`, each `taskset -c 0` / `taskset -c 1`,
#    --threads=1) behind `loomd --role=router --workers=... --placement=punica`; loom_bench
#    sends N Poisson requests at a fixed rate (default: --load of the calibrated 2-worker
#    capacity). If this loomd has no cluster roles yet, ONE single-role loomd on core 0
#    stands in (1 worker, no router) and the table says so.
# 3. The simulator, calibrated as in 1, replays the same workload (rate, count, prompt and
#    output length distributions) with the same policy, batch cap and KV pool, no
#    autoscaler (the real workers stay up).
# Prints one markdown table: throughput (output tok/s), p50 and p99 end-to-end latency,
# real vs simulated, and the relative error. The router and loom_bench are not pinned and
# share the two cores with the workers: on this 2-core machine that is part of the error.
# Run it on a quiet machine (it waits up to 10 minutes for a 1-minute load below 0.5).
set -euo pipefail
cd "$(dirname "$0")/.."

requests=200
load=0.6
rate=""
user_rate=0
no_wait=0
out=""
model="${LOOM_MODEL:-/root/.cache/loom/SmolLM2-135M-Instruct.Q4_1.gguf}"
for arg in "$@"; do
  case "$arg" in
    --requests=*) requests="${arg#*=}" ;;
    --load=*) load="${arg#*=}" ;;
    --rate=*) rate="${arg#*=}"; user_rate=1 ;;
    --out=*) out="${arg#*=}" ;;
    --model=*) model="${arg#*=}" ;;
    --no_wait) no_wait=1 ;;
    *) echo "usage: $0 [--requests=N] [--load=F] [--rate=R] [--out=DIR] [--model=GGUF] [--no_wait]" >&2; exit 2 ;;
  esac
done
[[ -f "$model" ]] || { echo "model $model not found (scripts/fetch_model.sh)" >&2; exit 1; }
out="${out:-$(mktemp -d /tmp/sim_vs_reality.XXXXXX)}"
mkdir -p "$out"

# Private copies of the binaries: other bazel commands in this workspace may relink them
# while this runs.
mkdir -p "$out/bin"
for attempt in 1 2 3; do
  bazel build //server:loomd //clients/bench:loom_bench //scheduler/sim:loom_sim >&2
  if cp bazel-bin/server/loomd bazel-bin/clients/bench/loom_bench \
      bazel-bin/scheduler/sim/loom_sim "$out/bin/" 2>/dev/null; then
    break
  fi
  ((attempt < 3)) || { echo "could not copy the built binaries" >&2; exit 1; }
done
loomd="$out/bin/loomd"
bench="$out/bin/loom_bench"
sim="$out/bin/loom_sim"

# The workload (loom_bench's forms; loom_sim reads the same ones).
prompt_words=64
output_len="uniform:16:128"
max_batch=32

pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
}
trap cleanup EXIT

wait_quiet() {
  if ((no_wait)); then
    echo "load now: $(cut -d' ' -f1-3 /proc/loadavg) (--no_wait)" >&2
    return 0
  fi
  for _ in $(seq 60); do
    if awk '{exit !($1 < 0.5)}' /proc/loadavg; then return 0; fi
    sleep 10
  done
  echo "WARNING: machine still busy (load $(cut -d' ' -f1 /proc/loadavg)); figures are noisy" >&2
}

# start_loomd CORE NAME ARGS...: runs loomd pinned to CORE; log in $out/NAME.log.
start_loomd() {
  local core="$1" name="$2"
  shift 2
  if [[ "$core" == any ]]; then
    "$loomd" "$@" >"$out/$name.log" 2>&1 &
  else
    taskset -c "$core" "$loomd" "$@" >"$out/$name.log" 2>&1 &
  fi
  pids+=($!)
}

# wait_ready METRICS_PORT NAME: polls /healthz (loomd turns it 200 once serving);
# returns 1 (log shown) if it does not within 2 minutes.
wait_ready() {
  for _ in $(seq 240); do
    if curl -sf "http://127.0.0.1:$1/healthz" >/dev/null 2>&1; then return 0; fi
    sleep 0.5
  done
  echo "$2 did not become ready; log:" >&2
  tail -20 "$out/$2.log" >&2
  return 1
}

json_get() {  # json_get FILE EXPR (python over the loaded object `r`)
  python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print($2)" "$1"
}

# ---- 1. Calibration on one core ----
wait_quiet
start_loomd 0 calib --model="$model" --threads=1 --host=127.0.0.1 --port=56100 \
  --admin_port=56101 --metrics_host=127.0.0.1 --metrics_port=56102 --log_level=warn
wait_ready 56102 calib || exit 1
"$bench" --addr=127.0.0.1:56100 --rate=1 --requests=2 --prompt_len=8 --max_tokens=4 \
  --json >/dev/null  # warm-up
rows=()
for shape in "1 16 48" "4 16 48" "16 16 48" "32 16 48" "16 64 48"; do
  read -r b p t <<<"$shape"
  f="$out/calib_decode_b${b}_p${p}.json"
  "$bench" --addr=127.0.0.1:56100 --rate=1000 --requests="$b" --prompt_len="$p" \
    --max_tokens="$t" --json >"$f"
  # Median inter-token gap of B streams running together = one decode step of batch B.
  # No kv_tokens column: on SmolLM2 (3 KV heads x 64) attention over these contexts is
  # below the noise (batch 16 at 16 vs 64 prompt tokens), and a fitted KV term would only
  # absorb noise; the fit then keeps the cpu preset's 0.
  rows+=("$(json_get "$f" "'{\"decode_tokens\": %d, \"step_ms\": %.4f}' % (
    $b, r['itl_ms']['p50'])")")
done
# At the comparison workload's prompt length only: on this engine a prefill step is not
# linear in its tokens (measured 152 ms for 32, 875 ms for 128 on one core), so a line
# through two sizes would be wrong at both; calibrating at the operating point is exact there.
for p in "$prompt_words"; do
  f="$out/calib_prefill_p${p}.json"
  "$bench" --addr=127.0.0.1:56100 --rate=0.4 --requests=5 --prompt_len="$p" --max_tokens=1 \
    --json >"$f"
  # A request alone: its TTFT is one prefill step over its prompt (plus the RPC).
  rows+=("$(json_get "$f" "'{\"prefill_tokens\": %d, \"step_ms\": %.4f}' % (
    round(r['prompt_tokens'] / r['completed']), r['ttft_ms']['p50'])")")
done
cleanup
pids=()
# The comparison serves the base model, so no per-adapter cost.
(IFS=,; echo "{\"name\": \"cpu (SmolLM2-135M Q4_1, 1 core, --threads=1; calibrated $(date -u +%FT%TZ))\", \"ms_per_distinct_adapter\": 0, \"adapter_load_ms\": 0, \"measured_steps\": [${rows[*]}]}") \
  >"$out/calibration.json"
echo "calibration: $out/calibration.json" >&2
"$sim" --mode=cpu --hardware_json="$out/calibration.json" --workers=1 --policies=punica \
  --rate=1 --requests=1 | head -1 >&2 || true

# ---- 2. Reality ----
cluster=1
"$loomd" --helpfull >"$out/loomd_flags.txt" 2>&1 || true
if ! grep -q -- '--workers (' "$out/loomd_flags.txt"; then cluster=0; fi
workers=$((cluster ? 2 : 1))
if [[ -z "$rate" ]]; then
  rate="$("$sim" --mode=cpu --hardware_json="$out/calibration.json" --workers="$workers" \
    --policies=punica --workloads=identical --loads="$load" --requests=1 --prompt_len="$prompt_words" \
    --output_len="$output_len" --max_batch_size="$max_batch" --json |
    python3 -c "import json,sys; print('%.4f' % json.loads(sys.stdin.readline())['rate'])")"
fi
wait_quiet
if ((cluster)); then
  start_loomd 0 worker0 --role=worker --model="$model" --threads=1 --max_running="$max_batch" --host=127.0.0.1 \
    --port=56110 --admin_port=56111 --metrics_host=127.0.0.1 --metrics_port=56112 --log_level=warn
  start_loomd 1 worker1 --role=worker --model="$model" --threads=1 --max_running="$max_batch" --host=127.0.0.1 \
    --port=56120 --admin_port=56121 --metrics_host=127.0.0.1 --metrics_port=56122 --log_level=warn
  if wait_ready 56112 worker0 && wait_ready 56122 worker1; then
    start_loomd any router --role=router --workers=127.0.0.1:56110,127.0.0.1:56120 \
      --placement=punica --max_batch_size="$max_batch" --model="$model" --host=127.0.0.1 \
      --port=56130 --admin_port=56131 \
      --metrics_host=127.0.0.1 --metrics_port=56132 --log_level=warn
  fi
  if wait_ready 56132 router; then
    addr=127.0.0.1:56130
    setup="2 workers (loomd --role=worker, taskset -c 0 / -c 1, --threads=1) behind loomd --role=router --placement=punica"
  else
    echo "the cluster roles did not come up: falling back to one single-role worker" >&2
    cleanup
    pids=()
    cluster=0
    workers=1
    ((user_rate)) || rate=""
  fi
fi
if ((!cluster)) && [[ -z "$rate" ]]; then
  rate="$("$sim" --mode=cpu --hardware_json="$out/calibration.json" --workers=1 \
    --policies=punica --workloads=identical --loads="$load" --requests=1 \
    --prompt_len="$prompt_words" --output_len="$output_len" --max_batch_size="$max_batch" --json |
    python3 -c "import json,sys; print('%.4f' % json.loads(sys.stdin.readline())['rate'])")"
fi
if ((!cluster)); then
  start_loomd 0 single --model="$model" --threads=1 --max_running="$max_batch" --host=127.0.0.1 --port=56140 \
    --admin_port=56141 --metrics_host=127.0.0.1 --metrics_port=56142 --log_level=warn
  wait_ready 56142 single || exit 1
  addr=127.0.0.1:56140
  setup="1 worker (single-role loomd, taskset -c 0, --threads=1): the cluster roles were not available"
fi
"$bench" --addr="$addr" --rate=1 --requests=2 --prompt_len=8 --max_tokens=4 --json >/dev/null
"$bench" --addr="$addr" --rate="$rate" --requests="$requests" --prompt_len="$prompt_words" \
  --max_tokens="$output_len" --seed=7 --json >"$out/real.json"
cleanup
pids=()

# ---- 3. The simulator on the same workload ----
prompt_mean="$(json_get "$out/real.json" "round(r['prompt_tokens'] / max(r['completed'], 1))")"
"$sim" --mode=cpu --hardware_json="$out/calibration.json" --workers="$workers" \
  --policies=punica --workloads=identical --rate="$rate" --requests="$requests" --prompt_len="$prompt_mean" \
  --output_len="$output_len" --max_batch_size="$max_batch" --autoscale=false --seed=7 \
  --json | head -1 >"$out/sim.json"

python3 - "$out/real.json" "$out/sim.json" "$out/calibration.json" "$setup" "$rate" "$requests" \
  "$prompt_mean" "$output_len" <<'EOF'
import json, sys
real = json.load(open(sys.argv[1]))
sim = json.load(open(sys.argv[2]))
cal = json.load(open(sys.argv[3]))
setup, rate, n, prompt, output = sys.argv[4:9]
if real["errors"] or real["unfinished"] or real["dropped"]:
    print("WARNING: real run had %d errors, %d unfinished, %d dropped" %
          (real["errors"], real["unfinished"], real["dropped"]))
rows = [
    ("throughput (output tok/s)", real["throughput"]["output_tokens_per_s"], sim["throughput_tok_s"]),
    ("latency p50 (s)", real["e2e_ms"]["p50"] / 1000, sim["latency_p50_s"]),
    ("latency p99 (s)", real["e2e_ms"]["p99"] / 1000, sim["latency_p99_s"]),
]
print("Setup: %s. Workload: %s Poisson requests at %s req/s, prompt %s tokens, output %s "
      "(base model)." % (setup, n, rate, prompt, output))
print("Calibration rows (one core): %s" % json.dumps(cal["measured_steps"]))
print()
print("| metric | real | simulated | error (sim / real - 1) |")
print("|---|---|---|---|")
for name, r, s in rows:
    print("| %s | %.3f | %.3f | %+.1f%% |" % (name, r, s, 100 * (s / r - 1) if r else float("nan")))
EOF
echo "(files: $out)" >&2
