"""The transport's trace events: `ipc.send` and `ipc.recv`, paired by a flow id the transport assigns.

When a message leaves one process for another (in the offline Engine: one part for the next), the sender
gives that crossing a fresh flow id and emits ipc.send; the receiver emits ipc.recv with the same id, so a
trace reader can draw the arrow. The id travels beside the message (its own frame on a ZeroMQ socket, its
own slot in the in-process queue), never inside it: the message types of io_struct.py know nothing of
tracing, and a message passed on unchanged (the detokenizer forwards the scheduler's replies) simply
starts a new crossing with a new id.

Both hooks guard themselves, so a transport calls them unconditionally; with tracing off they return at
once and the flow id is None.
"""

from __future__ import annotations

from typing import Any

from minisgl.scheduler.io_struct import BatchTokenIDOutput
from tracer.api import tracer


def _who(obj: Any) -> dict[str, Any]:
    """The rid or rids a message is about, as the tracer's top-level fields."""
    if hasattr(obj, "rids"):
        return {"rids": list(obj.rids)}
    if hasattr(obj, "rid"):
        return {"rid": obj.rid}
    return {}


def sent(obj: Any, dst: str) -> str | None:
    """Emit ipc.send for a message about to leave for `dst`; return the flow id to send beside it."""
    if not tracer.enabled:
        return None
    flow = tracer.new_flow_id()
    # the new tokens themselves: a trace shows them leaving the scheduler
    if isinstance(obj, BatchTokenIDOutput):
        tracer.event("ipc.send", flow=flow, flow_dir="send", msg=type(obj).__name__, dst=dst,
                     output_ids=obj.output_ids, **_who(obj))
    else:
        tracer.event("ipc.send", flow=flow, flow_dir="send", msg=type(obj).__name__, dst=dst, **_who(obj))
    return flow


def received(obj: Any, flow: str | None, src: str) -> None:
    """Emit ipc.recv for a message that arrived from `src` with the flow id its sender gave it."""
    if not tracer.enabled:
        return
    tracer.event("ipc.recv", flow=flow, flow_dir="recv", msg=type(obj).__name__, src=src, **_who(obj))
