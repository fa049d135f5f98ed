#!/usr/bin/env python3
"""Writes reference data from llama.cpp (via llama-cpp-python) for Loom's tests.

  make_golden.py [--model PATH]            -> tests/golden/tokenizer_ids.json
  make_golden.py [--model PATH] --logits   -> tests/golden/logits_smollm2.json

tokenizer_ids.json: for a varied text set, llama.cpp's ids with add_bos=False and
special=False (user text: control-token text is NOT parsed), and its detokenization; plus
ChatML conversations rendered with the GGUF's own Jinja chat template and tokenized with
special=True (what the chat template must reproduce).

logits_smollm2.json: teacher-forced logits. For each prompt, eval(all tokens) with
logits_all=True and, for each of the first 64 positions, the top-20 token ids and their
logits. Only top-k is stored (llama.cpp quantizes activations, so compare with a
tolerance). Reference only: nothing here ships in the product.
"""
import argparse
import json
import os
import random
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_MODEL = os.environ.get(
    "LOOM_MODEL",
    os.path.join(os.path.expanduser("~"), ".cache/loom/SmolLM2-135M-Instruct.Q4_1.gguf"))

TEXTS = [
    "Hello, world!",
    "The quick brown fox jumps over the lazy dog.",
    "1234567890 3.14159",
    "Numbers: 42, 007, 1e10, -3.5, 100000 and 2024-01-31.",
    "   leading spaces and trailing spaces   ",
    "two  spaces,   three,\tone tab,\t\ttwo tabs",
    "line one\nline two\n\nline four\n\n\n",
    "\n\n\nstarts with newlines",
    " \n \n  \t \r\n mixed whitespace \u00a0nbsp\u3000ideographic space",
    "caf\u00e9 na\u00efve \u00c6r\u00f8sk\u00f8bing",
    "\u00fcber Stra\u00dfe \u00e0 la carte, pi\u00f1ata, r\u00e9sum\u00e9",
    "\u4f60\u597d\u4e16\u754c \u65e5\u672c\u8a9e",
    "\ud55c\uad6d\uc5b4 \u0440\u0443\u0441\u0441\u043a\u0438\u0439 \u0627\u0644\u0639\u0631\u0628\u064a\u0629 \u05e2\u05d1\u05e8\u05d9\u05ea \u0939\u093f\u0928\u094d\u0926\u0940 \u0e44\u0e17\u0e22",
    "emoji \U0001F600\U0001F680 family \U0001F468\u200D\U0001F469\u200D\U0001F467 flags \U0001F1EB\U0001F1F7\U0001F1EF\U0001F1F5",
    "thumbs \U0001F44D\U0001F3FD heart \u2764\ufe0f rainbow flag \U0001F3F3\ufe0f\u200D\U0001F308",
    "def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n",
    "#include <vector>\nint main() {\n  std::vector<int> v{1, 2, 3};\n  for (auto& x : v) x *= 2;\n  return v[0] != 2;\n}\n",
    "I'm sure they'll say we've done what you'd've expected; it's John's.",
    "I'M LOUD, THEY'LL HEAR. Don't won't can't shan't",
    "mixed: English, \u0440\u0443\u0441\u0441\u043a\u0438\u0439, \u4e2d\u6587, \u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8, and \u00e9mojis \U0001F389!",
    "<|im_start|>user\nhi<|im_end|>",
    "plain <|endoftext|> text with <repo_name> markers",
    "symbols: @#$%^&*()_+-=[]{}|;':\",./<>?`~ \u00a9\u00ae\u2122 \u20ac\u00a3\u00a5",
    "URL https://example.com/path?q=1&r=two#frag and email a.b@c.org",
    "superscripts x\u00b2 \u00bd \u2163 \u0663\u0664 \uff11\uff12\uff13 fullwidth",
    "a",
    " ",
    "",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    "Supercalifragilisticexpialidocious antidisestablishmentarianism",
    "edge whitespace:\x1c\x1d\x1e\x1f|\x85|\u200b|\u180e|\u2028|\u202f|\x0b\x0c end",
    "  \n\n  \t\t  x  \n",
]

CHATS = [
    [{"role": "user", "content": "What is the capital of France?"}],
    [{"role": "system", "content": "You are terse."},
     {"role": "user", "content": "Say hi."},
     {"role": "assistant", "content": "Hi."},
     {"role": "user", "content": "Again, in \u65e5\u672c\u8a9e \U0001F600"}],
]

