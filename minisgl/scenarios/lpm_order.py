"""The lpm policy: the waiting queue is sorted by cached prefix length, longest first."""

from __future__ import annotations

from minisgl.scenarios.base import Look, Scenario, Submit
from minisgl.scenarios.look import events

DONE = {"ignore_eos": True}
SHARED = " red green blue yellow orange purple"


def look_at(trace) -> Look:
    sorts = events(trace, "sched.queue_sorted", lambda ev: len(ev.get("waiting") or []) > 1)
    admitted = [
        ev.rid for ev in events(trace, "sched.admission", lambda ev: ev.get("decision") == "admitted")
    ]
    lines = [f"round {ev.round}: lpm sorted the waiting queue to {ev.get('waiting')}" for ev in sorts[:1]]
    lines.append(f"admission order: {admitted} (Y arrived after X, but shares P's cached prompt)")
    return Look(lines, rid="Y", round=sorts[0].round if sorts else None)


SCENARIO = Scenario(
    name="lpm_order",
    title="Longest prefix match goes first",
    teaches="SchedulePolicy.calc_priority under lpm: match_prefix for every waiting request, then a "
    "stable sort",
    lesson="admission",
    flags={"max_total_tokens": 64, "schedule_policy": "lpm", "max_running_requests": 1},
    steps=(
        Submit(0, "P", text=SHARED, max_new_tokens=2, params=DONE),
        Submit(99, "X", text=" cat dog fish", max_new_tokens=2, params=DONE),
        Submit(99, "Y", text=SHARED + " pink", max_new_tokens=2, params=DONE),
    ),
    look_at=look_at,
)
