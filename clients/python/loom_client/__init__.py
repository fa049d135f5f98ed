"""Python client for Loom (loom.v1 gRPC API).

    from loom_client import Client
    with Client("127.0.0.1:50051") as c:
        for delta in c.generate("Once upon a time", max_tokens=32):
            print(delta.text, end="", flush=True)
"""
from loom_client.client import (  # noqa: F401
    Client,
    Completion,
    Delta,
    LoomError,
    TokenLogprob,
)

__all__ = ["Client", "Completion", "Delta", "LoomError", "TokenLogprob"]
