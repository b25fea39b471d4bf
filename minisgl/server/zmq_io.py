"""One codec and the socket wrappers every process uses for the typed messages of io_struct.py.

Codec: pickle. Each message is one of our own dataclasses, passed between processes we started, on one
machine, through sockets in a 0700 folder, so pickle round-trips them exactly and no schema has to be kept
in step with io_struct.py. It must never face a network: unpickling can run code the sender names.

The wrappers also emit the tracer's ipc.send / ipc.recv pair, joined by the message's trace_flow id.
"""

from __future__ import annotations

import pickle
from typing import Any

import zmq
import zmq.asyncio

from tracer.api import tracer

RECV_POLL_MS = 200  # an idle loop wakes this often, so it can notice shutdown


def encode(obj: Any) -> bytes:
    return pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)


def decode(data: bytes) -> Any:
    return pickle.loads(data)


def _who(obj: Any) -> dict[str, Any]:
    """The rid or rids a message is about, as the tracer's top-level fields."""
    if hasattr(obj, "rids"):
        return {"rids": list(obj.rids)}
    if hasattr(obj, "rid"):
        return {"rid": obj.rid}
    return {}


def trace_send(obj: Any, dst: str) -> None:
    """Give the message a flow id and emit ipc.send, unless its sender already did (the Scheduler does)."""
    if getattr(obj, "trace_flow", None) is not None:
        return
    flow = tracer.new_flow_id()
    if hasattr(obj, "trace_flow"):
        obj.trace_flow = flow
    tracer.event("ipc.send", flow=flow, flow_dir="send", msg=type(obj).__name__, dst=dst, **_who(obj))
    tracer.flush()  # both ends on disk at once: a reader of a live trace never sees half a message


def trace_recv(obj: Any, src: str) -> None:
    tracer.event("ipc.recv", flow=getattr(obj, "trace_flow", None), flow_dir="recv", msg=type(obj).__name__,
                 src=src, **_who(obj))
    tracer.flush()


def _socket(context: zmq.Context, kind: int, address: str, bind: bool) -> zmq.Socket:
    sock = context.socket(kind)
    sock.setsockopt(zmq.LINGER, 0)  # closing never waits for a peer that is gone
    if bind:
        sock.bind(address)
    else:
        sock.connect(address)
    return sock


class PushSender:
    """The sending end: connects to the receiver's address. `dst` names the receiving process."""

    def __init__(self, context: zmq.Context, address: str, dst: str):
        self.socket = _socket(context, zmq.PUSH, address, bind=False)
        self.dst = dst

    def send(self, obj: Any) -> None:
        if tracer.enabled:
            trace_send(obj, self.dst)
        self.socket.send(encode(obj))

    def close(self) -> None:
        self.socket.close()


class PullReceiver:
    """The receiving end of the scheduler and the detokenizer: binds its address, drains it each round."""

    def __init__(self, context: zmq.Context, address: str, src: str, poll_ms: int = RECV_POLL_MS):
        self.socket = _socket(context, zmq.PULL, address, bind=True)
        self.src = src
        self.poll_ms = poll_ms

    def recv_all(self, block: bool = False) -> list:
        """Everything queued now; with block, first wait up to poll_ms for at least one message."""
        if block and not self.socket.poll(self.poll_ms):
            return []
        out = []
        while True:
            try:
                obj = decode(self.socket.recv(zmq.NOBLOCK))
            except zmq.Again:
                return out
            if tracer.enabled:
                trace_recv(obj, self.src)
            out.append(obj)

    def close(self) -> None:
        self.socket.close()


class AsyncPullReceiver:
    """The tokenizer manager's receiving end: awaiting a message leaves the event loop free for HTTP."""

    def __init__(self, context: zmq.asyncio.Context, address: str, src: str):
        self.socket = _socket(context, zmq.PULL, address, bind=True)
        self.src = src

    async def recv(self) -> Any:
        obj = decode(await self.socket.recv())
        if tracer.enabled:
            trace_recv(obj, self.src)
        return obj

    def close(self) -> None:
        self.socket.close()
