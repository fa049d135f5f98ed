#!/usr/bin/env bash
# The simulator table (issue 7b): 8 and 64 simulated GPUs (the "gpu" preset: A100 /
# Llama-2-7B, roofline from Punica's figures, see step_latency_model.cc), Punica placement
# vs round-robin vs least-loaded on Punica's four adapter workloads at the same arrival
# rates (30%, 60%, 90% of the estimated cluster capacity), every policy under the same
# autoscaler (release after 10 s idle, 5 s cold start). Then, per rate, the comparison
# with least-loaded: worker-seconds at the same rate, the p99 ratio, and the fewest
# workers a STATIC least-loaded cluster needs to meet Punica's p99 (an oracle that knows
# the rate) with its worker-seconds. Then capacity (150% load, every GPU saturated):
# Distinct vs Identical throughput. Last, load that rises and falls (Poisson with rate(t) =
# mean x (1 + 0.8 sin(2 pi t / 600 s)), mean 50%, so 10%..90% over one period), where a
# static cluster must be sized for the peak.
#
# Deterministic (seeded). Prints markdown. The two cluster sizes run in parallel (2
# cores); a few minutes in all. Extra flags go to every loom_sim run, e.g.
# --idle_grace_s=30 --cold_start_s=10, or --mode=cpu --hardware_json=FILE.
set -euo pipefail
cd "$(dirname "$0")/../../.."
bazel build //scheduler/sim:loom_sim >&2
sim=bazel-bin/scheduler/sim/loom_sim
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

for n in 8 64; do
  "$sim" --workers=$n --policies=punica,round_robin,least_loaded \
    --workloads=distinct,uniform,skewed,identical --loads=0.3,0.6,0.9 --match_p99 "$@" \
    >"$tmp/policies_$n.md" &
done
wait
for n in 8 64; do
  "$sim" --workers=$n --policies=punica,least_loaded --workloads=distinct,uniform,skewed,identical \
    --loads=1.5 "$@" >"$tmp/capacity_$n.md" &
done
wait
for n in 8 64; do
  "$sim" --workers=$n --policies=punica,least_loaded --workloads=distinct,uniform,skewed,identical \
    --loads=0.5 --rate_amplitude=0.8 --rate_period_s=600 --match_p99 "$@" >"$tmp/modulated_$n.md" &
done
wait

# Each file: model line, blank, table (header, rule, rows), blank, comparison table.
head -1 "$tmp/policies_8.md"
echo
echo "## Policies at the same arrival rates"
echo
sed -n '3,4p' "$tmp/policies_8.md"
for n in 8 64; do awk 'NR > 4 && /^\| [0-9]/ && NF > 30' "$tmp/policies_$n.md"; done
echo
echo "## Punica vs least-loaded"
echo
for n in 8 64; do
  awk '/worker-s least-loaded/ {on = 1} on && NF' "$tmp/policies_$n.md" |
    { if [[ $n == 8 ]]; then cat; else tail -n +3; fi; }
done
echo
echo "## Capacity (150% of the estimated capacity offered; throughput is what the cluster sustains)"
echo
sed -n '3,4p' "$tmp/capacity_8.md"
for n in 8 64; do awk 'NR > 4 && /^\| [0-9]/ && NF > 30' "$tmp/capacity_$n.md"; done
echo
echo "## Load that rises and falls: $(sed -n '1s/.*Arrivals: //p' "$tmp/modulated_8.md")"
echo
sed -n '3,4p' "$tmp/modulated_8.md"
for n in 8 64; do awk 'NR > 4 && /^\| [0-9]/ && NF > 30' "$tmp/modulated_$n.md"; done
echo
for n in 8 64; do
  awk '/worker-s least-loaded/ {on = 1} on && NF' "$tmp/modulated_$n.md" |
    { if [[ $n == 8 ]]; then cat; else tail -n +3; fi; }
done
