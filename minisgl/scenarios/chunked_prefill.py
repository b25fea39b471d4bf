"""Chunked prefill: a prompt longer than --chunked-prefill-size is computed a chunk per round; only the
last chunk's last row gives a token."""

from __future__ import annotations

from minisgl.scenarios.base import Look, Scenario, Submit
from minisgl.scenarios.look import events

QUESTION = "Explain what a KV cache is in one sentence."
CHUNK = 16


def look_at(trace) -> Look:
    steps = events(
        trace, "sched.admission", lambda ev: ev.rid == "L" and ev.get("decision") in ("admitted", "chunked")
    )
    lines = [
        f"round {ev.round}: extend_range {ev.get('extend_range')} ({ev.get('decision')})" for ev in steps
    ]
    lines.append(
        "The chunked rounds sample a token from their last row too, and throw it away: no "
        "sched.output_appended follows them."
    )
    return Look(lines, rid="L", round=steps[0].round if steps else None)


SCENARIO = Scenario(
    name="chunked_prefill",
    title="A long prompt, a chunk per round",
    teaches="chunked_req, extend ranges, cache_unfinished_req between chunks, no token from an "
    "intermediate chunk",
    lesson="chunked-retract-mixed",
    flags={"max_total_tokens": 128, "chunked_prefill_size": CHUNK},
    steps=(Submit(0, "L", chat=QUESTION, max_new_tokens=3, params={"ignore_eos": True}),),
    look_at=look_at,
)
