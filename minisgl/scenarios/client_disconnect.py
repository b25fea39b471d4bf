"""A streaming client that goes away: the server notices the closed connection, sends AbortReq, and the
scheduler lets the request go at its next token; the KV slots it wrote go to the radix tree as evictable
cache (a slot is freed only when the tree evicts it)."""

from __future__ import annotations

from minisgl.scenarios.base import Look, Scenario
from minisgl.scenarios.look import first

QUESTION = "Tell me a long story about a dragon."


def drive(url: str) -> dict:
    from minisgl.scenarios.http_client import stream_chat, wait_idle

    result = stream_chat(url, "LEAVER", QUESTION, max_tokens=200, leave_after=3)
    wait_idle(url)
    return {"LEAVER": result}


def look_at(trace) -> Look:
    error = first(trace, "http.error", lambda ev: ev.rid == "LEAVER")
    asked = first(trace, "sched.abort_requested", lambda ev: ev.rid == "LEAVER")
    done = first(trace, "sched.finished", lambda ev: ev.rid == "LEAVER")
    lines = []
    if error is not None:
        lines.append(
            f"the HTTP side saw the client leave: http.error {error.get('status')} ({error.get('message')})"
        )
    if asked is not None and done is not None:
        lines.append(
            f"round {asked.round}: the scheduler gets AbortReq while LEAVER is {asked.get('where')}; "
            f"round {done.round}: it finishes as abort after {done.get('output_len')} token(s)"
        )
    return Look(lines, rid="LEAVER", round=asked.round if asked else None)


SCENARIO = Scenario(
    name="client_disconnect",
    title="A streaming client disconnects",
    teaches="abort on disconnect: http.error 499, AbortReq over ZeroMQ, to_abort, its KV slots left to the "
    "radix tree",
    lesson="limits-failures",
    flags={"max_total_tokens": 512},
    server=drive,
    look_at=look_at,
)