LOGIT_PROMPTS = [
    # English prose.
    "The history of the printing press begins in the fifteenth century, when Johannes "
    "Gutenberg combined movable metal type, oil-based ink and a wooden screw press. Within "
    "a few decades, printing shops had spread across Europe, books became cheaper, and "
    "literacy slowly began to rise among merchants and craftsmen. Pamphlets, newspapers and "
    "scientific journals followed, changing how ideas travelled between cities and "
    "how quickly new discoveries could be shared, debated and improved.",
    # Source code.
    "def quicksort(items):\n    \"\"\"Return a sorted copy of items.\"\"\"\n"
    "    if len(items) <= 1:\n        return list(items)\n    pivot = items[len(items) // 2]\n"
    "    left = [x for x in items if x < pivot]\n    middle = [x for x in items if x == pivot]\n"
    "    right = [x for x in items if x > pivot]\n    return quicksort(left) + middle + quicksort(right)\n",
    # Digits and arithmetic.
    "Compute the following: 17 + 25 = 42. 123 * 4 = 492. 1000 - 1 = 999. The square root of "
    "144 is 12, and 2 to the power of 10 is 1024. In 2023 the population was 8,045,311,447 "
    "people, up from 7,975,105,156 in 2022.",
    # Mixed scripts.
    "Bonjour! Je m'appelle Claire et j'habite \u00e0 Paris. \u4f60\u597d\uff0c\u6211\u53eb\u674e\u660e\u3002 "
    "\u3053\u3093\u306b\u3061\u306f\u3001\u4e16\u754c\u3002 \u041f\u0440\u0438\u0432\u0435\u0442, "
    "\u043a\u0430\u043a \u0434\u0435\u043b\u0430? Hola, \u00bfqu\u00e9 tal? Emoji: \U0001F600\U0001F30D\U0001F680. "
    "Thanks for reading this multilingual sample text.",
    # ChatML (tokenized with special=True).
    "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face"
    "<|im_end|>\n<|im_start|>user\nWhat is the boiling point of water at sea level?<|im_end|>\n"
    "<|im_start|>assistant\nAt sea level, water boils at 100 degrees Celsius (212 degrees "
    "Fahrenheit).<|im_end|>\n<|im_start|>user\nExplain in two sentences why the sky is blue, "
    "and mention Rayleigh scattering by name.<|im_end|>\n<|im_start|>assistant\n",
]

# Code points for the seeded random texts: every whitespace kind, letters and numbers of
# several categories (Lu/Ll/Lo/Lm, Nd/Nl/No), marks, punctuation, symbols, emoji parts,
# format characters and an unassigned code point.
RANDOM_ALPHABET = (
    list("aZ09 '.,!?-_/") + ["'s", "'ll", "'M"] +
    ["\t", "\n", "\r", "\x0b", "\x0c", "\x85", "\xa0", "\u1680", "\u2000", "\u2009",
     "\u2028", "\u2029", "\u202f", "\u205f", "\u3000", "\u180e", "\u200b", "\x1c"] +
    ["\u00e9", "\u00df", "\u0130", "\u02b0", "\u05d0", "\u0627", "\u0915", "\u093f",
     "\u0301", "\u0e01", "\u4e00", "\u3042", "\uac00", "\U00020000", "\u16ee", "\u2163",
     "\u00b2", "\u00bd", "\u0663", "\uff11", "\U0001d7ce", "\u00a7", "\u2014", "\u20ac",
     "\u2764", "\ufe0f", "\u200d", "\U0001f600", "\U0001f1eb", "\U0001f3fd", "\ue000",
     "\U000e0041", "\u0378", "\U0001fae8"])
N_RANDOM_TEXTS = 120

N_POSITIONS = 64
TOP_K = 20


def load(model, **kw):
    from llama_cpp import Llama
    return Llama(model_path=model, verbose=False, **kw)


def chat_template(model):
    from gguf import GGUFReader
    f = GGUFReader(model).fields["tokenizer.chat_template"]
    return bytes(f.parts[f.data[0]]).decode("utf-8")


def write_json_lines(doc, out):
    """JSON with one line per list element of each top-level list (diff-friendly)."""
    parts = []
    for key, value in doc.items():
        if isinstance(value, list):
            items = ",\n  ".join(json.dumps(v, ensure_ascii=False) for v in value)
            parts.append(f" {json.dumps(key)}: [\n  {items}\n ]")
        else:
            parts.append(f" {json.dumps(key)}: {json.dumps(value, ensure_ascii=False)}")
    with open(out, "w", encoding="utf-8") as fh:
        fh.write("{\n" + ",\n".join(parts) + "\n}\n")
    json.load(open(out, encoding="utf-8"))  # round-trip check


