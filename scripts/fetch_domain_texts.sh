#!/usr/bin/env bash
# Fetches texts of several domains for calibration and held-out evaluation, each from a
# pinned Debian package (`apt-get download`, nothing installed, sha256 checked), so that
# quantization is calibrated on a mix and measured on text of other domains.
#
# First runs scripts/fetch_eval_text.sh (Jane Austen: heldout.txt = Persuasion,
# calibration.txt = the other five novels). Then writes, under
# ${LOOM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/loom}/eval/:
#
#   held out (evaluation only; never calibration):
#     heldout-policy.txt   technical manual: the Debian Policy Manual 4.6.2.0
#                          (debian-policy 4.6.2.0, policy.txt.gz from "1. About this
#                          manual" on; GPL-2+)
#     heldout-jinja2.txt   source code: every jinja2/*.py of python3-jinja2
#                          3.1.2-1+deb12u3 but the generated _identifier.py, sorted by
#                          name, each after a "# file: NAME" line (BSD-3-Clause)
#   calibration (mixed by loom_quantize --calibration_text FILE:WEIGHT,...):
#     calibration.txt          fiction: five Austen novels (from fetch_eval_text.sh)
#     calibration-bash.txt     technical manual: the GNU Bash Reference Manual 5.2
#                              (bash-doc 5.2.15-2, bash.info.gz without Info node headers
#                              and the tag table; GFDL-1.3, no invariant sections)
#     calibration-python.txt   source code: yaml/*.py of python3-yaml 6.0-3+b2 (MIT), then
#                              markdown/**/*.py of python3-markdown 3.4.1-2+deb12u1
#                              (BSD-3-Clause), sorted by path, "# file:" lines as above
#   SOURCES-domains.txt        package, version, file, licence and sha256 of each text,
#                              and the separation check below.
#
# Kept apart by construction: the held-out texts come from packages no calibration text
# uses (checked below), and the script FAILS if more than 1% of a held-out text's
# distinct non-trivial lines (>= 40 characters after stripping) also occur in any
# calibration text. loom_quantize refuses calibration files named heldout*.
#
# Text form (deterministic): UTF-8, lines right-stripped, runs of more than one blank line
# collapsed to one, files end with "\n". Output sha256s are pinned; idempotent.
# LOOM_EVAL_DEB_DIR=DIR uses local copies of the .deb files instead of apt-get download.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache="${LOOM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/loom}"
dest="$cache/eval"
mkdir -p "$dest"

bash "$here/fetch_eval_text.sh" >/dev/null

# package version sha256-of-deb role licence
readonly DEBS=(
  "debian-policy 4.6.2.0 ef9d01b625c3b87c3a845c2cd1b66f1a16e9240b2b9e5bee53472a00e8457a39 heldout GPL-2+"
  "python3-jinja2 3.1.2-1+deb12u3 914e3a26742b488bca661dd12dc06198262c3a99b68f2f20ef7310aecdf82cae heldout BSD-3-Clause"
  "bash-doc 5.2.15-2 2c1a353f7004d14ba81db19c253b958d2dd9582027650739c530fd50376a9d8b calibration GFDL-1.3-no-invariants"
  "python3-yaml 6.0-3+b2 8d0db0b3099298fe039b94e4c52a6987798a90d23b80de3ac13c3cb75cf622a2 calibration MIT"
  "python3-markdown 3.4.1-2+deb12u1 7f98e975cf0cc5d6b63d1ea76f1e1f2c88df91d873eac58eef8bc89a25a25d93 calibration BSD-3-Clause"
)
readonly OUT_SHA256=(
  "heldout-policy.txt 36bcc8029f6a10f4f7c7b1a33e04967e24a17531b55c602b18ebcd94aea8ba92"
  "heldout-jinja2.txt abc6b8987f80fb7ddbdae0905f8b119be605729468dcf304456ffb071d0e2c61"
  "calibration-bash.txt c89b001692aa55ed958e7a748f1d4fa1cab18fefa434443620a86fc97d2b59a5"
  "calibration-python.txt f3a5be3a371be4fc0c1fec361dd19c4ecd9988bb63faeb19e5ad9b2402791d64"
)

verified() {
  local entry name sha
  for entry in "${OUT_SHA256[@]}"; do
    read -r name sha <<<"$entry"
    echo "$sha  $dest/$name" | sha256sum --check --status 2>/dev/null || return 1
  done
  [[ -f "$dest/SOURCES-domains.txt" ]]
}

if verified; then
  cat "$dest/SOURCES-domains.txt"
  exit 0
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
heldout_pkgs=() calib_pkgs=()
for entry in "${DEBS[@]}"; do
  read -r pkg ver sha role lic <<<"$entry"
  if [[ "$role" == heldout ]]; then heldout_pkgs+=("$pkg"); else calib_pkgs+=("$pkg"); fi
  deb="$tmp/$pkg.deb"
  if [[ -n "${LOOM_EVAL_DEB_DIR:-}" ]]; then
    cp "$LOOM_EVAL_DEB_DIR/${pkg}_"*.deb "$deb"
  else
    echo "fetching $pkg=$ver with apt-get download ..." >&2
    if ! (cd "$tmp" && apt-get download -q "$pkg=$ver" >"$tmp/apt.log" 2>&1); then
      cat "$tmp/apt.log" >&2
      echo "apt-get download $pkg=$ver failed (run 'apt-get update' first?)" >&2
      exit 1
    fi
    mv "$tmp/${pkg}_"*.deb "$deb"
  fi
  if ! echo "$sha  $deb" | sha256sum --check --status; then
    echo "checksum mismatch for $pkg $ver (expected $sha)" >&2
    exit 1
  fi
  dpkg-deb -x "$deb" "$tmp/x-$pkg"
