#!/usr/bin/python3
"""The official `openai` Python package (PyPI, unmodified) against loomd's OpenAI API, in
the single role and in the router role (a router over one worker): chat and completions,
streamed and not, base model and an adapter loaded on first use, n=2, logprobs in both
shapes, /v1/models, and the refusals by HTTP status: a bad model (404 model_not_found),
a bad field (400 naming it), a wrong key (401), an adapter outside the tenant's patterns
(403) and a token-rate limit (429 with Retry-After). Both roles must give the same greedy
text for the same request.

usage: openai_sdk_test.py LOOMD MAKE_TEST_ADAPTER   (LOOM_MODEL: the base model)
"""
import os
import sys
import time
import unittest

import loomd_harness as h

try:
    import openai
except ImportError:  # install_deps.sh installs it; say so rather than fail obscurely
    print("SKIP: the openai package is not installed (scripts/install_deps.sh)")
    sys.exit(0)

LOOMD, MAKE_ADAPTER = sys.argv[1], sys.argv[2]
BASE = "SmolLM2-135M-Instruct"
KEY, SLOW_KEY = "sk-acme-test-0001", "sk-slow-test-0001"
CHAT = [{"role": "user", "content": "What is the capital of France?"}]
PROMPT = "The three primary colors are"


def setUpModule():
    global ROOT, KEYS
    ROOT = h.scratch_dir("adapters")
    h.make_adapter(MAKE_ADAPTER, os.path.join(ROOT, "tenant-a"), 1)
    h.make_adapter(MAKE_ADAPTER, os.path.join(ROOT, "other-b"), 2)
    KEYS = os.path.join(h.scratch_dir("keys"), "api_keys.json")
    h.write_keys(KEYS, {"acme": {"keys": [KEY], "adapters": ["tenant-*"]},
                        "slow": {"keys": [SLOW_KEY], "tokens_per_minute": 30}})


