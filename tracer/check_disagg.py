"""Invariants of prefill/decode disaggregation's events (--disaggregation-mode; tracer/servers.py merges a
pair).

One server's trace: a prefill request whose KV was sent finishes only after the decode half acknowledged it
(or, its peer silent, after it timed out: disagg.timeout; or after it was aborted);
a decode request's KV arrives only into slots it preallocated and registered. A merged trace, in addition:
every room's KV sent is the KV received (same rows, bytes and first token), sent before it arrived.
"""

from __future__ import annotations

from collections import defaultdict

from tracer import schema as S
from tracer.reader import Trace


def check_disagg(trace: Trace) -> list[str]:
    sent, received, done, registered = defaultdict(list), defaultdict(list), set(), set()
    # (process, rid) -> room, for the prefill requests whose KV was sent. By process too: in a merged trace
    # the decode server's request has the same rid, and it may finish before the prefill server reads the ack.
    room_of: dict[tuple[str, str], int] = {}
    out = []
    for ev in trace.events:
        room = ev.get("room")
        if ev.name == S.DISAGG_KV_SENT:
            sent[room].append(ev)
            room_of[ev.proc, ev.rid] = room
        elif ev.name == S.DISAGG_KV_RECEIVED:
            received[room].append(ev)
            if room not in registered:
                out.append(f"disagg: room {room}: KV received ({ev.where}) before this server registered for "
                           "it")
        elif ev.name in (S.DISAGG_TRANSFER_DONE, S.DISAGG_TIMEOUT):
            done.add(room)
        elif ev.name == S.SCHED_ABORT_REQUESTED and (ev.proc, ev.rid) in room_of:
            done.add(room_of[ev.proc, ev.rid])  # aborted while it waited for the ack: it need not wait
        elif ev.name == S.DISAGG_BOOTSTRAP and ev.get("mode") == "decode":
            registered.add(room)
        elif ev.name == S.SCHED_FINISHED and ev.rid is not None:
            if (ev.proc, ev.rid) in room_of and room_of[ev.proc, ev.rid] not in done:
                out.append(f"disagg: request {ev.rid} finished ({ev.where}) before its KV transfer was "
                           "acknowledged")
    for room, evs in list(sent.items()) + list(received.items()):
        if len(evs) > 1:
            out.append(f"disagg: room {room}: {evs[0].name} {len(evs)} times ({evs[1].where})")
    if sent and received:  # a merged trace holds both halves
        for room in sorted(set(sent) | set(received), key=str):
            if not sent.get(room) or not received.get(room):
                have = (sent.get(room) or received.get(room))[0]
                out.append(f"disagg: room {room}: {have.name} ({have.where}) has no other half in the trace")
                continue
            a, b = sent[room][0], received[room][0]
            for key in ("num_tokens", "nbytes", "first_token"):
                if a.get(key) != b.get(key):
                    out.append(f"disagg: room {room}: {key} sent {a.get(key)} ({a.where}) but received "
                               f"{b.get(key)} ({b.where})")
            if b.time_ns < a.time_ns:
                out.append(f"disagg: room {room}: KV received ({b.where}) before it was sent ({a.where})")
    return out
