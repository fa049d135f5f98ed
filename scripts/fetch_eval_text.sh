#!/usr/bin/env bash
# Fetches real English prose for calibration and perplexity: Jane Austen's six novels as
# shipped by the Debian package r-cran-janeaustenr 1.0.0-1 (package licence MIT, Copyright
# 2016-2017 Julia Silge; the novels themselves are public domain, from Project Gutenberg).
# The .deb is downloaded with `apt-get download` (nothing is installed, R is not needed),
# its sha256 is checked, and the R lazy-load data base it holds (data/Rdata.rdb/.rdx: one
# character vector of lines per novel) is decoded by a small reader below.
#
# Writes, under ${LOOM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/loom}/eval/:
#   heldout.txt      Persuasion (1818), whole. Never used for calibration.
#   calibration.txt  Sense and Sensibility, Pride and Prejudice, Mansfield Park, Emma,
#                    Northanger Abbey (in that order).
#   SOURCE.txt       source, version, licence, checksums.
# Text form (deterministic): each novel's hard-wrapped lines are joined into paragraphs
# (lines stripped, runs of spaces collapsed to one, joined by one space); paragraphs are
# separated by one blank line; novels by one blank line; files end with "\n". UTF-8.
#
# Prints the source, version and licence, then the two paths. Idempotent: files with the
# pinned checksums are kept. LOOM_EVAL_DEB=/path/to.deb uses a local copy of the package.
set -euo pipefail

readonly PACKAGE=r-cran-janeaustenr
readonly VERSION=1.0.0-1
readonly DEB_SHA256=df6bddf211906d1ff404f8ff662c21b34e6660e7f54a311084e749050c019c95
readonly HELDOUT_SHA256=ea05f5bd05c12e0b8a04e80ff9f65cb37920658ac47d07a58f615733f93664d2
readonly CALIB_SHA256=dfe74727933dd7ae47504b934dd4730b54ef9907859a4bf39998be156c744cd6
cache="${LOOM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/loom}"
dest="$cache/eval"
mkdir -p "$dest"

describe() {
  echo "source:  Debian package $PACKAGE $VERSION (Jane Austen's complete novels)"
  echo "licence: MIT (package, Julia Silge 2016-2017); texts public domain (Project Gutenberg)"
  echo "heldout: Persuasion; calibration: the other five novels"
}

verified() {
  echo "$HELDOUT_SHA256  $dest/heldout.txt" | sha256sum --check --status 2>/dev/null &&
    echo "$CALIB_SHA256  $dest/calibration.txt" | sha256sum --check --status 2>/dev/null
}

if verified; then
  describe
  echo "$dest/heldout.txt"
  echo "$dest/calibration.txt"
  exit 0
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [[ -n "${LOOM_EVAL_DEB:-}" ]]; then
  cp "$LOOM_EVAL_DEB" "$tmp/pkg.deb"
else
  echo "fetching $PACKAGE=$VERSION with apt-get download ..." >&2
  if ! (cd "$tmp" && apt-get download -q "$PACKAGE=$VERSION" >&2 2>"$tmp/apt.log"); then
    cat "$tmp/apt.log" >&2
    echo "apt-get download failed (run 'apt-get update' first?)" >&2
    exit 1
  fi
  mv "$tmp"/"$PACKAGE"_*.deb "$tmp/pkg.deb"
fi
if ! echo "$DEB_SHA256  $tmp/pkg.deb" | sha256sum --check --status; then
  echo "checksum mismatch for $PACKAGE $VERSION (expected $DEB_SHA256)" >&2
  exit 1
fi
dpkg-deb -x "$tmp/pkg.deb" "$tmp/x"

python3 - "$tmp/x/usr/lib/R/site-library/janeaustenr/data/Rdata" "$tmp" <<'PY'
import gzip, re, struct, sys, zlib

