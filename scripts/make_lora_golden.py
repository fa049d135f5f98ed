#!/usr/bin/env python3
"""Writes tests/golden/lora_logits_smollm2.json: llama.cpp's logits WITH a LoRA adapter.

The adapter is a seeded synthetic rank-16 LoRA on all seven projections, written by Loom's
own tool (//models/lora:make_test_adapter) in BF16, so tests/lora_golden_test.cc can
regenerate exactly the same weights (adapters are ~10 MB, so none is committed); the
golden records the tool's flags and a fingerprint of the weights (element count, sum,
sum of |w|, sum of w^2 over all lora_a/lora_b tensors, in float64).

llama.cpp computes `ggml_mul_mat(lora_b, ggml_mul_mat(lora_a, cur))` and the CPU backend
converts `cur` to the lora tensor's vec_dot_type: BF16 tensors would round the LoRA input
activations (and the rank intermediate) to BF16, while Loom applies LoRA to the
unquantized FP32 activation with BF16 weights and FP32 accumulation. To compare like with
like, llama.cpp is given an F32 copy of the BF16 file (the same values, exactly): its LoRA
then reads the F32 activation with vec_dot_type F32, as Loom does.

Recorded (llama-cpp-python, lora_scale 1.0, n_ctx 512, n_threads 2, add_bos False):
  * teacher-forced top-20 logits of 3 prompts x 64 positions (the tokens of
    tests/golden/logits_smollm2.json's first three prompts), whole prompt in one batch;
  * greedy 32-token continuations of 2 prompts with and without the adapter (prompt in one
    batch, then token by token); they must differ;
  * llama.cpp's own noise floor with the adapter: batch-512 vs token-by-token (n_batch 1)
    top-1 agreement on the same 3 x 64 positions (see scripts/llamacpp_self_agreement.py),
    from which the C++ test's threshold is set.
Reference only: nothing here ships in the product or runs in CI.

  make_lora_golden.py [--model PATH] [--tool PATH_TO_make_test_adapter] [--out FILE]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_MODEL = os.environ.get(
    "LOOM_MODEL",
    os.path.join(os.path.expanduser("~"), ".cache/loom/SmolLM2-135M-Instruct.Q4_1.gguf"))

# make_test_adapter flags (the C++ test passes the same ones).
SPEC = {"rank": 16, "alpha": 32.0, "seed": 2024, "dtype": "bf16", "magnitude": 0.05,
        "targets": "q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj"}
N_PROMPTS = 3
N_POSITIONS = 64
TOP_K = 20
GREEDY_PROMPTS = [
    "The old lighthouse keeper climbed the stairs every night to",
    "<|im_start|>user\nGive me three tips for learning to cook.<|im_end|>\n"
    "<|im_start|>assistant\n",
]
N_GREEDY = 32
SETTINGS = {"lora_scale": 1.0, "logits_all": True, "n_ctx": 512, "n_threads": 2, "seed": 0,
            "add_bos": False}


def tool_flags(base, out_dir, gguf_out):
    return [f"--base={base}", f"--out={out_dir}", f"--gguf_out={gguf_out}",
            f"--rank={SPEC['rank']}", f"--alpha={SPEC['alpha']}", f"--seed={SPEC['seed']}",
            f"--dtype={SPEC['dtype']}", f"--magnitude={SPEC['magnitude']}",
            f"--targets={SPEC['targets']}"]


def as_f32(t):
    """A GGUFReader tensor's values as float32 (F32 or BF16; BF16 comes back as raw bytes)."""
    import gguf
    v = np.asarray(t.data)
    if t.tensor_type == gguf.GGMLQuantizationType.BF16:
        return (np.ascontiguousarray(v).view(np.uint16).astype(np.uint32) << 16).view(np.float32)
    if t.tensor_type != gguf.GGMLQuantizationType.F32:
        raise SystemExit(f"{t.name}: unexpected tensor type {t.tensor_type}")
    return v.astype(np.float32)


