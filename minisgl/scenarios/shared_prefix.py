"""The classic R1/R2 round: two requests, one of them over a cached prefix, prefilled in one EXTEND."""

from __future__ import annotations

from minisgl.scenarios.base import Look, Scenario, Submit
from minisgl.scenarios.look import batch_of, describe_batch

SHARED, R1, R2_TAIL = " red green blue", " one two three four five six", " cat dog fish"
DONE = {"ignore_eos": True}


def look_at(trace) -> Look:
    extend, decode = batch_of(trace, "R2", "EXTEND"), batch_of(trace, "R2", "DECODE")
    lines = [
        "R0 ran alone first: its three tokens stay in the radix cache when it finishes.",
        describe_batch(extend)
        + ": R1's six rows at positions 0-5, then R2's three new rows at positions 3-5 "
        "(its first three come from R0's cached slots); only each request's last row gives logits.",
        describe_batch(decode) + ": one row each, at position 6.",
    ]
    return Look(lines, rid="R2", round=extend.round)


SCENARIO = Scenario(
    name="shared_prefix",
    title="Two requests, one EXTEND of nine rows",
    teaches="positions are logical, out_cache_loc is storage; a cached prefix is read, not recomputed; "
    "one logit row per request",
    lesson="batch-rows",
    flags={"max_total_tokens": 64, "chunked_prefill_size": -1},
    steps=(
        Submit(0, "R0", text=SHARED, max_new_tokens=1, params=DONE),
        Submit(1, "R1", text=R1, max_new_tokens=2, params=DONE),
        Submit(1, "R2", text=SHARED + R2_TAIL, max_new_tokens=2, params=DONE),
    ),
    look_at=look_at,
)
