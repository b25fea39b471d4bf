"""DisaggTraceCollector: every disagg.* trace event (and the queue moves around them), from fixed points of
the disaggregation queues. Like trace_collector.py's hooks, each reports the pending KV moves first and does
nothing while tracing is off. Event names and fields: lessons/docs/reference/trace-events.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from minisgl.scheduler.trace_hook import hook
from tracer.api import tracer

if TYPE_CHECKING:
    from minisgl.disaggregation.kv_transfer import KVMessage
    from minisgl.scheduler.req import Req


class DisaggTraceCollector:
    def __init__(self, sched):
        self.sched = sched

    def _report_cache_ops(self) -> None:
        self.sched.trace_collector._report_cache_ops()

    @hook
    def queued(self, req: Req, queue: str) -> None:
        """A new request entered disagg_prefill_bootstrap_queue or disagg_decode_prealloc_queue."""
        tracer.event("disagg.queued", rid=req.rid, queue=queue, room=req.bootstrap_room)

    @hook
    def bootstrapped(self, req: Req, peer: dict, entered_waiting: bool) -> None:
        """Prefill: the decode half registered for the room; the request moves on to the waiting queue."""
        tracer.event("disagg.bootstrap", rid=req.rid, room=req.bootstrap_room, mode="prefill",
                     peer=peer["endpoint"], num_slots=peer["num_slots"])
        if entered_waiting:
            tracer.event("sched.enqueued", rid=req.rid, queue_len=len(self.sched.waiting_queue),
                         retracted=False)

    @hook
    def preallocated(self, req: Req, slots, endpoint: str) -> None:
        """Decode: KV slots taken for the prompt, the room registered with the prefill's bootstrap server."""
        tracer.event("kv.assigned", rid=req.rid, slots=slots)
        tracer.event("disagg.bootstrap", rid=req.rid, room=req.bootstrap_room, mode="decode",
                     peer=f"tcp://{req.bootstrap_host}:{req.bootstrap_port}", num_slots=len(slots))
        tracer.event("disagg.queued", rid=req.rid, queue="transfer", room=req.bootstrap_room)

    @hook
    def kv_sent(self, req: Req, endpoint: str, slots, nbytes: int) -> None:
        """Emitted just before the KV leaves: the decode side may trace its receipt at once."""
        tracer.event("disagg.kv_sent", rid=req.rid, room=req.bootstrap_room, dst=endpoint,
                     num_tokens=len(slots), slots=slots, nbytes=nbytes, first_token=req.output_ids[-1])
        tracer.event("disagg.queued", rid=req.rid, queue="inflight", room=req.bootstrap_room)
        # on disk before the KV leaves: a reader of the live traces never sees the receipt first
        tracer.flush()

    @hook
    def kv_received(self, req: Req, slots, msg: KVMessage) -> None:
        tracer.event("disagg.kv_received", rid=req.rid, room=req.bootstrap_room, num_tokens=len(slots),
                     slots=slots, nbytes=msg.nbytes, first_token=msg.first_token)

    @hook
    def transfer_done(self, req: Req) -> None:
        """Prefill: the decode half acknowledged the KV."""
        tracer.event("disagg.transfer_done", rid=req.rid, room=req.bootstrap_room)

    @hook
    def timed_out(self, req: Req, queue: str) -> None:
        """Its peer never answered: the queue it waited in (its KV moves are reported first)."""
        tracer.event("disagg.timeout", rid=req.rid, queue=queue, room=req.bootstrap_room)