def fingerprint(reader):
    n = 0
    s = sa = s2 = 0.0
    names = 0
    for t in reader.tensors:
        if not (t.name.endswith(".lora_a") or t.name.endswith(".lora_b")):
            continue
        names += 1
        v = as_f32(t).astype(np.float64).ravel()
        n += v.size
        s += float(v.sum())
        sa += float(np.abs(v).sum())
        s2 += float((v * v).sum())
    return {"tensors": names, "elements": n, "sum": s, "sum_abs": sa, "sum_sq": s2}


def to_f32_gguf(src_path, dst_path):
    """Copies a GGUF-LoRA file with every tensor upcast to F32 (values unchanged)."""
    import gguf
    r = gguf.GGUFReader(src_path)
    arch = r.fields["general.architecture"]
    arch = bytes(arch.parts[arch.data[0]]).decode()
    w = gguf.GGUFWriter(dst_path, arch)
    for key, f in r.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture":
            continue
        vt = f.types[0]
        if vt == gguf.GGUFValueType.STRING:
            w.add_string(key, bytes(f.parts[f.data[0]]).decode())
        elif vt == gguf.GGUFValueType.ARRAY:
            raise SystemExit(f"unexpected array field {key}")
        else:
            w.add_key_value(key, f.parts[f.data[0]][0].item(), vt)
    for t in r.tensors:
        v = np.ascontiguousarray(as_f32(t)).reshape(
            [int(x) for x in reversed(t.shape)])
        w.add_tensor(t.name, v)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def llama(model, lora, n_batch=512):
    from llama_cpp import Llama
    kw = dict(model_path=model, logits_all=True, n_ctx=SETTINGS["n_ctx"], n_batch=n_batch,
              n_ubatch=n_batch, n_threads=SETTINGS["n_threads"], seed=0, verbose=False)
    if lora:
        kw.update(lora_path=lora, lora_scale=SETTINGS["lora_scale"])
    return Llama(**kw)


def teacher_forced(llm, tokens):
    llm.reset()
    llm.eval(tokens)
    scores = np.asarray(llm.scores[: llm.n_tokens], dtype=np.float32)
    assert scores.shape[0] == len(tokens) and np.isfinite(scores).all()
    return scores


