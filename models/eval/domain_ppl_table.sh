#!/usr/bin/env bash
# Per-domain perplexity of FP32, the stored Q4_1 model and each quantization scheme with and
# without rotation, on the held-out texts of scripts/fetch_domain_texts.sh (fiction:
# Persuasion; manual: the Debian Policy Manual; code: Jinja2's source), each scored on its
# first MAX_TOKENS tokens (window 512, stride 256). Checkpoints it lacks are made first, all
# calibrated on the same mix (calibration.txt, calibration-bash.txt, calibration-python.txt,
# weight 1 each, 48 x 512 tokens; never a held-out text). Prints one markdown table (ppl and
# the change against FP32 per domain); raw outputs go to $OUT_DIR. Slow (calibration ~4 min
# per rotation, each row ~3 min on 2 cores): run on a quiet machine. Never part of CI.
#
#   bash models/eval/domain_ppl_table.sh [MAX_TOKENS=10000]
# Environment: QDIR (default ~/.cache/loom/quant), OUT_DIR (default /tmp/domain_ppl),
#   ADAPTER=DIR (every row with that LoRA adapter: the adapter table), ROWS="name ..." (a
#   subset of the rows below).
set -euo pipefail
MAX_TOKENS="${1:-10000}"
CACHE="${LOOM_CACHE:-$HOME/.cache/loom}"
QDIR="${QDIR:-$CACHE/quant}"
OUT_DIR="${OUT_DIR:-/tmp/domain_ppl}"
E="$CACHE/eval"
mkdir -p "$OUT_DIR"
cd "$(dirname "$0")/../.."
bash scripts/fetch_domain_texts.sh >/dev/null
"${BAZEL:-bazel}" build //models/eval:loom_ppl //models/quant:loom_quantize >&2
BIN="$("${BAZEL:-bazel}" info bazel-bin 2>/dev/null)"
TEXTS="fiction=$E/heldout.txt,manual=$E/heldout-policy.txt,code=$E/heldout-jinja2.txt"
CAL="$E/calibration.txt:1,$E/calibration-bash.txt:1,$E/calibration-python.txt:1"
SRC="mix: Austen (r-cran-janeaustenr), Bash manual (bash-doc), PyYAML+Markdown source (python3-yaml, python3-markdown); see eval/SOURCES-domains.txt"
QZ=("$BIN/models/quant/loom_quantize" --sequences=48 --calibration_text "$CAL"
    --calibration_source "$SRC" --threads=2)
PPL=("$BIN/models/eval/loom_ppl" --text "$TEXTS" --max_tokens "$MAX_TOKENS" --threads 2)
[[ -z "${ADAPTER:-}" ]] || PPL+=(--adapter "$ADAPTER")

# name | loom_ppl flags | loom_quantize flags (empty: no checkpoint)
ROWS_ALL=(
  "fp32|--f32|"
  "q4_1||"
  "w8a8|--quantized $QDIR/unrot-w8a8-g64-o0|--scheme=w8a8 --group_size=64 --outliers=0"
  "w8a8-rot|--quantized $QDIR/rot-w8a8-g64-o0|--scheme=w8a8 --group_size=64 --outliers=0 --rotate"
  "w4a8|--quantized $QDIR/unrot-w4a8-g64-o64-gptq-hsfr|--scheme=w4a8 --gptq --gptq_hessian_scale_search --w4_full_range --group_size=64 --outliers=64"
  "w4a8-rot|--quantized $QDIR/prot-w4a8-g64-o64-gptq-hsfr|--scheme=w4a8 --gptq --gptq_hessian_scale_search --w4_full_range --group_size=64 --outliers=64 --rotate"
  "w4a4|--quantized $QDIR/unrot-w4a4-g64-o64-gptq|--scheme=w4a4 --gptq --group_size=64 --outliers=64"
  "w4a4-rot-o0|--quantized $QDIR/rot-w4a4-g64-o0-gptq|--scheme=w4a4 --gptq --group_size=64 --outliers=0 --rotate"
  "w4a4-rot|--quantized $QDIR/prot-w4a4-g64-o64-gptq|--scheme=w4a4 --gptq --group_size=64 --outliers=64 --rotate"
  "w4a4-o256|--quantized $QDIR/unrot-w4a4-g64-o256-gptq|--scheme=w4a4 --gptq --group_size=64 --outliers_attn_norm=256 --outliers_attn_out=256 --outliers_ffn_norm=256 --outliers_silu_mul=384"
)

ppl_of() { awk -v d="$1" -F'|' '$2 ~ " "d" " {gsub(/ /, "", $3); print $3}' "$2"; }
declare -A FP32
echo "| model | fiction | manual | code | loom_ppl flags | loom_quantize flags |"
echo "| --- | ---: | ---: | ---: | --- | --- |"
for row in "${ROWS_ALL[@]}"; do
  IFS='|' read -r name pflags qflags <<<"$row"
  if [[ -n "${ROWS:-}" && " $ROWS " != *" $name "* && "$name" != fp32 ]]; then continue; fi
  if [[ -n "$qflags" ]]; then
    dir="${pflags#--quantized }"
    # shellcheck disable=SC2086
    [[ -f "$dir/loom_quant.json" ]] || "${QZ[@]}" $qflags --out "$dir" >"$OUT_DIR/$name.quantize.txt" 2>&1
  fi
  log="$OUT_DIR/$name.txt"
  # shellcheck disable=SC2086
  "${PPL[@]}" $pflags >"$log"
  cells=""
  for d in fiction manual code; do
    p="$(ppl_of "$d" "$log")"
    if [[ "$name" == fp32 ]]; then
      FP32[$d]="$p"
      cells+=" $p |"
    else
      cells+=" $p ($(awk -v a="$p" -v b="${FP32[$d]}" 'BEGIN {printf "%+.1f%%", 100 * (a / b - 1)}')) |"
    fi
  done
  printf '| %s |%s `%s` | `%s` |\n' "$name" "$cells" "$pflags" "$qflags"
done
