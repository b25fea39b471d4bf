"""A grading scenario of the mix_with_running lab: MIXED rounds with more than the lesson's one decode row.

A's prompt fills round 1's 4-token chunk budget, so B's prefill rides with A's decode row in round 2. C
arrives while both decode and shares A's prompt, so its prefill part starts after a 4-token cached prefix;
its other 6 tokens come in chunks of 4 and 2, each mixed with the running requests' decode rows. B finishes
in between, so the last mixed round carries one decode row fewer.
"""

from __future__ import annotations

from minisgl.scenarios.base import Look, Scenario, Submit
from minisgl.scenarios.look import batches, describe_batch

DONE = {"ignore_eos": True}


def look_at(trace) -> Look:
    mixed = [ev for ev in batches(trace) if ev.get("forward_mode") == "MIXED"]
    lines = [describe_batch(ev) + f"; prefix_lens {ev.get('prefix_lens')}; decode rows for "
             f"{', '.join(ev.get('decoding_rids') or [])}" for ev in mixed]
    return Look(lines or ["no MIXED round ran"], rid="C", round=mixed[0].round if mixed else None)


SCENARIO = Scenario(
    name="mixed_boundaries",
    title="Mixed rounds with several decode rows and a cached prefix",
    teaches="mix_with_running: the prefill's rows first, then one extend row per running request, each with "
    "its own prefix; decoding_reqs; a running request finishing between mixed rounds",
    lesson="chunked-retract-mixed",
    flags={"max_total_tokens": 96, "chunked_prefill_size": 4, "enable_mixed_chunk": True},
    steps=(
        Submit(0, "A", text=" one two three four", max_new_tokens=8, params=DONE),
        Submit(0, "B", text=" red green", max_new_tokens=2, params=DONE),
        Submit(2, "C", text=" one two three four five six seven eight nine ten", max_new_tokens=3,
               params=DONE),
    ),
    look_at=look_at,
)
