#!/usr/bin/env bash
# Perplexity and greedy-agreement table of the quantization schemes on held-out text:
# FP32 path, each checkpoint under $QDIR (w8a8, w4a8, w4a4, each with and without -gptq),
# with and without a synthetic LoRA adapter, and llama.cpp on the Q4_1 file. Prints
# markdown rows (and the raw tool outputs into $OUT_DIR). Slow: run on a quiet machine.
#
#   bash models/eval/quant_ppl_table.sh [MAX_TOKENS=10000]
# Environment: QDIR (default ~/.cache/loom/quant), T (text, default heldout.txt),
#   OUT_DIR (default /tmp/quant_ppl), PROMPTS (loom_agree prompts, default 16),
#   SKIP_F32=1, SKIP_LLAMACPP=1, SKIP_ADAPTER=1 (rows already measured).
set -euo pipefail
MAX_TOKENS="${1:-10000}"
CACHE="${LOOM_CACHE:-$HOME/.cache/loom}"
QDIR="${QDIR:-$CACHE/quant}"
T="${T:-$CACHE/eval/heldout.txt}"
OUT_DIR="${OUT_DIR:-/tmp/quant_ppl}"
MODEL="${LOOM_MODEL:-$CACHE/SmolLM2-135M-Instruct.Q4_1.gguf}"
mkdir -p "$OUT_DIR"
cd "$(dirname "$0")/../.."
"${BAZEL:-bazel}" build -c opt //models/eval:loom_ppl //models/eval:loom_agree \
  //models/lora:make_test_adapter >&2
BIN="$("${BAZEL:-bazel}" info -c opt bazel-bin 2>/dev/null)"
PPL=(nice -n 5 "$BIN/models/eval/loom_ppl" --text "$T" --max_tokens "$MAX_TOKENS" --threads 2)
ADAPTER="$OUT_DIR/adapter"
if [[ -z "${SKIP_ADAPTER:-}" && ! -d "$ADAPTER" ]]; then
  "$BIN/models/lora/make_test_adapter" --base "$MODEL" --out "$ADAPTER" \
    --gguf_out "$ADAPTER.gguf" --rank 16 --seed 7 --magnitude 0.05 >&2
fi

field() { awk -v k="$1" '$1 == k":" {print $2}' "$2"; }
row() {  # name, log file, command text
  printf '| %s | %s | %s | `%s` |\n' "$1" "$(field ppl "$2")" "$(field nll "$2")" "$3"
}
run() {  # name, log, flags...
  local name="$1" log="$OUT_DIR/$2.txt"
  shift 2
  "${PPL[@]}" "$@" > "$log"
  row "$name" "$log" "loom_ppl $*"
}

echo "| model | ppl | mean NLL | command |"
echo "| --- | --- | --- | --- |"
[[ -n "${SKIP_F32:-}" ]] || run "Loom FP32 (dequantized Q4_1)" f32 --f32
for s in w8a8 w4a8 w4a4; do
  for g in "" -gptq; do
    [[ -d "$QDIR/$s$g" ]] || continue
    run "Loom $s$g" "$s$g" --quantized "$QDIR/$s$g"
  done
done
if [[ -z "${SKIP_LLAMACPP:-}" ]]; then
  nice -n 5 python3 scripts/llamacpp_ppl.py --model "$MODEL" --text "$T" \
    --max-tokens "$MAX_TOKENS" --threads 2 > "$OUT_DIR/llamacpp.txt"
  row "llama.cpp Q4_1" "$OUT_DIR/llamacpp.txt" "scripts/llamacpp_ppl.py --max-tokens $MAX_TOKENS"
fi
if [[ -z "${SKIP_ADAPTER:-}" ]]; then
  echo
  echo "With the adapter:"
  echo
  echo "| model | ppl | mean NLL | command |"
  echo "| --- | --- | --- | --- |"
  run "Loom FP32 + adapter" f32_adapter --f32 --adapter "$ADAPTER"
  for s in w8a8 w4a8 w4a4; do
    for g in "" -gptq; do
      [[ -d "$QDIR/$s$g" ]] || continue
      run "Loom $s$g + adapter" "$s${g}_adapter" --quantized "$QDIR/$s$g" --adapter "$ADAPTER"
    done
  done
  echo
  for s in w8a8 w4a8 w4a4; do
    for g in "" -gptq; do
      [[ -d "$QDIR/$s$g" ]] || continue
      echo "loom_agree $s$g:"
      nice -n 5 "$BIN/models/eval/loom_agree" --text "$T" --quantized "$QDIR/$s$g" \
        --adapter "$ADAPTER" --prompts "${PROMPTS:-16}" --prompt_len 64 --gen 32 --threads 2 \
        | tee "$OUT_DIR/agree_$s$g.txt" | grep -E "vs FP32|direction"
    done
  done
fi
