"""A grading scenario of the decode_and_retract lab: retraction where the victim order is decided by its
tie-breaks, which the lesson's example (two requests, tied on everything but the rid) never reaches.

L0 and L1 run first, so they always have the most output tokens. B2 and B1 (in that order, 2-token prompts)
and S (a 1-token prompt) arrive together; S waits a round for room, and in round 11, when the pool (43 slots)
runs out, the three are tied on output tokens. The victim is B1: fewest outputs, then the longest prompt, then
the smaller rid, though B2 comes first in the batch. No radix cache, so B1's slots are freed with the reason
`retracted`; with the overlap loop, B1's row still in flight is freed too.
"""

from __future__ import annotations

from minisgl.scenarios.base import Look, Scenario, Submit
from minisgl.scenarios.look import first

DONE = {"ignore_eos": True}


def look_at(trace) -> Look:
    victim = first(trace, "sched.retracted")
    if victim is None:
        return Look(["no request was retracted"], rid="B1")
    line = f"round {victim.round}: {victim.rid} is retracted after {victim.get('output_len')} token(s)"
    return Look([line], rid=victim.rid, round=victim.round)


SCENARIO = Scenario(
    name="retract_ties",
    title="Retraction decided by its tie-breaks",
    teaches="retract_decode's order: fewest outputs, then the longest prompt, then the rid; a victim's slots "
    "(its in-flight row included) freed as retracted",
    lesson="chunked-retract-mixed",
    flags={"max_total_tokens": 43, "chunked_prefill_size": -1, "disable_radix_cache": True,
           "enable_overlap_schedule": True},
    steps=(
        Submit(0, "L0", text=" one", max_new_tokens=9, params=DONE),
        Submit(0, "L1", text=" two", max_new_tokens=9, params=DONE),
        Submit(2, "B2", text=" red green", max_new_tokens=8, params=DONE),
        Submit(2, "B1", text=" blue yellow", max_new_tokens=8, params=DONE),
        Submit(2, "S", text=" three", max_new_tokens=8, params=DONE),
    ),
    look_at=look_at,
)