done
for h in "${heldout_pkgs[@]}"; do
  for c in "${calib_pkgs[@]}"; do
    [[ "$h" != "$c" ]] || { echo "package $h is both held out and calibration" >&2; exit 1; }
  done
done

python3 - "$tmp" "$dest" <<'PY'
import gzip, os, re, sys

tmp, dest = sys.argv[1], sys.argv[2]

def normalise(text):
    lines = [l.rstrip() for l in text.replace("\r\n", "\n").split("\n")]
    out, blank = [], False
    for l in lines:
        if not l:
            if not blank and out:
                out.append("")
            blank = True
            continue
        blank = False
        out.append(l)
    while out and not out[-1]:
        out.pop()
    return "\n".join(out) + "\n"

def sources(root, exclude=()):
    files = []
    for d, _, names in os.walk(root):
        for n in names:
            p = os.path.join(d, n)
            rel = os.path.relpath(p, os.path.dirname(root))
            if n.endswith(".py") and n not in exclude:
                files.append((rel, p))
    parts = []
    for rel, p in sorted(files):
        with open(p, encoding="utf-8") as f:
            parts.append("# file: %s\n%s" % (rel, f.read()))
    return "\n\n".join(parts)

def write(name, text):
    with open(os.path.join(dest, name), "w", encoding="utf-8") as f:
        f.write(normalise(text))

policy = gzip.open(os.path.join(tmp, "x-debian-policy/usr/share/doc/debian-policy/policy.txt.gz")).read().decode("utf-8")
start = policy.index("\n1. About this manual\n")
write("heldout-policy.txt", policy[start + 1:])

py = "x-python3-jinja2/usr/lib/python3/dist-packages/jinja2"
write("heldout-jinja2.txt", sources(os.path.join(tmp, py), exclude=("_identifier.py",)))

info = gzip.open(os.path.join(tmp, "x-bash-doc/usr/share/info/bash.info.gz")).read().decode("utf-8")
info = info[:info.index("\x1f\nTag Table:")] if "\x1f\nTag Table:" in info else info
keep = [l for l in info.split("\n") if "\x1f" not in l and not l.startswith("File: bash.info,")]
write("calibration-bash.txt", "\n".join(keep))

yaml = sources(os.path.join(tmp, "x-python3-yaml/usr/lib/python3/dist-packages/yaml"))
md = sources(os.path.join(tmp, "x-python3-markdown/usr/lib/python3/dist-packages/markdown"))
write("calibration-python.txt", yaml + "\n\n" + md)

# Separation check: distinct non-trivial held-out lines also present in calibration.
def lines(name):
    with open(os.path.join(dest, name), encoding="utf-8") as f:
        return {l.strip() for l in f if len(l.strip()) >= 40}
calib = set()
for name in ("calibration.txt", "calibration-bash.txt", "calibration-python.txt"):
    calib |= lines(name)
report = []
for name in ("heldout.txt", "heldout-policy.txt", "heldout-jinja2.txt"):
    h = lines(name)
    shared = len(h & calib)
    frac = shared / max(len(h), 1)
    report.append("%s: %d of %d distinct lines >= 40 chars also in calibration (%.3f%%)" % (name, shared, len(h), 100 * frac))
    if frac > 0.01:
        sys.exit("held-out text %s overlaps calibration: %s" % (name, report[-1]))
with open(os.path.join(tmp, "overlap.txt"), "w") as f:
    f.write("\n".join(report) + "\n")
PY

{
  echo "Texts for calibration and held-out evaluation (scripts/fetch_domain_texts.sh)"
  echo
  echo "file | domain | role | Debian package | file in package | licence | sha256"
  while read -r name domain role pkgs path lic; do
    printf '%s | %s | %s | %s | %s | %s | %s\n' "$name" "$domain" "$role" "$pkgs" "$path" "$lic" \
      "$(sha256sum "$dest/$name" | cut -d' ' -f1)"
  done <<'EOF'
heldout.txt fiction heldout r-cran-janeaustenr=1.0.0-1 data/Rdata.rdb(Persuasion) MIT+public-domain
heldout-policy.txt manual heldout debian-policy=4.6.2.0 usr/share/doc/debian-policy/policy.txt.gz GPL-2+
heldout-jinja2.txt code heldout python3-jinja2=3.1.2-1+deb12u3 usr/lib/python3/dist-packages/jinja2/*.py BSD-3-Clause
calibration.txt fiction calibration r-cran-janeaustenr=1.0.0-1 data/Rdata.rdb(five-novels) MIT+public-domain
calibration-bash.txt manual calibration bash-doc=5.2.15-2 usr/share/info/bash.info.gz GFDL-1.3-no-invariants
calibration-python.txt code calibration python3-yaml=6.0-3+b2,python3-markdown=3.4.1-2+deb12u1 usr/lib/python3/dist-packages/{yaml,markdown}/**/*.py MIT,BSD-3-Clause
EOF
  echo
  echo "separation (held-out packages share none with calibration; line overlap):"
  cat "$tmp/overlap.txt"
} >"$dest/SOURCES-domains.txt"

if ! verified; then
  echo "warning: output checksums differ from the pinned ones:" >&2
  for entry in "${OUT_SHA256[@]}"; do
    read -r name sha <<<"$entry"
    echo "  $name $(sha256sum "$dest/$name" | cut -d' ' -f1) (pinned $sha)" >&2
  done
  exit 1
fi
cat "$dest/SOURCES-domains.txt"
