"""Aborts: a request aborted while it waits leaves at once; one aborted while it runs leaves at its next
token, and every KV slot it wrote goes to the radix tree as evictable cache (none is lost; a slot is freed
only when the tree evicts it)."""

from __future__ import annotations

from minisgl.scenarios.base import Abort, Look, Scenario, Submit
from minisgl.scenarios.look import events

DONE = {"ignore_eos": True}


def look_at(trace) -> Look:
    asked = events(trace, "sched.abort_requested")
    done = {ev.rid: ev for ev in events(trace, "sched.finished")}
    lines = [
        f"round {ev.round}: abort {ev.rid} while {ev.get('where')}; it finishes in round "
        f"{done[ev.rid].round} after {done[ev.rid].get('output_len')} token(s)"
        for ev in asked
        if ev.rid in done
    ]
    return Look(lines, rid="RUN", round=asked[0].round if asked else None)


SCENARIO = Scenario(
    name="abort",
    title="Abort while waiting, abort while running",
    teaches="abort_request: waiting requests leave at once, running ones at their next token (to_abort)",
    lesson="limits-failures",
    flags={"max_total_tokens": 64, "chunked_prefill_size": -1, "max_running_requests": 1},
    steps=(
        Submit(0, "RUN", text=" one two three", max_new_tokens=8, params=DONE),
        Submit(0, "WAIT", text=" red green blue", max_new_tokens=8, params=DONE),
        Submit(0, "LATER", text=" cat dog fish", max_new_tokens=2, params=DONE),
        Abort(2, "WAIT"),
        Abort(3, "RUN"),
    ),
    look_at=look_at,
)
