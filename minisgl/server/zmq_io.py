"""One codec and the socket wrappers every process uses for the typed messages of io_struct.py.

Codec: pickle. Each message is one of our own dataclasses, passed between processes we started, on one
machine, through sockets in a 0700 folder, so pickle round-trips them exactly and no schema has to be kept
in step with io_struct.py. It must never face a network: unpickling can run code the sender names.

Framing: two frames per message, the flow id that pairs the tracer's ipc.send with its ipc.recv (empty when
the sender does not trace) and the pickled message. The wrappers own that id (ipc_trace.py emits the events),
so no message type carries a tracing field.
"""

from __future__ import annotations

import pickle
from typing import Any

import zmq
import zmq.asyncio

from minisgl.server import ipc_trace
from tracer.api import tracer

RECV_POLL_MS = 200  # an idle loop wakes this often, so it can notice shutdown


def encode(obj: Any) -> bytes:
    return pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)


def decode(data: bytes) -> Any:
    return pickle.loads(data)


def _frames(flow: str | None, obj: Any) -> list[bytes]:
    return [(flow or "").encode(), encode(obj)]


def _unframe(frames: list[bytes], src: str) -> Any:
    """The message of a two-frame send, after its ipc.recv (with the flow id of the first frame)."""
    flow, data = frames
    obj = decode(data)
    ipc_trace.received(obj, flow.decode() or None, src)
    tracer.flush()  # both ends on disk at once: a reader of a live trace never sees half a message
    return obj


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
        flow = ipc_trace.sent(obj, self.dst)
        tracer.flush()  # on disk before the message leaves: a reader never sees its receive without its send
        self.socket.send_multipart(_frames(flow, obj))

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
                frames = self.socket.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return out
            out.append(_unframe(frames, self.src))

    def close(self) -> None:
        self.socket.close()


class AsyncPullReceiver:
    """The tokenizer manager's receiving end: awaiting a message leaves the event loop free for HTTP."""

    def __init__(self, context: zmq.asyncio.Context, address: str, src: str):
        self.socket = _socket(context, zmq.PULL, address, bind=True)
        self.src = src

    async def recv(self) -> Any:
        return _unframe(await self.socket.recv_multipart(), self.src)

    def close(self) -> None:
        self.socket.close()
