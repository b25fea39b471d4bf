"""The KV transfer (backend `zmq`): the prefill server sends a prompt's KV rows and its first token to the
decode server that preallocated slots for them.

One message, three frames on a PUSH -> PULL pair (prefill connects to the decode server's KVReceiver):
    header  JSON {room, first_token, logprob, num_tokens, num_layers, dtype, shape}
    k       the K rows: raw bytes of a [num_layers, num_tokens, kv_heads, head_dim] tensor
    v       the V rows, the same shape
A JSON header and raw bytes, not pickle: these sockets face the network (pickle runs what its sender names).
The decode side copies the rows into its own slots (which the prefill side never needs to know), so one
message is a whole prompt: SGLang's RDMA backends instead write into the decode's slots directly, layer by
layer.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import torch
import zmq

from minisgl.mem_cache.memory_pool import TokenToKVPool

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def gather_kv(pool: TokenToKVPool, slots: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The K and V rows of `slots`, every layer: two [num_layers, len(slots), kv_heads, head_dim] tensors."""
    return (torch.stack([k[slots] for k in pool.k_buffer]).contiguous(),
            torch.stack([v[slots] for v in pool.v_buffer]).contiguous())


def scatter_kv(pool: TokenToKVPool, slots: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    """Write rows gathered elsewhere into this pool's `slots`."""
    for layer in range(pool.num_layers):
        pool.set_kv_buffer(layer, slots, k[layer], v[layer])


@dataclass(kw_only=True)
class KVMessage:
    """What the decode side received for one room."""

    room: int
    first_token: int
    logprob: float
    k: torch.Tensor
    v: torch.Tensor
    nbytes: int


class KVSender:
    """The prefill side: one PUSH socket per decode endpoint, connected on first use."""

    def __init__(self, context: zmq.Context):
        self.context = context
        self.sockets: dict[str, zmq.Socket] = {}

    def send(self, endpoint: str, room: int, first_token: int, logprob: float, k: torch.Tensor,
             v: torch.Tensor) -> int:
        """Queue the message (ZeroMQ sends it in the background); returns the bytes of KV sent."""
        sock = self.sockets.get(endpoint)
        if sock is None:
            sock = self.sockets[endpoint] = self.context.socket(zmq.PUSH)
            sock.setsockopt(zmq.LINGER, 0)
            sock.connect(endpoint)
        dtype = str(k.dtype).removeprefix("torch.")
        header = {"room": room, "first_token": first_token, "logprob": logprob, "num_tokens": k.shape[1],
                  "num_layers": k.shape[0], "dtype": dtype, "shape": list(k.shape)}
        kb, vb = _raw(k), _raw(v)
        sock.send_multipart([json.dumps(header).encode(), kb, vb])
        return len(kb) + len(vb)

    def close(self) -> None:
        for sock in self.sockets.values():
            sock.close()


class KVReceiver:
    """The decode side: a PULL socket on a free port; its endpoint goes to the prefill with the registration
    (bootstrap.py), under the address the prefill's machine reaches this one at."""

    def __init__(self, context: zmq.Context):
        self.socket = context.socket(zmq.PULL)
        self.socket.setsockopt(zmq.LINGER, 0)
        self.port = self.socket.bind_to_random_port("tcp://*")

    def endpoint(self, host: str) -> str:
        return f"tcp://{host}:{self.port}"

    def poll(self) -> list[KVMessage]:
        out = []
        while True:
            try:
                header, kb, vb = self.socket.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return out
            h = json.loads(header)
            dtype, shape = DTYPES[h["dtype"]], h["shape"]
            out.append(KVMessage(room=int(h["room"]), first_token=int(h["first_token"]),
                                 logprob=float(h["logprob"]), k=_tensor(kb, dtype, shape),
                                 v=_tensor(vb, dtype, shape), nbytes=len(kb) + len(vb)))

    def close(self) -> None:
        self.socket.close()


def _raw(t: torch.Tensor) -> bytes:
    """A tensor's bytes (bfloat16 has no numpy type: viewed as int16 first)."""
    t = t.cpu().contiguous()
    return (t.view(torch.int16) if t.dtype == torch.bfloat16 else t).numpy().tobytes()


def _tensor(data: bytes, dtype: torch.dtype, shape: list[int]) -> torch.Tensor:
    if dtype == torch.bfloat16:
        return torch.frombuffer(bytearray(data), dtype=torch.int16).view(torch.bfloat16).reshape(shape)
    return torch.frombuffer(bytearray(data), dtype=dtype).reshape(shape)
