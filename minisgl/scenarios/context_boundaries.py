"""A grading scenario of the context_check lab: new requests at the exact edges of max_req_len, which the
lesson's example (one prompt far too long, one output far too long) never reaches.

The KV pool (24 slots) is smaller than the context (32 tokens), so the limit is 24 and a refusal names
both. FIT's prompt leaves exactly one token of room (it runs, clamped to one token); FULL's fills the limit
(refused: no room for an output token); EMPTY has no token at all (refused); EXACT asks for exactly what fits
(not clamped); OVER for one token more (clamped); ALL gives no max_new_tokens (everything that fits). The
requests that run go one at a time.
"""

from __future__ import annotations

from minisgl.scenarios.base import Look, Scenario, Submit
from minisgl.scenarios.look import events

DONE = {"ignore_eos": True}
IDS = tuple(range(1000, 1024))  # 24 plain tokens


def look_at(trace) -> Look:
    lines = [f"{ev.rid}: refused: {ev.get('message')}" for ev in events(trace, "sched.refused")]
    for ev in events(trace, "sched.req_created"):
        lines.append(f"{ev.rid}: {ev.get('input_len')} prompt tokens, max_new_tokens "
                     f"{ev.get('sampling_params', {}).get('max_new_tokens')}")
    return Look(lines, rid="OVER")


SCENARIO = Scenario(
    name="context_boundaries",
    title="New requests at the edges of the length limit",
    teaches="validate_input_length and clamp_max_new_tokens: a prompt one short of the limit and one at it, "
    "an empty prompt, an output that fits exactly, one token over, and none given",
    lesson="limits-failures",
    flags={"max_total_tokens": 24, "context_length": 32, "chunked_prefill_size": -1},
    steps=(
        Submit(0, "FIT", ids=IDS[:23], max_new_tokens=4, params=DONE),
        Submit(99, "FULL", ids=IDS, max_new_tokens=1, params=DONE),
        Submit(99, "EMPTY", ids=(), max_new_tokens=1, params=DONE),
        Submit(99, "EXACT", ids=IDS[:10], max_new_tokens=14, params=DONE),
        Submit(199, "OVER", ids=IDS[:10], max_new_tokens=15, params=DONE),
        Submit(299, "ALL", ids=IDS[:10], max_new_tokens=None, params=DONE),
    ),
    look_at=look_at,
)