class RReader:
    """The subset of R's XDR serialization (formats 2 and 3) that a lazy-load index and
    character-vector data sets use. Unknown types raise, so a changed file fails loudly."""
    def __init__(self, b):
        self.b, self.p, self.refs = b, 0, []
    def int(self):
        v = struct.unpack_from(">i", self.b, self.p)[0]
        self.p += 4
        return v
    def read(self):
        if self.b[:2] != b"X\n":
            raise ValueError("not XDR serialization")
        self.p = 2
        version = self.int(); self.int(); self.int()
        if version == 3:
            n = self.int()  # length of the native encoding's name, then the name
            self.p += n
        return self.item()
    def item(self):
        flags = self.int()
        t = flags & 0xFF
        has_attr, has_tag = flags & (1 << 9), flags & (1 << 10)
        if t in (254, 253, 252, 251, 250, 242, 241):   # NULL and special environments
            return None
        if t == 255:                                     # reference to an earlier symbol
            k = flags >> 8
            return self.refs[(k if k else self.int()) - 1]
        if t == 1:                                       # symbol
            v = ("sym", self.item())
            self.refs.append(v)
            return v
        if t in (2, 6, 239, 240):                        # pairlist / call
            if has_attr: self.item()
            tag = self.item() if has_tag else None
            car, cdr = self.item(), self.item()
            return [(tag[1] if tag else None, car)] + (cdr if isinstance(cdr, list) else [])
        if t == 9:                                       # CHARSXP
            n = self.int()
            if n == -1: return None
            v = self.b[self.p:self.p + n]
            self.p += n
            return v.decode("utf-8")
        if t in (10, 13, 14, 16, 19):                    # lgl, int, real, str, list
            n = self.int()
            if t in (10, 13):
                v = list(struct.unpack_from(">%di" % n, self.b, self.p)); self.p += 4 * n
            elif t == 14:
                v = list(struct.unpack_from(">%dd" % n, self.b, self.p)); self.p += 8 * n
            else:
                v = [self.item() for _ in range(n)]
            attrs = dict(self.item()) if has_attr else {}
            if t == 19 and "names" in attrs:
                return dict(zip(attrs["names"], v))
            return v
        raise ValueError("unsupported R type %d" % t)

def lazyload(base):
    index = RReader(gzip.decompress(open(base + ".rdx", "rb").read())).read()
    db = open(base + ".rdb", "rb").read()
    out = {}
    for name, (off, n) in index["variables"].items():
        blob = db[off:off + n]  # 4-byte uncompressed length, then a zlib stream
        out[name] = RReader(zlib.decompress(blob[4:])).read()
    return out

def prose(lines):
    paras, cur = [], []
    for line in lines + [""]:
        line = re.sub(r" +", " ", (line or "").strip())
        if line:
            cur.append(line)
        elif cur:
            paras.append(" ".join(cur))
            cur = []
    return "\n\n".join(paras)

books = lazyload(sys.argv[1])
calib = ["sensesensibility", "prideprejudice", "mansfieldpark", "emma", "northangerabbey"]
with open(sys.argv[2] + "/heldout.txt", "w", encoding="utf-8", newline="\n") as f:
    f.write(prose(books["persuasion"]) + "\n")
with open(sys.argv[2] + "/calibration.txt", "w", encoding="utf-8", newline="\n") as f:
    f.write("\n\n".join(prose(books[b]) for b in calib) + "\n")
PY

ok=1
echo "$HELDOUT_SHA256  $tmp/heldout.txt" | sha256sum --check --status || ok=0
echo "$CALIB_SHA256  $tmp/calibration.txt" | sha256sum --check --status || ok=0
if [[ $ok != 1 ]]; then
  sha256sum "$tmp/heldout.txt" "$tmp/calibration.txt" >&2
  echo "extracted text does not match the pinned checksums" >&2
  exit 1
fi
mv "$tmp/heldout.txt" "$tmp/calibration.txt" "$dest/"
{
  describe
  echo "deb sha256: $DEB_SHA256"
  echo "heldout.txt sha256: $HELDOUT_SHA256"
  echo "calibration.txt sha256: $CALIB_SHA256"
} >"$dest/SOURCE.txt"
describe
echo "$dest/heldout.txt"
echo "$dest/calibration.txt"
