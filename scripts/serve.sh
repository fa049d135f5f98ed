#!/usr/bin/env bash
# The README's first command: install what is missing, build, fetch the default model,
# and serve it: loomd on 127.0.0.1:50051 (inference), 127.0.0.1:50052 (admin) and
# 127.0.0.1:9400 (/metrics, /healthz). Extra arguments go to loomd.
# LOOM_SERVE_DEMO=1 instead answers one sample prompt with `loom generate` and exits.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
bazel build -c opt //server:loomd //server:loom //clients/loomctl:loomctl //clients/bench:loom_bench
model=$(scripts/fetch_model.sh)
bin=$(bazel info -c opt bazel-bin 2>/dev/null)
if [[ "${LOOM_SERVE_DEMO:-0}" == 1 ]]; then
  exec "$bin/server/loom" generate --model "$model" --chat "What is the capital of France?"
fi
echo "loomd: serving $model (Ctrl-C or SIGTERM to stop; loomctl: $bin/clients/loomctl/loomctl)" >&2
exec "$bin/server/loomd" --model "$model" "$@"
