"""loom_client against an in-process fake server (no loomd needed).

    clients/python/gen_stubs.sh && PYTHONPATH=clients/python python3 -m unittest discover -s clients/python/tests
"""
import os
import sys
import threading
import unittest
from concurrent import futures

import grpc

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from loom.v1 import admin_pb2, admin_pb2_grpc, inference_pb2, inference_pb2_grpc  # noqa: E402
from loom_client import Client, LoomError  # noqa: E402
from loom_client import _health  # noqa: E402


class FakeInference(inference_pb2_grpc.InferenceServicer):
    """Echoes the prompt one character per message (token id = code point)."""

    def __init__(self):
        self.last_request = None
        self.last_metadata = {}
        self.cancelled = threading.Event()

    def Generate(self, request, context):
        self.last_request = request
        self.last_metadata = dict(context.invocation_metadata())
        context.add_callback(self.cancelled.set)
        if request.adapter_id == "missing":
            context.abort(grpc.StatusCode.NOT_FOUND, "unknown adapter 'missing'")
        if request.WhichOneof("prompt") == "chat":
            text = "|".join("%s:%s" % (m.role, m.content) for m in request.chat.messages)
        elif request.WhichOneof("prompt") == "token_ids":
            text = "".join(chr(i) for i in request.token_ids.ids)
        else:
            text = request.text
        for ch in text:
            m = inference_pb2.GenerateResponse(text=ch, token_ids=[ord(ch)])
            if request.top_logprobs:
                lp = m.logprobs.add(token_id=ord(ch), logprob=-0.5)
                lp.top.add(token_id=ord(ch), logprob=-0.5)
            yield m
        yield inference_pb2.GenerateResponse(
            finish_reason=inference_pb2.FINISH_REASON_LENGTH,
            usage=inference_pb2.Usage(prompt_tokens=len(text), completion_tokens=len(text)))

    def Tokenize(self, request, context):
        return inference_pb2.TokenizeResponse(token_ids=[ord(c) for c in request.text])


class FakeAdmin(admin_pb2_grpc.AdminServicer):
    def LoadAdapter(self, request, context):
        if not request.source:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "source: empty")
        return admin_pb2.LoadAdapterResponse(adapter=admin_pb2.AdapterInfo(
            id=request.id, source=request.source, pinned=request.pin,
            state=admin_pb2.ADAPTER_STATE_READY))

    def UnloadAdapter(self, request, context):
        return admin_pb2.UnloadAdapterResponse(draining_requests=2)


def _health_handler():
    def check(request_bytes, context):
        service = _health.decode_request(request_bytes)
        if service not in ("", "loom.v1.Inference"):
            context.abort(grpc.StatusCode.NOT_FOUND, "unknown service")
        return _health.encode_response(1)

    return grpc.method_handlers_generic_handler("grpc.health.v1.Health", {
        "Check": grpc.unary_unary_rpc_method_handler(check),
    })


class ClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.inference = FakeInference()
        cls.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        inference_pb2_grpc.add_InferenceServicer_to_server(cls.inference, cls.server)
        admin_pb2_grpc.add_AdminServicer_to_server(FakeAdmin(), cls.server)
        cls.server.add_generic_rpc_handlers((_health_handler(),))
        port = cls.server.add_insecure_port("127.0.0.1:0")
        cls.server.start()
        cls.target = "127.0.0.1:%d" % port
        cls.client = Client(cls.target, admin_target=cls.target, token="s3cret", timeout=10)

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        cls.server.stop(None)

    def test_generate_streams_deltas_and_final(self):
        deltas = list(self.client.generate("héllo", max_tokens=5, seed=0, top_logprobs=2))
        self.assertEqual("".join(d.text for d in deltas), "héllo")
        self.assertEqual([d.finish_reason for d in deltas[:-1]], [None] * 5)
        self.assertEqual(deltas[-1].finish_reason, "length")
        self.assertEqual(deltas[-1].completion_tokens, 5)
        self.assertEqual(deltas[0].logprobs[0].top, [(ord("h"), -0.5)])
        req = self.inference.last_request
        self.assertTrue(req.sampling.HasField("seed"))  # seed=0 is sent as present
        self.assertFalse(req.sampling.HasField("top_p"))
        self.assertEqual(req.max_tokens, 5)
        self.assertEqual(self.inference.last_metadata.get("authorization"), "Bearer s3cret")

    def test_chat_and_token_ids_prompts(self):
        c = self.client.generate_text(chat=[("system", "be brief"), {"role": "user", "content": "hi"}])
        self.assertEqual(c.text, "system:be brief|user:hi")
        self.assertEqual(self.client.generate_text(token_ids=[65, 66]).text, "AB")
        with self.assertRaises(ValueError):
            self.client.build_request("x", token_ids=[1])

    def test_errors_raise_loom_error_with_code(self):
        with self.assertRaises(LoomError) as cm:
            list(self.client.generate("x", adapter_id="missing"))
        self.assertEqual(cm.exception.code, "NOT_FOUND")
        self.assertEqual(cm.exception.message, "unknown adapter 'missing'")
        with self.assertRaises(LoomError) as cm:
            self.client.load_adapter("a", "")
        self.assertEqual(cm.exception.code, "INVALID_ARGUMENT")
        with self.assertRaises(LoomError) as cm:
            self.client.get_status()  # not implemented by the fake
        self.assertEqual(cm.exception.code, "UNIMPLEMENTED")

    def test_closing_the_iterator_cancels(self):
        self.inference.cancelled.clear()
        it = self.client.generate("z" * 10000)
        next(it)
        it.close()
        self.assertTrue(self.inference.cancelled.wait(10))

    def test_tokenize_admin_health(self):
        self.assertEqual(self.client.tokenize("AB"), [65, 66])
        a = self.client.load_adapter("t1", "/a/b", pin=True)
        self.assertEqual((a.id, a.source, a.pinned), ("t1", "/a/b", True))
        self.assertEqual(self.client.unload_adapter("t1"), 2)
        self.assertEqual(self.client.health(), "SERVING")
        with self.assertRaises(LoomError) as cm:
            self.client.health("nope")
        self.assertEqual(cm.exception.code, "NOT_FOUND")


class HealthCodecTest(unittest.TestCase):
    def test_round_trip_and_wire_bytes(self):
        # Field 1, wire type 2 (0x0a), length 17, then the name.
        self.assertEqual(_health.encode_request("loom.v1.Inference"), b"\x0a\x11loom.v1.Inference")
        self.assertEqual(_health.decode_request(_health.encode_request("x" * 300)), "x" * 300)
        self.assertEqual(_health.encode_response(2), b"\x08\x02")
        self.assertEqual(_health.decode_response(b""), 0)
        # Unknown fields (e.g. a future string field 2) are skipped.
        self.assertEqual(_health.decode_response(b"\x12\x01z\x08\x01"), 1)


if __name__ == "__main__":
    unittest.main()
