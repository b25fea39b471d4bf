"""Structured output: a grammar compiled off the loop, its mask on one logits row, its matcher advanced by
each kept token.

JSON asks for an answer matching a JSON schema; its grammar compiles on the grammar thread while the round
runs without it, and JSON joins the waiting queue in the next round. PLAIN, arriving with it, has no grammar:
its row is never masked. AGAIN asks for the same schema later: compiled already, it is enqueued at once.
YESNO's regular expression allows two answers, and with ignore_eos it ends only because the grammar is
complete. BAD's regular expression does not compile: refused, alone. GONE is aborted while its grammar
compiles.
"""

from __future__ import annotations

import json

from minisgl.scenarios.base import Abort, Look, Scenario, Submit
from minisgl.scenarios.look import events

SCHEMA = json.dumps({"type": "object",
                     "properties": {"name": {"type": "string"}, "legs": {"type": "integer"}},
                     "required": ["name", "legs"]})


def look_at(trace) -> Look:
    lines = []
    for ev in events(trace, "sched.grammar_ready"):
        how = " (compiled for an earlier request)" if ev.get("cached") else " (compiled last round)"
        lines.append(f"round {ev.round}: {ev.rid}'s {ev.get('kind')} is ready{how}")
    allowed = [(ev.round, dict(zip(ev.rids, ev.get("allowed")))["JSON"])
               for ev in events(trace, "sched.grammar_masked") if "JSON" in ev.rids]
    if allowed:
        lines.append(f"JSON's mask, round by round, leaves {[n for _, n in allowed]} of the vocabulary's "
                     f"tokens (round {allowed[-1][0]}: only the end of sequence)")
    for ev in events(trace, "sched.refused"):
        lines.append(f"round {ev.round}: {ev.rid} refused: {ev.get('message')}")
    return Look(lines, rid="JSON")


SCENARIO = Scenario(
    name="structured_output",
    title="Structured output: a JSON schema, a regular expression, a grammar that does not compile",
    teaches="the grammar step: compiled once off the loop, a vocabulary mask on the request's logits row, "
    "the matcher advanced by every kept token, the request finished when the grammar is complete",
    lesson="structured-output",
    flags={"max_total_tokens": 512, "chunked_prefill_size": -1},
    steps=(
        Submit(0, "JSON", chat="Describe a cat as JSON.", max_new_tokens=40, params={"json_schema": SCHEMA}),
        Submit(0, "PLAIN", chat="Name a colour.", max_new_tokens=6),
        Submit(3, "AGAIN", chat="Describe a spider as JSON.", max_new_tokens=40,
               params={"json_schema": SCHEMA}),
        Submit(3, "YESNO", text="Is water wet? Answer:", max_new_tokens=8,
               params={"regex": " ?(yes|no)", "ignore_eos": True}),
        Submit(5, "BAD", text="Count:", max_new_tokens=4, params={"regex": "(unclosed"}),
        Submit(5, "GONE", text="Count:", max_new_tokens=4, params={"regex": "[0-9]+"}),
        Abort(5, "GONE"),
    ),
    look_at=look_at,
)
