"""The context-length check: a prompt that cannot fit is refused before it runs; a max_new_tokens that
would overflow the context is clamped to what fits."""

from __future__ import annotations

from minisgl.scenarios.base import Look, Scenario, Submit
from minisgl.scenarios.look import first

CONTEXT = 32
LONG = " one two three four five six seven eight nine ten" * 4  # 40 tokens: more than the context


def look_at(trace) -> Look:
    refused = first(trace, "sched.refused", lambda ev: ev.rid == "TOO_LONG")
    clamped = first(trace, "sched.req_created", lambda ev: ev.rid == "CLAMPED")
    lines = [
        f"TOO_LONG: refused: {refused.get('message')}" if refused else "TOO_LONG was not refused",
        f"CLAMPED: max_new_tokens {clamped.get('sampling_params', {}).get('max_new_tokens')} after the clamp"
        if clamped
        else "CLAMPED never reached the scheduler",
    ]
    return Look(lines, rid="CLAMPED", round=clamped.round if clamped else None)


SCENARIO = Scenario(
    name="context_limit",
    title="Refused and clamped at the context limit",
    teaches="prompt + output must fit the context (and the KV pool): refuse with both numbers, or clamp",
    lesson="limits-failures",
    flags={"max_total_tokens": 64, "context_length": CONTEXT, "chunked_prefill_size": -1},
    steps=(
        Submit(0, "TOO_LONG", text=LONG, max_new_tokens=4),
        Submit(
            0,
            "CLAMPED",
            text=" one two three four five six seven eight nine ten",
            max_new_tokens=100,
            params={"ignore_eos": True},
        ),
    ),
    look_at=look_at,
)
