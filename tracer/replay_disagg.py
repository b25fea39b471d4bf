"""Replay of prefill/decode disaggregation's events (--disaggregation-mode): how they move a request.

    disagg.kv_sent      prefill: the request's KV left for the decode server; it waits for the ack and never
                        joins running_batch (status transferring, until its sched.finished)
    disagg.kv_received  decode: the prompt's KV is in the preallocated slots (kv.assigned gave them to the
                        request); the request joins running_batch at once, as SGLang's PREBUILT batch does
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tracer import schema as S
from tracer.event import Event
from tracer.state import LEFT_BATCH, RUNNING, TRANSFERRING

if TYPE_CHECKING:
    from tracer.replayer import Replayer


__all__ = ["LEFT_BATCH", "disagg_handlers"]


def disagg_handlers(r: Replayer) -> dict:
    def kv_sent(ev: Event) -> None:
        r._req(ev).status = TRANSFERRING

    def kv_received(ev: Event) -> None:
        req = r._req(ev)
        req.status, req.computed_len = RUNNING, req.input_len
        if req.admitted_ns is None:
            req.admitted_ns = ev.time_ns
        r._rows[req.rid] = dict(enumerate(int(s) for s in ev.get("slots") or []))
        if req.rid not in r.running:
            r.running.append(req.rid)

    return {S.DISAGG_KV_SENT: kv_sent, S.DISAGG_KV_RECEIVED: kv_received}
