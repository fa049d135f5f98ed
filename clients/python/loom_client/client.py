"""Client for loom.v1.Inference (port 50051) and loom.v1.Admin (port 50052)."""
from dataclasses import dataclass, field
from typing import Iterable, Iterator, List, Optional, Sequence, Tuple, Union

import grpc

try:
    from loom.v1 import admin_pb2, admin_pb2_grpc, inference_pb2, inference_pb2_grpc
except ImportError as e:  # pragma: no cover
    raise ImportError(
        "loom.v1 stubs are missing: run clients/python/gen_stubs.sh "
        "(or pip install clients/python)") from e

from loom_client import _health

_FINISH = {
    inference_pb2.FINISH_REASON_STOP: "stop",
    inference_pb2.FINISH_REASON_LENGTH: "length",
}

ChatMessage = Union[Tuple[str, str], dict]


class LoomError(Exception):
    """A failed call: `code` is the gRPC status name (e.g. "NOT_FOUND"), `message` the
    server's message."""

    def __init__(self, code: str, message: str):
        super().__init__("%s: %s" % (code, message))
        self.code = code
        self.message = message

    @classmethod
    def from_rpc_error(cls, err: grpc.RpcError) -> "LoomError":
        code = err.code() if hasattr(err, "code") else grpc.StatusCode.UNKNOWN
        details = err.details() if hasattr(err, "details") else str(err)
        return cls(code.name if code is not None else "UNKNOWN", details or "")


@dataclass
class TokenLogprob:
    token_id: int
    logprob: float
    top: List[Tuple[int, float]] = field(default_factory=list)  # (token id, logprob)


@dataclass
class Delta:
    """One message of a Generate stream. `finish_reason` ("stop" / "length") and the
    token counts are set on the last one only."""
    text: str
    token_ids: List[int]
    logprobs: List[TokenLogprob]
    finish_reason: Optional[str] = None
    prompt_tokens: int = 0
    completion_tokens: int = 0


@dataclass
class Completion:
    text: str
    token_ids: List[int]
    finish_reason: Optional[str]
    prompt_tokens: int
    completion_tokens: int
    logprobs: List[TokenLogprob] = field(default_factory=list)


def _channel(target, tls, tls_ca, tls_cert, tls_key, tls_server_name):
    options = [("grpc.max_receive_message_length", -1)]
    if tls or tls_ca or tls_cert or tls_key:
        if bool(tls_cert) != bool(tls_key):
            raise ValueError("mTLS needs both tls_cert and tls_key")

        def read(path):
            with open(path, "rb") as f:
                return f.read()

        creds = grpc.ssl_channel_credentials(
            root_certificates=read(tls_ca) if tls_ca else None,
            private_key=read(tls_key) if tls_key else None,
            certificate_chain=read(tls_cert) if tls_cert else None)
        if tls_server_name:
            options.append(("grpc.ssl_target_name_override", tls_server_name))
        return grpc.secure_channel(target, creds, options=options)
    return grpc.insecure_channel(target, options=options)


def _chat(messages: Iterable[ChatMessage]):
    chat = inference_pb2.ChatMessages()
    for m in messages:
        role, content = (m["role"], m["content"]) if isinstance(m, dict) else m
        chat.messages.add(role=role, content=content)
    return chat


