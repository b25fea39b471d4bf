"""InProcessQueue: the offline Engine's stand-in for a ZeroMQ PUSH/PULL pair between two server processes.

It has the wrappers' methods (`send`, `recv_all`) and emits the same ipc.send / ipc.recv pair, so the
Scheduler and an offline trace cannot tell it from a socket. Each entry keeps its flow id beside the message.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from minisgl.server import ipc_trace


class InProcessQueue:
    def __init__(self, src: str, dst: str):
        self.src, self.dst = src, dst  # the sending and the receiving part, named as the server's processes
        self.items: deque[tuple[str | None, Any]] = deque()

    def send(self, obj: Any) -> None:
        self.items.append((ipc_trace.sent(obj, self.dst), obj))

    def recv_all(self, block: bool = False) -> list:
        """Everything queued now (`block` is accepted for the Scheduler's sake: there is nothing to wait
        for)."""
        out = []
        while self.items:
            flow, obj = self.items.popleft()
            ipc_trace.received(obj, flow, self.src)
            out.append(obj)
        return out
