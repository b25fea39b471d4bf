"""A grading scenario of the get_next_batch_to_run lab: a merge without mixed chunks, which the lesson's
example (--enable-mixed-chunk, whose MIXED rounds empty running_batch) never makes.

B and C are prefilled together in round 2, an EXTEND round, while A waits; B finishes in that round
(max_new_tokens 1). In round 3 the merge drops B and C joins running_batch behind A, so the decode rows are
A, C.
"""

from __future__ import annotations

from minisgl.scenarios.base import Look, Scenario, Submit
from minisgl.scenarios.look import first

DONE = {"ignore_eos": True}


def look_at(trace) -> Look:
    merge = first(trace, "sched.batch_merged", lambda ev: "C" in (ev.get("joined") or []))
    if merge is None:
        return Look(["C never joined running_batch"], rid="C")
    line = (f"round {merge.round}: {', '.join(merge.get('joined'))} joined, {merge.get('finished')} dropped; "
            f"running: {', '.join(merge.get('running'))}")
    return Look([line], rid="C", round=merge.round)


SCENARIO = Scenario(
    name="batch_merge",
    title="A merge without mixed chunks",
    teaches="get_next_batch_to_run: a request finished in its prefill round is dropped at the merge; the "
    "new requests join behind the running ones",
    lesson="scheduler-loop",
    flags={"max_total_tokens": 64, "chunked_prefill_size": -1},
    steps=(
        Submit(0, "A", text=" one two", max_new_tokens=4, params=DONE),
        Submit(1, "B", text=" red", max_new_tokens=1, params=DONE),
        Submit(1, "C", text=" three four", max_new_tokens=3, params=DONE),
    ),
    look_at=look_at,
)