class Client:
    """Inference calls go to `target`, admin calls to `admin_target`. `token` is sent as
    `authorization: Bearer <token>` with every call. TLS is used when `tls` or any TLS
    file is given. Errors raise LoomError. Usable as a context manager."""

    def __init__(self, target: str = "127.0.0.1:50051", *,
                 admin_target: str = "127.0.0.1:50052",
                 token: Optional[str] = None, token_file: Optional[str] = None,
                 tls: bool = False, tls_ca: Optional[str] = None,
                 tls_cert: Optional[str] = None, tls_key: Optional[str] = None,
                 tls_server_name: Optional[str] = None, timeout: float = 30.0):
        if token_file:
            with open(token_file) as f:
                token = f.read().strip()
        self._metadata = (("authorization", "Bearer " + token),) if token else ()
        self._timeout = timeout
        tls_args = (tls, tls_ca, tls_cert, tls_key, tls_server_name)
        self._channel = _channel(target, *tls_args)
        self._admin_channel = (self._channel if admin_target == target
                               else _channel(admin_target, *tls_args))
        self._inference = inference_pb2_grpc.InferenceStub(self._channel)
        self._admin = admin_pb2_grpc.AdminStub(self._admin_channel)
        self._health = self._channel.unary_unary(
            _health.CHECK_METHOD, request_serializer=_health.encode_request,
            response_deserializer=_health.decode_response)

    # -- lifecycle --
    def close(self) -> None:
        self._channel.close()
        if self._admin_channel is not self._channel:
            self._admin_channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- inference --
    @staticmethod
    def build_request(prompt: Optional[str] = None, *,
                      chat: Optional[Iterable[ChatMessage]] = None,
                      token_ids: Optional[Sequence[int]] = None,
                      adapter_id: str = "", max_tokens: int = 0,
                      temperature: float = 0.0, top_p: Optional[float] = None,
                      top_k: int = 0, min_p: float = 0.0,
                      repetition_penalty: Optional[float] = None,
                      frequency_penalty: float = 0.0, presence_penalty: float = 0.0,
                      penalty_last_n: Optional[int] = None, seed: Optional[int] = None,
                      stop: Sequence[str] = (), ignore_eos: bool = False,
                      logprobs: bool = False, top_logprobs: int = 0
                      ) -> "inference_pb2.GenerateRequest":
        """A GenerateRequest; exactly one of prompt (text), chat ([(role, content)] or
        [{"role", "content"}]) and token_ids must be given."""
        if sum(x is not None for x in (prompt, chat, token_ids)) != 1:
            raise ValueError("give exactly one of prompt, chat, token_ids")
        req = inference_pb2.GenerateRequest(
            adapter_id=adapter_id, max_tokens=max_tokens, stop=list(stop),
            ignore_eos=ignore_eos, logprobs=logprobs, top_logprobs=top_logprobs)
        if prompt is not None:
            req.text = prompt
        elif chat is not None:
            req.chat.CopyFrom(_chat(chat))
        else:
            req.token_ids.ids.extend(token_ids)
        s = req.sampling
        s.temperature = temperature
        s.top_k = top_k
        s.min_p = min_p
        s.frequency_penalty = frequency_penalty
        s.presence_penalty = presence_penalty
        if top_p is not None:
            s.top_p = top_p
        if repetition_penalty is not None:
            s.repetition_penalty = repetition_penalty
        if penalty_last_n is not None:
            s.penalty_last_n = penalty_last_n
        if seed is not None:
            s.seed = seed
        return req

    def generate(self, prompt: Optional[str] = None, *, timeout: Optional[float] = None,
                 **kwargs) -> Iterator[Delta]:
        """Streams Deltas as the server produces them (see build_request for the
        arguments). Closing the iterator early cancels the call. `timeout` bounds the
        whole stream (None = no deadline)."""
        req = self.build_request(prompt, **kwargs)
        return self._stream(req, timeout)

    def _stream(self, req, timeout) -> Iterator[Delta]:
        call = self._inference.Generate(req, timeout=timeout, metadata=self._metadata)
        try:
            for m in call:
                yield _delta(m)
        except grpc.RpcError as e:
            raise LoomError.from_rpc_error(e) from None
        finally:
            call.cancel()  # no-op once the call has finished

    def generate_text(self, prompt: Optional[str] = None, *,
                      timeout: Optional[float] = None, **kwargs) -> Completion:
        """The whole stream collected into one Completion."""
        text, ids, lps = [], [], []
        last = None
        for d in self.generate(prompt, timeout=timeout, **kwargs):
            text.append(d.text)
            ids.extend(d.token_ids)
            lps.extend(d.logprobs)
            last = d
        if last is None or last.finish_reason is None:
            raise LoomError("DATA_LOSS", "Generate stream ended without a final message")
        return Completion("".join(text), ids, last.finish_reason, last.prompt_tokens,
                          last.completion_tokens, lps)

    def tokenize(self, text: Optional[str] = None, *,
                 chat: Optional[Iterable[ChatMessage]] = None) -> List[int]:
        if (text is None) == (chat is None):
            raise ValueError("give exactly one of text, chat")
        req = inference_pb2.TokenizeRequest()
        if text is not None:
            req.text = text
        else:
            req.chat.CopyFrom(_chat(chat))
        return list(self._call(self._inference.Tokenize, req).token_ids)

    def list_models(self):
        """[ModelInfo]: the base model first, then adapters."""
        return list(self._call(self._inference.ListModels,
                               inference_pb2.ListModelsRequest()).models)

    # -- admin --
    def load_adapter(self, adapter_id: str, source: str, pin: bool = False):
        """Loads (or replaces) an adapter; returns its AdapterInfo once READY."""
        req = admin_pb2.LoadAdapterRequest(id=adapter_id, source=source, pin=pin)
        return self._call(self._admin.LoadAdapter, req).adapter

    def unload_adapter(self, adapter_id: str) -> int:
        """Returns how many running requests still drain it (0 = removed now)."""
        req = admin_pb2.UnloadAdapterRequest(id=adapter_id)
        return self._call(self._admin.UnloadAdapter, req).draining_requests

    def list_adapters(self):
        return list(self._call(self._admin.ListAdapters,
                               admin_pb2.ListAdaptersRequest()).adapters)

    def get_status(self):
        return self._call(self._admin.GetStatus, admin_pb2.GetStatusRequest())

    def health(self, service: str = "") -> str:
        """"SERVING", "NOT_SERVING", ... from grpc.health.v1 on the inference channel."""
        status = self._call(self._health, service)
        return _health.STATUS_NAMES.get(status, str(status))

    def _call(self, method, request):
        try:
            return method(request, timeout=self._timeout, metadata=self._metadata)
        except grpc.RpcError as e:
            raise LoomError.from_rpc_error(e) from None


def _delta(m) -> Delta:
    lps = [TokenLogprob(lp.token_id, lp.logprob, [(t.token_id, t.logprob) for t in lp.top])
           for lp in m.logprobs]
    finish = _FINISH.get(m.finish_reason)
    return Delta(m.text, list(m.token_ids), lps, finish,
                 m.usage.prompt_tokens if finish else 0,
                 m.usage.completion_tokens if finish else 0)
