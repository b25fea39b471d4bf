"""A grading scenario of the future_map lab: the overlap loop's FutureMap ring wrapping around, which the
lesson's example (64 requests' worth of ring, three short requests) never reaches.

With --max-running-requests 2 the ring has 3 * 2 + 1 = 7 indices. A and B decode side by side for nine
rounds, two placeholders a round, so the indices go round the ring more than twice, and one round's pair
straddles the wrap (index 7, then index 1). C waits for a running slot and starts when A finishes; its
prefill round and the rounds of one row after B finishes hand out one index at a time.
"""

from __future__ import annotations

from minisgl.scenarios.base import Look, Scenario, Submit
from minisgl.scenarios.look import batches

DONE = {"ignore_eos": True}


def look_at(trace) -> Look:
    lines = []
    for ev in batches(trace):
        placeholders = [-t for t in ev.get("input_ids") or [] if t < 0]
        if placeholders:
            lines.append(f"round {ev.round}: {ev.get('forward_mode')} rows read FutureMap indices "
                         f"{placeholders}")
    return Look(lines or ["no round read a placeholder"], rid="A")


SCENARIO = Scenario(
    name="overlap_ring",
    title="The FutureMap's ring going round",
    teaches="FutureMap: indices handed out round robin in 1 .. 3 * max_running_requests + 1, a pair that "
    "straddles the wrap, placeholders stored and resolved on the forward thread",
    lesson="overlap",
    flags={"max_total_tokens": 128, "chunked_prefill_size": -1, "enable_overlap_schedule": True,
           "max_running_requests": 2},
    steps=(
        Submit(0, "A", text=" one two three four", max_new_tokens=9, params=DONE),
        Submit(0, "B", text=" red green blue", max_new_tokens=12, params=DONE),
        Submit(0, "C", text=" the sea", max_new_tokens=5, params=DONE),
    ),
    look_at=look_at,
)
