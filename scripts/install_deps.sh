#!/usr/bin/env bash
# Installs what Loom needs to build and test on Debian 12 (bookworm), if missing.
# Everything comes from Debian's packages and PyPI; nothing is vendored or downloaded
# otherwise.
set -euo pipefail

packages=(
  bazel-bootstrap                       # Bazel 4.2.3
  g++ python3 python3-pip unzip
  libabsl-dev libspdlog-dev libfmt-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc
  libpcre2-dev libre2-dev nlohmann-json3-dev
  libsentencepiece-dev sentencepiece
  libcpp-httplib-dev prometheus-cpp-dev
  prometheus                            # promtool lint + real scrape test
  python3-grpcio python3-protobuf        # Python client
  python3-yaml                          # tests/deploy manifest checks
  curl                                  # scripts/sim_vs_reality.sh
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}" >&2
  SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >&2
fi

# PyPI, for Debian's /usr/bin/python3 (the tests' interpreter): the official OpenAI client,
# unmodified, which tests/openai drives against loomd's HTTP API.
pypi=(openai==3.57.0)
if ! /usr/bin/python3 -c 'import openai' 2>/dev/null; then
  echo "installing from PyPI: ${pypi[*]}" >&2
  SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO=sudo
  $SUDO /usr/bin/python3 -m pip install -q --break-system-packages "${pypi[@]}" >&2
fi
