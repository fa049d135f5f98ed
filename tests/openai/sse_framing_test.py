#!/usr/bin/python3
"""loomd's server-sent events byte for byte, read with a raw socket (no HTTP library):
status line and headers, chunked transfer encoding, then nothing but `data: <one line of
JSON>\\n\\n` frames ending with exactly `data: [DONE]\\n\\n`, in OpenAI's order (the chat
role chunk, content chunks, the finish chunk, the usage chunk), each chunk the shape
OpenAI documents; the streamed text equals the whole response's. A client that hangs up
mid-stream has its request cancelled (the tenant counter says CANCELLED, and far fewer
tokens were generated than asked for).

usage: sse_framing_test.py LOOMD   (LOOM_MODEL: the base model)
"""
import json
import re
import socket
import sys
import time
import unittest

import loomd_harness as h

LOOMD = sys.argv[1]
BASE = "SmolLM2-135M-Instruct"
FRAME = re.compile(rb"data: ([^\r\n]+)\n\n")


def post(port, path, body, read_all=True):
    """Sends a raw HTTP/1.1 POST; returns the socket (read_all=False) or the raw reply."""
    payload = json.dumps(body).encode()
    s = socket.create_connection(("127.0.0.1", port), timeout=120)
    s.sendall(b"POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
              b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" %
              (path.encode(), len(payload), payload))
    if not read_all:
        return s
    raw = b""
    while True:
        b = s.recv(65536)
        if not b:
            break
        raw += b
    s.close()
    return raw


def split_reply(raw):
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(b": ")
        headers[k.decode().lower()] = v.decode()
    return lines[0].decode(), headers, body


def dechunk(body):
    """Decodes chunked transfer encoding strictly; fails on any stray byte."""
    out, i = b"", 0
    while True:
        j = body.index(b"\r\n", i)
        size = int(body[i:j], 16)
        i = j + 2
        if size == 0:
            assert body[i:] == b"\r\n", "bytes after the last chunk: %r" % body[i:]
            return out
        out += body[i:i + size]
        assert body[i + size:i + size + 2] == b"\r\n", "chunk not followed by CRLF"
        i += size + 2


class SseFramingTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.procs = h.start_single(LOOMD, [])
        cls.port = cls.procs[0].http

    @classmethod
    def tearDownClass(cls):
        assert [p.stop() for p in cls.procs] == [0]

    def events(self, raw):
        status, headers, body = split_reply(raw)
        self.assertEqual(status, "HTTP/1.1 200 OK")
        self.assertEqual(headers.get("content-type"), "text/event-stream")
        self.assertEqual(headers.get("transfer-encoding"), "chunked")
        stream = dechunk(body)
        # Nothing but data frames, and exactly one [DONE] at the very end.
        self.assertTrue(stream.endswith(b"data: [DONE]\n\n"), stream[-80:])
        frames = FRAME.findall(stream)
        self.assertEqual(b"".join(b"data: %s\n\n" % f for f in frames), stream)
        self.assertEqual(frames[-1], b"[DONE]")
        self.assertNotIn(b"[DONE]", b"".join(frames[:-1]))
        return [json.loads(f) for f in frames[:-1]]

    def test_chat_stream_frames_in_openai_order(self):
        req = {"model": BASE, "messages": [{"role": "user", "content": "Name a color."}],
               "max_tokens": 10, "temperature": 0}
        whole = json.loads(split_reply(post(self.port, "/v1/chat/completions", req))[2])
        chunks = self.events(post(self.port, "/v1/chat/completions",
                                  dict(req, stream=True,
                                       stream_options={"include_usage": True})))
        self.assertGreaterEqual(len(chunks), 4)
        for c in chunks:
            self.assertEqual(c["object"], "chat.completion.chunk")
            self.assertEqual(c["model"], BASE)
            self.assertEqual(c["id"], chunks[0]["id"])
            self.assertTrue(c["id"].startswith("chatcmpl-"))
            self.assertEqual(c["created"], chunks[0]["created"])
            self.assertIn("usage", c)
        first, finish, usage = chunks[0], chunks[-2], chunks[-1]
        self.assertEqual(first["choices"][0]["delta"], {"role": "assistant", "content": ""})
        self.assertIsNone(first["choices"][0]["finish_reason"])
        self.assertIsNone(first["usage"])
        text = ""
        for c in chunks[1:-2]:
            self.assertEqual(len(c["choices"]), 1)
            self.assertEqual(set(c["choices"][0]["delta"]), {"content"})
            self.assertIsNone(c["choices"][0]["finish_reason"])
            text += c["choices"][0]["delta"]["content"]
        self.assertEqual(finish["choices"][0]["delta"], {})
        self.assertEqual(finish["choices"][0]["finish_reason"],
                         whole["choices"][0]["finish_reason"])
        self.assertEqual(usage["choices"], [])
        self.assertEqual(usage["usage"], whole["usage"])
        self.assertEqual(text, whole["choices"][0]["message"]["content"])

    def test_completions_stream_frames(self):
        req = {"model": BASE, "prompt": "Once upon a time", "max_tokens": 8, "temperature": 0}
        whole = json.loads(split_reply(post(self.port, "/v1/completions", req))[2])
        chunks = self.events(post(self.port, "/v1/completions", dict(req, stream=True)))
        for c in chunks:
            self.assertEqual(c["object"], "text_completion")
            self.assertNotIn("usage", c)  # only with stream_options.include_usage
        self.assertEqual("".join(c["choices"][0]["text"] for c in chunks),
                         whole["choices"][0]["text"])
        self.assertEqual(chunks[-1]["choices"][0]["finish_reason"], "length")

    def test_errors_before_the_first_token_are_http_errors(self):
        status, headers, body = split_reply(post(self.port, "/v1/chat/completions", {
            "model": "missing-adapter", "messages": [{"role": "user", "content": "x"}],
            "stream": True}))
        self.assertEqual(status, "HTTP/1.1 404 Not Found")
        self.assertEqual(headers.get("content-type"), "application/json")
        self.assertEqual(json.loads(body)["error"]["code"], "model_not_found")
        status, _, body = split_reply(post(self.port, "/v1/completions", {"model": BASE}))
        self.assertEqual(status, "HTTP/1.1 400 Bad Request")
        self.assertEqual(json.loads(body)["error"]["param"], "prompt")

    def test_hanging_up_cancels_the_request(self):
        s = post(self.port, "/v1/completions",
                 {"model": BASE, "prompt": "Count: 1, 2, 3,", "max_tokens": 2000,
                  "stream": True, "ignore_eos": True}, read_all=False)
        got = b""
        while b"data: {" not in got:
            got += s.recv(4096)
        s.close()  # gone after the first frame
        deadline = time.time() + 60
        metrics = ""
        while time.time() < deadline:
            metrics = h.http_get(self.procs[0].metrics, "/metrics")[1]
            if ('loom_tenant_requests_total{code="CANCELLED",tenant="anonymous"} 1' in metrics
                    and "loom_requests_running 0" in metrics):
                break
            time.sleep(0.2)
        self.assertIn('loom_tenant_requests_total{code="CANCELLED",tenant="anonymous"} 1',
                      metrics)
        self.assertIn("loom_requests_running 0", metrics)
        generated = re.search(r'loom_tenant_generation_tokens_total\{tenant="anonymous"\} (\S+)',
                              metrics)
        self.assertIsNotNone(generated)
        self.assertLess(float(generated.group(1)), 500)  # far from the 2000 asked for


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
