#!/usr/bin/env bash
# The README's first command: install what is missing, build, fetch the default model,
# and run it (today: `loom generate` answers a sample prompt).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
bazel build //server:loom
model=$(scripts/fetch_model.sh)
bazel-bin/server/loom generate --model "$model" --chat "${1:-What is the capital of France?}"