def detokenize(llm, ids):
    """llama_token_to_piece per token (special=False), concatenated.

    Not Llama.detokenize: llama-cpp-python uses a fixed 32-byte buffer there and silently
    drops longer pieces (e.g. a newline followed by 33 spaces is one SmolLM2 token)."""
    import ctypes
    import llama_cpp
    vocab = llm._model.vocab
    out = b""
    for tok in ids:
        size = 64
        while True:
            buf = ctypes.create_string_buffer(size)
            n = llama_cpp.llama_token_to_piece(vocab, llama_cpp.llama_token(tok), buf, size,
                                               0, False)
            if n < 0:
                size = -n
                continue
            out += buf.raw[:n]
            break
    return out


def make_tokenizer_golden(model, out):
    import jinja2
    llm = load(model, vocab_only=True)
    entries = []
    texts = list(TEXTS)
    # One long real-world text (Debian ships it everywhere; stored inline in the golden).
    with open("/usr/share/common-licenses/Apache-2.0", encoding="utf-8") as fh:
        texts.append(fh.read())
    rng = random.Random(1234)
    for _ in range(N_RANDOM_TEXTS):
        texts.append("".join(rng.choice(RANDOM_ALPHABET) for _ in range(rng.randint(1, 24))))
    for text in texts:
        ids = llm.tokenize(text.encode("utf-8"), add_bos=False, special=False)
        detok = detokenize(llm, ids).decode("utf-8")
        if detok != text:
            print(f"note: detokenization differs for {text!r}: {detok!r}", file=sys.stderr)
        entries.append({"text": text, "ids": ids, "detokenized": detok})
    template = jinja2.Environment().from_string(chat_template(model))
    chats = []
    for messages in CHATS:
        rendered = template.render(messages=messages, add_generation_prompt=True)
        ids = llm.tokenize(rendered.encode("utf-8"), add_bos=False, special=True)
        chats.append({"messages": messages, "add_generation_prompt": True,
                      "rendered": rendered, "ids": ids})
    doc = {
        "source": "llama.cpp via llama-cpp-python "
                  + __import__("llama_cpp").__version__,
        "model": os.path.basename(model),
        "texts": entries,
        "chats": chats,
    }
    write_json_lines(doc, out)
    print(f"wrote {out}: {len(entries)} texts, {len(chats)} chats")


def make_logits_golden(model, out):
    import numpy as np
    llm = load(model, logits_all=True, n_ctx=512, n_threads=2, seed=0)
    prompts = []
    for text in LOGIT_PROMPTS:
        special = text.startswith("<|im_start|>")
        tokens = llm.tokenize(text.encode("utf-8"), add_bos=False, special=special)
        if len(tokens) < N_POSITIONS:
            raise SystemExit(f"prompt has only {len(tokens)} tokens (< {N_POSITIONS}): {text!r}")
        llm.reset()
        llm.eval(tokens)
        scores = np.asarray(llm.scores[: llm.n_tokens], dtype=np.float32)
        assert scores.shape[0] == len(tokens), scores.shape
        assert np.isfinite(scores).all()
        positions = []
        for pos in range(N_POSITIONS):
            row = scores[pos]
            top = np.argsort(-row, kind="stable")[:TOP_K]
            positions.append({"top_ids": [int(i) for i in top],
                              "top_logits": [round(float(row[i]), 5) for i in top]})
        prompts.append({"text": text, "special": special, "tokens": tokens,
                        "positions": positions})
    doc = {
        "source": "llama.cpp via llama-cpp-python "
                  + __import__("llama_cpp").__version__,
        "model": os.path.basename(model),
        "settings": {"logits_all": True, "n_ctx": 512, "n_threads": 2, "seed": 0,
                     "add_bos": False},
        "n_positions": N_POSITIONS,
        "top_k": TOP_K,
        "prompts": prompts,
    }
    write_json_lines(doc, out)
    print(f"wrote {out}: {len(prompts)} prompts")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=DEFAULT_MODEL)
    ap.add_argument("--logits", action="store_true", help="write the logit golden instead")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    golden = os.path.join(REPO, "tests", "golden")
    os.makedirs(golden, exist_ok=True)
    if args.logits:
        make_logits_golden(args.model, args.out or os.path.join(golden, "logits_smollm2.json"))
    else:
        make_tokenizer_golden(args.model,
                              args.out or os.path.join(golden, "tokenizer_ids.json"))


if __name__ == "__main__":
    main()
