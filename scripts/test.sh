#!/usr/bin/env bash
# The README's second command: install what is missing, build everything (CPU and the
# CUDA targets with nvcc, which compile here but only run where a GPU exists), fetch the
# default model that the tests read, and run every test. Ends with one summary line
# "N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh || exit 1
export LOOM_MODEL
LOOM_MODEL=$(scripts/fetch_model.sh) || exit 1

status=0
if command -v nvcc >/dev/null 2>&1 || [[ -x /usr/local/cuda/bin/nvcc ]]; then
  # Only the CUDA targets: the rest of the tree is the same with or without the config,
  # and --config=cuda builds into its own output tree (a second full build otherwise).
  echo "== CUDA build (sm_80, sm_89, sm_90a) =="
  bazel build --config=cuda //kernels/cuda/... //third_party/cuda/... //parallel/... || status=1
else
  echo "== no nvcc on this machine: CUDA targets not compiled =="
fi

echo "== tests =="
log=$(mktemp)
bazel test //... 2>&1 | tee "$log"
test_status=${PIPESTATUS[0]}
# Bazel exits 4 when no test target exists at all; treat as failure to be safe.
[[ $test_status -eq 0 ]] || status=1

passed=$(grep -cE '^//\S+\s+(\(cached\) )?PASSED' "$log")
failed=$(grep -cE '^//\S+\s+(\(cached\) )?(FAILED|TIMEOUT|NO STATUS|FLAKY)' "$log")
skipped=$(grep -cE '^//\S+\s+SKIPPED' "$log")
bazel shutdown >/dev/null 2>&1 || true
rm -f "$log"
echo "tests: $passed passed, $failed failed, $skipped skipped"
exit $status
