#!/bin/bash
# Lints a real exposition of every loom_ metric family with `promtool check metrics`
# (Debian's `prometheus` package). Fails when promtool is missing, when the exposition is
# empty or lacks a family, or when promtool reports ANY problem (error or lint warning).
# Usage: promtool_lint_test.sh <synthetic_metrics_server>
set -u
bin="$1"
promtool="${PROMTOOL:-/usr/bin/promtool}"
if [[ ! -x "$promtool" ]]; then
  echo "FAIL: $promtool not found: install Debian's 'prometheus' package (apt-get install prometheus)" >&2
  exit 1
fi
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
"$bin" --print > "$tmp/exposition.txt" || { echo "FAIL: $bin --print failed" >&2; exit 1; }

# promtool accepts empty input, so check the families are really there first.
for family in loom_requests_total loom_time_to_first_token_seconds \
    loom_inter_token_latency_seconds loom_request_duration_seconds loom_prompt_tokens_total \
    loom_generation_tokens_total loom_requests_running loom_requests_waiting \
    loom_batch_tokens loom_batch_sequences loom_step_tokens loom_kv_cache_pages_used \
    loom_kv_cache_pages_capacity loom_kv_cache_usage_ratio loom_preemptions_total \
    loom_adapters loom_adapters_resident loom_adapter_resident_bytes \
    loom_adapter_load_seconds loom_ready; do
  if ! grep -q "^# TYPE $family " "$tmp/exposition.txt"; then
    echo "FAIL: family $family missing from the exposition" >&2
    cat "$tmp/exposition.txt" >&2
    exit 1
  fi
done
if grep -v '^#' "$tmp/exposition.txt" | grep -qv '^loom_'; then
  echo "FAIL: a series without the loom_ prefix:" >&2
  grep -v '^#' "$tmp/exposition.txt" | grep -v '^loom_' >&2
  exit 1
fi

"$promtool" check metrics < "$tmp/exposition.txt" > "$tmp/promtool.out" 2>&1
rc=$?
if [[ $rc -ne 0 || -s "$tmp/promtool.out" ]]; then
  echo "FAIL: promtool check metrics exited $rc with:" >&2
  cat "$tmp/promtool.out" >&2
  exit 1
fi
echo "PASS: promtool check metrics: no problems in $(grep -c '^# TYPE' "$tmp/exposition.txt") families"
