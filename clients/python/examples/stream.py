#!/usr/bin/env python3
"""Streams a completion from loomd and prints it as it arrives.

    clients/python/gen_stubs.sh
    PYTHONPATH=clients/python python3 clients/python/examples/stream.py \
        --addr 127.0.0.1:50051 --adapter my-adapter "Write a haiku about autumn."
"""
import argparse
import sys
import time

from loom_client import Client, LoomError


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("prompt")
    p.add_argument("--addr", default="127.0.0.1:50051")
    p.add_argument("--adapter", default="", help="adapter id (default: the base model)")
    p.add_argument("--max-tokens", type=int, default=128)
    p.add_argument("--temperature", type=float, default=0.0)
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--raw", action="store_true",
                   help="send the prompt as raw text instead of a chat user turn")
    p.add_argument("--token-file", default=None)
    args = p.parse_args()

    prompt = dict(prompt=args.prompt) if args.raw else dict(chat=[("user", args.prompt)])
    start = time.monotonic()
    first = None
    try:
        with Client(args.addr, token_file=args.token_file) as client:
            for delta in client.generate(adapter_id=args.adapter, max_tokens=args.max_tokens,
                                         temperature=args.temperature, seed=args.seed,
                                         **prompt):
                if first is None and delta.token_ids:
                    first = time.monotonic() - start
                sys.stdout.write(delta.text)
                sys.stdout.flush()
                if delta.finish_reason:
                    print("\n[finish=%s prompt_tokens=%d completion_tokens=%d ttft=%.0f ms "
                          "total=%.2f s]" % (delta.finish_reason, delta.prompt_tokens,
                                              delta.completion_tokens, 1000 * (first or 0),
                                              time.monotonic() - start), file=sys.stderr)
    except LoomError as e:
        print("\nerror: %s" % e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
