#!/usr/bin/env python3
"""How well does llama.cpp agree with ITSELF on the golden prompts?

Teacher-forced logits of tests/golden/logits_smollm2.json's prompts, computed by
llama.cpp (llama-cpp-python) once with the whole prompt in one batch (how the golden file
was made) and once token by token (n_batch=1). llama.cpp is not batch-invariant: the two
runs differ only in float summation order, which sets the noise floor for any
"top-1 agreement with llama.cpp" figure. Reference only; not part of the product or CI.
"""
import json, os, sys
import numpy as np
from llama_cpp import Llama

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
model = os.environ.get("LOOM_MODEL", os.path.expanduser("~/.cache/loom/SmolLM2-135M-Instruct.Q4_1.gguf"))
golden = json.load(open(os.path.join(REPO, "tests/golden/logits_smollm2.json")))
n = golden["n_positions"]

def logits(n_batch, tokens):
    llm = Llama(model_path=model, logits_all=True, n_ctx=512, n_batch=n_batch, n_ubatch=n_batch,
                n_threads=2, seed=0, verbose=False)
    llm.eval(tokens[:n])
    return np.asarray(llm.scores[:n], dtype=np.float32)

agree = total = 0
maxdiff = 0.0
for p in golden["prompts"]:
    a = logits(512, p["tokens"])
    b = logits(1, p["tokens"])
    agree += int((a.argmax(1) == b.argmax(1)).sum())
    total += n
    maxdiff = max(maxdiff, float(np.abs(a - b).max()))
print(f"llama.cpp batch-512 vs token-by-token: top-1 agreement {agree}/{total} = "
      f"{100.0 * agree / total:.2f}%, max |logit diff| = {maxdiff:.4f}")
