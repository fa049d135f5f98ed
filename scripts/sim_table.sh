#!/usr/bin/env bash
# Simulator table for the README: 8 and 64 simulated GPUs (Punica's A100 / Llama-2-7B
# figures), Punica placement vs round-robin vs least-loaded at the same arrival rates
# (30%, 60%, 90% of the estimated cluster capacity), then Punica on all four adapter
# workloads at the same rates plus an overload (150%) where throughput is capacity.
# Deterministic (seeded). Prints markdown. Extra flags are passed to every loom_sim run,
# e.g. --mode=cpu or --hardware_json=FILE.
set -euo pipefail
cd "$(dirname "$0")/.."
bazel build //scheduler/sim:loom_sim >&2
sim=bazel-bin/scheduler/sim/loom_sim

echo "## Placement policies (Distinct workload)"
echo
"$sim" --workers=8,64 --policies=punica,round_robin,least_loaded --workloads=distinct \
  --loads=0.3,0.6,0.9 --match_p99 "$@"
echo
echo "## Punica on the four adapter workloads"
echo
"$sim" --workers=8,64 --policies=punica --workloads=distinct,uniform,skewed,identical \
  --loads=0.3,0.9,1.5 "$@" | tail -n +3
