#!/bin/bash
# A real Prometheus server (Debian's /usr/bin/prometheus, loopback only) scrapes /metrics of
# a synthetic ServerMetrics + HttpEndpoint every second; the test reads loom_ series back
# through Prometheus's HTTP query API and checks their values (fixed by the synthetic
# events, see synthetic_metrics_server.cc).
# Usage: prometheus_scrape_test.sh <synthetic_metrics_server>
set -u
bin="$1"
prometheus="${PROMETHEUS:-/usr/bin/prometheus}"
if [[ ! -x "$prometheus" ]]; then
  echo "FAIL: $prometheus not found: install Debian's 'prometheus' package" >&2
  exit 1
fi
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null; done
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*" >&2
  echo "--- prometheus log (tail) ---" >&2
  tail -n 30 "$tmp/prometheus.log" >&2 2>/dev/null
  exit 1
}

# 1. The metrics endpoint on a free loopback port.
"$bin" --serve="$tmp/port" --seconds=600 2> "$tmp/server.log" &
pids+=($!)
for _ in $(seq 100); do [[ -s "$tmp/port" ]] && break; sleep 0.1; done
[[ -s "$tmp/port" ]] || fail "metrics server did not start: $(cat "$tmp/server.log")"
metrics_port=$(cat "$tmp/port")
# HTTP GET with python3 (no curl needed): prints the body, exit 1 unless 200.
http_get() {
  python3 -c 'import sys, urllib.request
try:
    with urllib.request.urlopen(sys.argv[1], timeout=2) as r:
        sys.stdout.write(r.read().decode())
except Exception:
    sys.exit(1)' "$1"
}
http_get "http://127.0.0.1:$metrics_port/healthz" > /dev/null || fail "/healthz not 200"

# 2. A free port for Prometheus's web listener (bind to 0, read the port, release).
prom_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat > "$tmp/prometheus.yml" <<YAML
global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: loom
    metrics_path: /metrics
    static_configs:
      - targets: ["127.0.0.1:$metrics_port"]
YAML
"$prometheus" --config.file="$tmp/prometheus.yml" --storage.tsdb.path="$tmp/tsdb" \
  --web.listen-address="127.0.0.1:$prom_port" > "$tmp/prometheus.log" 2>&1 &
pids+=($!)

# 3. Poll the query API (bounded: 60 s) until the scraped series appears.
query() {  # prints the first result's value, or nothing
  local q
  q=$(python3 -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1]))' "$1")
  http_get "http://127.0.0.1:$prom_port/api/v1/query?query=$q" |
    python3 -c 'import json,sys
d = json.load(sys.stdin)
r = d["data"]["result"] if d.get("status") == "success" else []
print(r[0]["value"][1] if r else "")' 2>/dev/null
}
value=""
for _ in $(seq 120); do
  value=$(query 'loom_requests_total{job="loom",adapter="alpha",code="OK"}')
  [[ -n "$value" ]] && break
  kill -0 "${pids[1]}" 2>/dev/null || fail "prometheus exited"
  sleep 0.5
done
[[ -n "$value" ]] || fail "loom_requests_total never appeared in Prometheus within 60 s"
[[ "$value" == "3" ]] || fail "loom_requests_total{adapter=alpha,code=OK} = $value, want 3"

# Other families scraped in the same scrape.
check() {  # query, want
  local got
  got=$(query "$1")
  [[ "$got" == "$2" ]] || fail "$1 = '$got', want '$2'"
  echo "ok: $1 = $got"
}
check 'loom_kv_cache_pages_used{job="loom"}' 37
check 'loom_kv_cache_usage_ratio{job="loom"}' 0.25
check 'loom_requests_total{job="loom",adapter="base",code="OK"}' 2
check 'loom_adapters{job="loom",state="READY"}' 2
check 'loom_time_to_first_token_seconds_count{job="loom"}' 1
check 'up{job="loom"}' 1
echo "PASS: Prometheus scraped loom_requests_total{adapter=\"alpha\",code=\"OK\"} = $value"
