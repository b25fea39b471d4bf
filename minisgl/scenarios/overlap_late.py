"""A grading scenario of the future_map lab: the overlap loop's results processed one round late, with the
rows a late result meets that the lesson's example never has: a chunked prompt's intermediate chunks (rows
that sample nothing, kept as they are), and a request aborted while its next round is already launched (its
finish seen a round late, the launched row's KV slot freed as `finished`).

A decodes from the start. L's prompt (10 tokens) arrives after round 2 and is prefilled 4 tokens a round
(three chunks; A's decode waits meanwhile). A is aborted while A and L decode side by side: its finish, and
then L's (max_new_tokens), each come a round after the next round with its row was launched.
"""

from __future__ import annotations

from minisgl.scenarios.base import Abort, Look, Scenario, Submit
from minisgl.scenarios.look import events

DONE = {"ignore_eos": True}


def look_at(trace) -> Look:
    ends = [f"round {ev.round}: {ev.rid} finished ({ev.get('finish_reason', {}).get('type')}), with a row "
            "already launched" for ev in events(trace, "sched.finished")]
    lines = ends + [f"round {ev.round}: that launched row's result came back: its slot {ev.get('slots')} "
                    "freed as finished" for ev in events(trace, "kv.free") if ev.get("reason") == "finished"]
    return Look(lines or ["no late row was freed"], rid="L")


SCENARIO = Scenario(
    name="overlap_late",
    title="Results a round late: chunked rows and a late abort",
    teaches="split_launched_rows: a chunked prompt's rows kept, a row of a request that finished meanwhile "
    "freed, every other row's placeholder consumed",
    lesson="overlap",
    flags={"max_total_tokens": 64, "chunked_prefill_size": 4, "enable_overlap_schedule": True},
    steps=(
        Submit(0, "A", text=" one two", max_new_tokens=12, params=DONE),
        Submit(2, "L", ids=tuple(range(2000, 2010)), max_new_tokens=3, params=DONE),
        Abort(4, "A"),
    ),
    look_at=look_at,
)
