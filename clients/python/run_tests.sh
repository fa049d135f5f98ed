#!/bin/sh
# Bazel sh_test: generates the stubs into a scratch folder and runs the Python client's
# unit tests with Debian's python3 (python3-grpcio, python3-protobuf).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=${TEST_TMPDIR:-$(mktemp -d)}/stubs
PYTHON=${PYTHON:-/usr/bin/python3}
PYTHON="$PYTHON" "$here/gen_stubs.sh" "$out"
PYTHONPATH="$out:$here" PYTHONDONTWRITEBYTECODE=1 "$PYTHON" -m unittest discover -s "$here/tests" -v
