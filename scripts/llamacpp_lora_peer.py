#!/usr/bin/env python3
"""A multi-LoRA peer for scripts/bench_serving.sh: llama.cpp (through llama-cpp-python's
low-level API) serving loom.v1.Inference/Generate over gRPC, so the very same loom-bench
binary, request stream (seed, arrivals, adapters, prompts, lengths) and timing code drive
both Loom and this peer.

What it does, exactly (llama-server's multi-LoRA rule, reimplemented in Python):
  * One llama.cpp model and ONE context with --slots sequences (n_seq_max), a per-sequence
    KV stream of --ctx_per_slot cells (kv_unified = false unless --kv_unified), n_batch = n_ubatch =
    --batch_tokens, --threads CPU threads. Every adapter (GGUF-LoRA) is loaded once at
    start with llama_adapter_lora_init and kept in memory.
  * llama.cpp applies LoRA adapters to a whole context, not to a sequence, so one
    llama_decode call can only serve requests of ONE adapter. This is the rule
    llama-server follows (a slot joins the batch only if its LoRA set equals the first
    slot's). Each engine step: admit waiting requests into free slots (FCFS); pick the
    adapter of the oldest active request; llama_set_adapters_lora(ctx, [that adapter],
    scale 1) (a no-op when unchanged); build one batch holding one decode token of every
    active request of that adapter, then prompt chunks of that adapter's requests still
    in prefill, up to --batch_tokens tokens; llama_decode; argmax (greedy; a plain
    softmax draw when temperature > 0) for every sequence that produced logits; stream
    each new token as its own GenerateResponse. Requests of other adapters wait.
  * A cancelled or expired RPC frees its slot at the next step.
  * Prompt text is tokenized with llama_tokenize(add_special=False, parse_special=False),
    like Loom's raw-text prompts. ignore_eos and max_tokens behave as in Loom.
Not supported (INVALID_ARGUMENT): chat prompts, stop strings, logprobs, sampling beyond
temperature. Loopback only.

Needs python packages llama_cpp, grpc and protobuf and the loom.v1 Python stubs
(clients/python/gen_stubs.sh OUT_DIR; pass --stubs OUT_DIR). When this interpreter has no
grpc module, Debian's python3-grpcio in /usr/lib/python3/dist-packages is used.

  llamacpp_lora_peer.py --model M.gguf --port 50061 --stubs DIR \
      --adapter adapter-0=/tmp/a0.gguf --adapter adapter-1=/tmp/a1.gguf ...
"""
import argparse
import codecs
import collections
import ctypes
import faulthandler
import os
import queue
import signal
import sys
import threading
import time

try:
    import grpc
except ImportError:  # Debian's python3-grpcio (built for the same CPython 3.11 ABI)
    sys.path.append("/usr/lib/python3/dist-packages")
    import grpc

import numpy as np

import llama_cpp


@llama_cpp.llama_log_callback
def _quiet_log(level, text, user_data):
    pass


class Req:
    """One Generate call. The engine thread owns every field but `cancelled`."""

    def __init__(self, arrival, ids, max_tokens, ignore_eos, adapter, temperature, seed):
        self.arrival = arrival
        self.ids = ids
        self.max_tokens = max_tokens
        self.ignore_eos = ignore_eos
        self.adapter = adapter  # adapter id or "" for the base model
        self.temperature = temperature
        self.rng = np.random.default_rng(seed)
        self.out = queue.Queue()  # (token, done_reason or None) or ("error", msg)
        self.cancelled = False
        self.slot = -1
        self.fed = 0  # prompt tokens already decoded
        self.n_past = 0
        self.generated = 0
        self.last = -1  # last generated token, fed at the next step