def greedy(llm, prompt):
    llm.reset()
    llm.eval(prompt)
    out = []
    for _ in range(N_GREEDY):
        tok = int(np.argmax(np.asarray(llm.scores[llm.n_tokens - 1], dtype=np.float32)))
        out.append(tok)
        llm.eval([tok])
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=DEFAULT_MODEL)
    ap.add_argument("--tool", default=None,
                    help="a built make_test_adapter binary (default: bazel run it)")
    ap.add_argument("--out", default=os.path.join(REPO, "tests/golden/lora_logits_smollm2.json"))
    args = ap.parse_args()
    import gguf
    golden = json.load(open(os.path.join(REPO, "tests/golden/logits_smollm2.json")))
    with tempfile.TemporaryDirectory() as tmp:
        bf16 = os.path.join(tmp, "lora_bf16.gguf")
        f32 = os.path.join(tmp, "lora_f32.gguf")
        tool = ([args.tool] if args.tool else
                ["bazel", "run", "//models/lora:make_test_adapter", "--"])
        subprocess.run(tool + tool_flags(args.model, os.path.join(tmp, "peft"), bf16),
                       check=True, cwd=REPO)
        fp = fingerprint(gguf.GGUFReader(bf16))
        to_f32_gguf(bf16, f32)
        assert fingerprint(gguf.GGUFReader(f32)) == fp, "F32 copy changed the values"

        with_lora = llama(args.model, f32)
        base = llama(args.model, None)
        prompts = []
        changed_top1 = 0
        for p in golden["prompts"][:N_PROMPTS]:
            tokens = p["tokens"][:N_POSITIONS]
            s = teacher_forced(with_lora, tokens)
            sb = teacher_forced(base, tokens)
            changed_top1 += int((s.argmax(1) != sb.argmax(1)).sum())
            positions = []
            for pos in range(N_POSITIONS):
                top = np.argsort(-s[pos], kind="stable")[:TOP_K]
                positions.append({"top_ids": [int(i) for i in top],
                                  "top_logits": [round(float(s[pos][i]), 5) for i in top]})
            prompts.append({"tokens": tokens, "positions": positions})

        greedy_out = []
        for text in GREEDY_PROMPTS:
            special = text.startswith("<|im_start|>")
            toks = base.tokenize(text.encode("utf-8"), add_bos=False, special=special)
            g_lora = greedy(with_lora, toks)
            g_base = greedy(base, toks)
            if g_lora == g_base:
                raise SystemExit(f"adapter does not change the greedy output of {text!r}")
            greedy_out.append({"text": text, "special": special, "tokens": toks,
                               "lora": g_lora, "base": g_base})
        print("greedy with / without adapter:")
        for g in greedy_out:
            print("  lora:", repr(base.detokenize(g["lora"]).decode("utf-8", "replace")))
            print("  base:", repr(base.detokenize(g["base"]).decode("utf-8", "replace")))

        # llama.cpp's noise floor with the adapter: batch vs token by token.
        agree = total = 0
        maxdiff = 0.0
        one_by_one = llama(args.model, f32, n_batch=1)
        for p in prompts:
            a = teacher_forced(with_lora, p["tokens"])
            b = teacher_forced(one_by_one, p["tokens"])
            agree += int((a.argmax(1) == b.argmax(1)).sum())
            total += len(p["tokens"])
            maxdiff = max(maxdiff, float(np.abs(a - b).max()))
        # The same with the BF16 file (llama.cpp then rounds the LoRA inputs to BF16): how
        # far that choice moves llama.cpp from itself.
        bf = llama(args.model, bf16)
        agree_bf16 = 0
        maxdiff_bf16 = 0.0
        for p in prompts:
            a = teacher_forced(with_lora, p["tokens"])
            b = teacher_forced(bf, p["tokens"])
            agree_bf16 += int((a.argmax(1) == b.argmax(1)).sum())
            maxdiff_bf16 = max(maxdiff_bf16, float(np.abs(a - b).max()))

    floor = {"batch_vs_token_by_token_top1": agree, "positions": total,
             "rate": round(agree / total, 4), "max_abs_logit_diff": round(maxdiff, 4),
             "f32_vs_bf16_lora_file_top1": agree_bf16,
             "f32_vs_bf16_lora_file_max_abs_logit_diff": round(maxdiff_bf16, 4)}
    print(f"llama.cpp with adapter, batch-512 vs token-by-token: top-1 {agree}/{total} = "
          f"{100.0 * agree / total:.2f}%, max |logit diff| {maxdiff:.4f}")
    print(f"llama.cpp F32 vs BF16 LoRA file: top-1 {agree_bf16}/{total}, "
          f"max |logit diff| {maxdiff_bf16:.4f}")
    print(f"adapter changes llama.cpp's teacher-forced top-1 at {changed_top1}/{total} "
          f"positions")
    doc = {
        "source": "llama.cpp via llama-cpp-python " + __import__("llama_cpp").__version__,
        "model": os.path.basename(args.model),
        "adapter": dict(SPEC, tool="//models/lora:make_test_adapter",
                        llamacpp_file="F32 copy of the tool's BF16 GGUF-LoRA"),
        "fingerprint": fp,
        "settings": SETTINGS,
        "n_positions": N_POSITIONS,
        "top_k": TOP_K,
        "adapter_changes_top1_positions": changed_top1,
        "llamacpp_self_agreement": floor,
        "greedy": greedy_out,
        "prompts": prompts,
    }
    parts = []
    for key, value in doc.items():
        if isinstance(value, list):
            items = ",\n  ".join(json.dumps(v, ensure_ascii=False) for v in value)
            parts.append(f" {json.dumps(key)}: [\n  {items}\n ]")
        else:
            parts.append(f" {json.dumps(key)}: {json.dumps(value, ensure_ascii=False)}")
    with open(args.out, "w", encoding="utf-8") as fh:
        fh.write("{\n" + ",\n".join(parts) + "\n}\n")
    json.load(open(args.out, encoding="utf-8"))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