class Role:
    """The assertions, run once per role; `texts` collects greedy texts to compare."""

    procs = []
    texts = {}

    @classmethod
    def tearDownClass(cls):
        codes = [p.stop() for p in cls.procs]
        assert codes == [0] * len(codes), "loomd exit codes %s" % codes

    def client(self, key=KEY):
        return openai.OpenAI(base_url="http://127.0.0.1:%d/v1" % self.procs[0].http,
                             api_key=key, max_retries=0, timeout=120)

    def test_chat_streamed_equals_whole(self):
        c = self.client()
        whole = c.chat.completions.create(model=BASE, messages=CHAT, max_tokens=16,
                                          temperature=0)
        self.assertEqual(whole.object, "chat.completion")
        self.assertEqual(whole.model, BASE)
        text = whole.choices[0].message.content
        self.assertTrue(text)
        self.assertEqual(whole.choices[0].message.role, "assistant")
        self.assertIn(whole.choices[0].finish_reason, ("stop", "length"))
        self.assertEqual(whole.usage.total_tokens,
                         whole.usage.prompt_tokens + whole.usage.completion_tokens)
        chunks = list(c.chat.completions.create(model=BASE, messages=CHAT, max_tokens=16,
                                                temperature=0, stream=True,
                                                stream_options={"include_usage": True}))
        streamed = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
        self.assertEqual(streamed, text)
        self.assertEqual(chunks[0].choices[0].delta.role, "assistant")
        self.assertEqual(chunks[-1].choices, [])
        self.assertEqual(chunks[-1].usage.completion_tokens, whole.usage.completion_tokens)
        self.assertEqual(chunks[-2].choices[0].finish_reason, whole.choices[0].finish_reason)
        self.texts[(self.role, "chat")] = text

    def test_completions_streamed_equals_whole_and_adapter_differs(self):
        c = self.client()
        whole = c.completions.create(model=BASE, prompt=PROMPT, max_tokens=20, temperature=0)
        self.assertEqual(whole.object, "text_completion")
        base_text = whole.choices[0].text
        streamed = "".join(ch.choices[0].text for ch in
                           c.completions.create(model=BASE, prompt=PROMPT, max_tokens=20,
                                                temperature=0, stream=True) if ch.choices)
        self.assertEqual(streamed, base_text)
        # An adapter by `model`, loaded from the adapter roots on first use.
        adapted = c.completions.create(model="tenant-a", prompt=PROMPT, max_tokens=20,
                                       temperature=0, extra_body={"ignore_eos": True})
        self.assertEqual(adapted.model, "tenant-a")
        self.assertEqual(adapted.usage.completion_tokens, 20)
        self.assertNotEqual(adapted.choices[0].text, base_text)
        streamed = "".join(ch.choices[0].text for ch in
                           c.completions.create(model="tenant-a", prompt=PROMPT, max_tokens=20,
                                                temperature=0, stream=True,
                                                extra_body={"ignore_eos": True}) if ch.choices)
        self.assertEqual(streamed, adapted.choices[0].text)
        self.texts[(self.role, "completion")] = base_text
        self.texts[(self.role, "adapter")] = adapted.choices[0].text
        # The loaded adapter is listed, with the base model as its parent (as vLLM does).
        deadline = time.time() + 30
        while True:
            models = {m.id: m for m in c.models.list().data}
            if "tenant-a" in models or time.time() > deadline:
                break
            time.sleep(0.5)
        self.assertIn(BASE, models)
        self.assertIn("tenant-a", models)
        self.assertEqual(getattr(models["tenant-a"], "parent", None), BASE)
        self.assertIsNone(getattr(models[BASE], "parent", "missing"))

    def test_n2_and_sampling_parameters(self):
        c = self.client()
        r = c.chat.completions.create(model=BASE, messages=CHAT, max_tokens=12, n=2,
                                      temperature=1.0, top_p=0.95, seed=5,
                                      frequency_penalty=0.2, presence_penalty=0.1, user="u1",
                                      extra_body={"top_k": 50, "min_p": 0.01,
                                                  "repetition_penalty": 1.05,
                                                  "ignore_eos": True})
        self.assertEqual([ch.index for ch in r.choices], [0, 1])
        a, b = (ch.message.content for ch in r.choices)
        self.assertNotEqual(a, b)  # distinct seeded sampler streams
        self.assertEqual(r.usage.completion_tokens, 24)
        again = c.chat.completions.create(model=BASE, messages=CHAT, max_tokens=12, n=2,
                                          temperature=1.0, top_p=0.95, seed=5,
                                          frequency_penalty=0.2, presence_penalty=0.1,
                                          extra_body={"top_k": 50, "min_p": 0.01,
                                                      "repetition_penalty": 1.05,
                                                      "ignore_eos": True})
        self.assertEqual([ch.message.content for ch in again.choices], [a, b])  # seeded
        stop = c.completions.create(model=BASE, prompt="1, 2, 3, 4, 5,", max_tokens=30,
                                    temperature=0, stop=[" 8"])
        self.assertEqual(stop.choices[0].finish_reason, "stop")
        self.assertNotIn(" 8", stop.choices[0].text)
        self.assertIn("7", stop.choices[0].text)

    def test_logprobs_in_both_shapes(self):
        c = self.client()
        r = c.chat.completions.create(model=BASE, messages=CHAT, max_tokens=6, temperature=0,
                                      logprobs=True, top_logprobs=2)
        content = r.choices[0].logprobs.content
        self.assertEqual(len(content), r.usage.completion_tokens)
        for t in content:
            self.assertLess(t.logprob, 0.0 + 1e-6)
            self.assertEqual(len(t.top_logprobs), 2)
            self.assertEqual(t.top_logprobs[0].logprob, t.logprob)  # greedy: the best
            self.assertEqual(bytes(t.bytes).decode("utf-8", "replace"), t.token)
        r = c.completions.create(model=BASE, prompt=PROMPT, max_tokens=6, temperature=0,
                                 logprobs=2)
        lp = r.choices[0].logprobs
        self.assertEqual(len(lp.tokens), 6)
        self.assertEqual(len(lp.token_logprobs), 6)
        self.assertEqual([len(t) for t in lp.top_logprobs], [2] * 6)
        self.assertEqual("".join(lp.tokens), r.choices[0].text)
        self.assertEqual(lp.text_offset[0], 0)

    def test_refusals_by_status(self):
        c = self.client()
        with self.assertRaises(openai.NotFoundError) as e:
            c.chat.completions.create(model="tenant-missing", messages=CHAT, max_tokens=4)
        self.assertEqual(e.exception.code, "model_not_found")
        with self.assertRaises(openai.BadRequestError) as e:
            c.chat.completions.create(model=BASE, messages=CHAT, max_tokens=4, temperature=300)
        self.assertEqual(e.exception.param, "temperature")
        self.assertIn("temperature", e.exception.message)
        with self.assertRaises(openai.BadRequestError) as e:
            c.completions.create(model=BASE, prompt=PROMPT, max_tokens=100000)
        self.assertEqual(e.exception.param, "max_tokens")
        with self.assertRaises(openai.AuthenticationError):
            self.client(key="sk-wrong-key-0000").chat.completions.create(
                model=BASE, messages=CHAT, max_tokens=4)
        with self.assertRaises(openai.AuthenticationError):
            self.client(key="sk-wrong-key-0000").models.list()
        with self.assertRaises(openai.PermissionDeniedError) as e:
            c.chat.completions.create(model="other-b", messages=CHAT, max_tokens=4)
        self.assertIn("other-b", e.exception.message)

    def test_token_rate_limit(self):
        slow = self.client(key=SLOW_KEY)
        # 30 tokens per minute: one request of ~10 prompt + 32 generated tokens overdraws
        # the bucket; the next is refused until it refills.
        slow.completions.create(model=BASE, prompt="Hi", max_tokens=32, temperature=0,
                                extra_body={"ignore_eos": True})
        with self.assertRaises(openai.RateLimitError) as e:
            slow.completions.create(model=BASE, prompt="Hi", max_tokens=4)
        self.assertGreaterEqual(int(e.exception.response.headers["retry-after"]), 1)
        self.client().completions.create(model=BASE, prompt="Hi", max_tokens=2)  # others go on


class SingleRole(Role, unittest.TestCase):
    role = "single"

    @classmethod
    def setUpClass(cls):
        cls.procs = h.start_single(LOOMD, ["--adapter_roots=" + ROOT, "--api_keys_file=" + KEYS])


class RouterRole(Role, unittest.TestCase):
    role = "router"

    @classmethod
    def setUpClass(cls):
        cls.procs = h.start_router(LOOMD, ["--adapter_roots=" + ROOT, "--threads=1"],
                                   ["--api_keys_file=" + KEYS])


class SameTextInBothRoles(unittest.TestCase):
    def test_greedy_texts_equal(self):
        for kind in ("chat", "completion", "adapter"):
            self.assertIn(("single", kind), Role.texts)
            self.assertEqual(Role.texts[("single", kind)], Role.texts.get(("router", kind)),
                             kind)


if __name__ == "__main__":
    loader = unittest.TestLoader()
    suite = unittest.TestSuite([loader.loadTestsFromTestCase(SingleRole),
                                loader.loadTestsFromTestCase(RouterRole),
                                loader.loadTestsFromTestCase(SameTextInBothRoles)])
    result = unittest.TextTestRunner(verbosity=2).run(suite)
    sys.exit(0 if result.wasSuccessful() else 1)