class Engine:
    def __init__(self, args, adapters):
        if not args.verbose:
            llama_cpp.llama_log_set(_quiet_log, ctypes.c_void_p(0))
        llama_cpp.llama_backend_init()
        mp = llama_cpp.llama_model_default_params()
        mp.n_gpu_layers = 0
        self.model = llama_cpp.llama_model_load_from_file(args.model.encode(), mp)
        if not self.model:
            raise RuntimeError(f"cannot load {args.model}")
        self.vocab = llama_cpp.llama_model_get_vocab(self.model)
        self.n_vocab = llama_cpp.llama_vocab_n_tokens(self.vocab)
        cp = llama_cpp.llama_context_default_params()
        cp.n_seq_max = args.slots
        cp.n_ctx = args.slots * args.ctx_per_slot
        cp.n_batch = args.batch_tokens
        cp.n_ubatch = args.batch_tokens
        cp.n_threads = args.threads
        cp.n_threads_batch = args.threads
        cp.kv_unified = args.kv_unified
        cp.no_perf = True
        self.ctx = llama_cpp.llama_init_from_model(self.model, cp)
        if not self.ctx:
            raise RuntimeError("cannot create the llama.cpp context")
        self.mem = llama_cpp.llama_get_memory(self.ctx)
        self.ctx_per_slot = args.ctx_per_slot
        self.budget = args.batch_tokens
        self.batch = llama_cpp.llama_batch_init(max(args.batch_tokens, args.slots), 0, 1)
        self.adapters = {}
        for aid, path in adapters:
            a = llama_cpp.llama_adapter_lora_init(self.model, path.encode())
            if not a:
                raise RuntimeError(f"cannot load adapter {aid} from {path}")
            self.adapters[aid] = a
        self.current = None  # adapter id applied to the context
        self.free_slots = list(range(args.slots))
        self.active = []
        self.waiting = collections.deque()
        self.incoming = queue.Queue()
        self.stop = False
        self.steps = 0
        self.adapter_switches = 0
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def tokenize(self, text):
        data = text.encode()
        buf = (llama_cpp.llama_token * (len(data) + 8))()
        n = llama_cpp.llama_tokenize(self.vocab, data, len(data), buf, len(buf), False, False)
        if n < 0:
            raise ValueError("tokenization failed")
        return list(buf[:n])

    def piece(self, tok):
        buf = ctypes.create_string_buffer(64)
        n = llama_cpp.llama_token_to_piece(self.vocab, tok, buf, 64, 0, False)
        return buf.raw[:max(n, 0)]

    def _apply(self, aid):
        if aid == self.current:
            return
        if aid:
            arr = (llama_cpp.llama_adapter_lora_p_ctypes * 1)(self.adapters[aid])
            scales = (ctypes.c_float * 1)(1.0)
            rc = llama_cpp.llama_set_adapters_lora(self.ctx, arr, 1, scales)
        else:
            rc = llama_cpp.llama_set_adapters_lora(self.ctx, None, 0, None)
        if rc != 0:
            raise RuntimeError(f"llama_set_adapters_lora returned {rc}")
        self.current = aid
        self.adapter_switches += 1

    def _release(self, r):
        if r.slot >= 0:
            llama_cpp.llama_memory_seq_rm(self.mem, r.slot, -1, -1)
            self.free_slots.append(r.slot)
            r.slot = -1

    def _loop(self):
        while not self.stop:
            # Take new requests; block only when there is nothing to run.
            block = not self.active and not self.waiting
            try:
                while True:
                    r = self.incoming.get(block=block, timeout=0.2 if block else None)
                    self.waiting.append(r)
                    block = False
            except queue.Empty:
                pass
            # Drop cancelled requests, admit waiting ones FCFS.
            for r in [r for r in self.active if r.cancelled]:
                self.active.remove(r)
                self._release(r)
            self.waiting = collections.deque(r for r in self.waiting if not r.cancelled)
            while self.waiting and self.free_slots:
                r = self.waiting.popleft()
                r.slot = self.free_slots.pop(0)
                self.active.append(r)
            if not self.active:
                continue
            # One adapter per llama_decode: the oldest active request's.
            aid = min(self.active, key=lambda r: r.arrival).adapter
            group = [r for r in self.active if r.adapter == aid]
            entries = []  # (token, pos, seq, want_logits, req)
            for r in group:  # decode tokens first (llama-server does too)
                if r.fed == len(r.ids) and r.generated > 0:
                    entries.append((r.last, r.n_past, r.slot, True, r))
            for r in group:  # then prompt chunks
                if r.fed < len(r.ids) and len(entries) < self.budget:
                    take = min(len(r.ids) - r.fed, self.budget - len(entries))
                    for j in range(take):
                        last = r.fed + j == len(r.ids) - 1
                        entries.append((r.ids[r.fed + j], r.fed + j, r.slot, last, r))
            try:
                self._apply(aid)
                rows = self._decode(entries)
            except Exception as e:  # fail the group, keep serving
                for r in group:
                    r.out.put(("error", str(e)))
                    self.active.remove(r)
                    self._release(r)
                continue
            self.steps += 1
            # Advance prompt / decode positions.
            for tok, pos, seq, want, r in entries:
                if r.fed < len(r.ids):
                    r.fed += 1
                r.n_past = pos + 1
            for r, row in rows:
                tok = self._sample(r, row)
                r.generated += 1
                r.last = tok
                eog = llama_cpp.llama_vocab_is_eog(self.vocab, tok)
                reason = None
                if eog and not r.ignore_eos:
                    reason = "stop"
                elif r.generated >= r.max_tokens or r.n_past + 1 >= self.ctx_per_slot:
                    reason = "length"
                r.out.put((tok, reason))
                if reason:
                    self.active.remove(r)
                    self._release(r)

    def _decode(self, entries):
        b = self.batch
        rows = []
        for i, (tok, pos, seq, want, r) in enumerate(entries):
            b.token[i] = tok
            b.pos[i] = pos
            b.n_seq_id[i] = 1
            b.seq_id[i][0] = seq
            b.logits[i] = 1 if want else 0
            if want:
                rows.append((r, i))
        b.n_tokens = len(entries)
        rc = llama_cpp.llama_decode(self.ctx, b)
        if rc != 0:
            raise RuntimeError(f"llama_decode returned {rc}")
        return rows

    def _sample(self, r, row):
        p = llama_cpp.llama_get_logits_ith(self.ctx, row)
        logits = np.ctypeslib.as_array(p, shape=(self.n_vocab,))
        if r.temperature <= 0:
            return int(np.argmax(logits))
        z = logits.astype(np.float64) / r.temperature
        z = np.exp(z - z.max())
        return int(r.rng.choice(self.n_vocab, p=z / z.sum()))


def make_servicer(engine, pb, pb_grpc, args):
    class Inference(pb_grpc.InferenceServicer):
        def Generate(self, request, context):
            which = request.WhichOneof("prompt")
            if which != "text" and which != "token_ids":
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, "peer supports text / token_ids only")
            if request.stop or request.logprobs or request.top_logprobs:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, "peer: no stop / logprobs")
            aid = request.adapter_id
            if aid and aid not in engine.adapters:
                context.abort(grpc.StatusCode.NOT_FOUND, f"adapter_id '{aid}' is not loaded")
            ids = engine.tokenize(request.text) if which == "text" else list(request.token_ids.ids)
            max_tokens = request.max_tokens or 256
            if not ids or len(ids) + max_tokens > args.ctx_per_slot:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                              f"prompt {len(ids)} + max_tokens {max_tokens} > {args.ctx_per_slot}")
            s = request.sampling
            r = Req(time.monotonic(), ids, max_tokens, request.ignore_eos, aid,
                    s.temperature, s.seed if s.HasField("seed") else None)

            def on_done():
                r.cancelled = True

            context.add_callback(on_done)
            engine.incoming.put(r)
            dec = codecs.getincrementaldecoder("utf-8")("replace")
            n = 0
            while True:
                try:
                    item = r.out.get(timeout=0.5)
                except queue.Empty:
                    if not context.is_active():
                        r.cancelled = True
                        return
                    continue
                if item[0] == "error":
                    context.abort(grpc.StatusCode.INTERNAL, item[1])
                tok, reason = item
                n += 1
                msg = pb.GenerateResponse(token_ids=[tok], text=dec.decode(engine.piece(tok)))
                if reason:
                    msg.text += dec.decode(b"", final=True)
                    msg.finish_reason = (pb.FINISH_REASON_STOP if reason == "stop"
                                         else pb.FINISH_REASON_LENGTH)
                    msg.usage.prompt_tokens = len(ids)
                    msg.usage.completion_tokens = n
                    yield msg
                    return
                yield msg

        def ListModels(self, request, context):
            out = pb.ListModelsResponse()
            out.models.add(id=os.path.basename(args.model), kind=pb.ModelInfo.KIND_BASE,
                           max_context=args.ctx_per_slot, ready=True)
            for aid in sorted(engine.adapters):
                out.models.add(id=aid, kind=pb.ModelInfo.KIND_ADAPTER, ready=True,
                               max_context=args.ctx_per_slot)
            return out

    return Inference()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--adapter", action="append", default=[], help="id=path.gguf (repeatable)")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--stubs", required=True, help="folder holding loom/v1/*_pb2*.py")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--slots", type=int, default=64)
    ap.add_argument("--ctx_per_slot", type=int, default=256)
    ap.add_argument("--batch_tokens", type=int, default=512)
    ap.add_argument("--rpc_threads", type=int, default=512)
    ap.add_argument("--kv_unified", action="store_true",
                    help="one KV buffer for all slots (default: one stream per slot)")
    ap.add_argument("--verbose", action="store_true", help="keep llama.cpp's log")
    args = ap.parse_args()
    if args.host not in ("127.0.0.1", "localhost", "::1"):
        ap.error("loopback only")
    sys.path.insert(0, args.stubs)
    from loom.v1 import inference_pb2 as pb
    from loom.v1 import inference_pb2_grpc as pb_grpc

    adapters = []
    for item in args.adapter:
        aid, _, path = item.partition("=")
        if not aid or not path:
            ap.error(f"--adapter {item}: expected id=path")
        adapters.append((aid, path))
    t0 = time.monotonic()
    engine = Engine(args, adapters)
    from concurrent import futures
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=args.rpc_threads),
                         maximum_concurrent_rpcs=args.rpc_threads)
    pb_grpc.add_InferenceServicer_to_server(make_servicer(engine, pb, pb_grpc, args), server)
    server.add_insecure_port(f"{args.host}:{args.port}")
    server.start()
    print(f"peer: llama.cpp {llama_cpp.__version__}, {len(adapters)} adapters, "
          f"{args.slots} slots, {args.threads} threads, ready in {time.monotonic() - t0:.1f} s "
          f"on {args.host}:{args.port}", flush=True)
    faulthandler.register(signal.SIGUSR1)  # kill -USR1 PID: dump every thread's stack
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *a: done.set())
    signal.signal(signal.SIGINT, lambda *a: done.set())
    while not done.wait(1.0):
        pass
    server.stop(2).wait()
    engine.stop = True
    print(f"peer: stopped after {engine.steps} steps, {engine.adapter_switches} adapter switches",
          flush=True)
    os._exit(0)


if __name__ == "__main__":
    main()
