"""The PrefillAdder's budgets, each one refusing a request in turn: prefill rows (--max-prefill-tokens),
the chunk (--chunked-prefill-size), running requests (--max-running-requests) and KV room."""

from __future__ import annotations

from minisgl.scenarios.base import Look, Scenario, Submit
from minisgl.scenarios.look import events

DONE = {"ignore_eos": True}


def look_at(trace) -> Look:
    refusals = events(trace, "sched.admission", lambda ev: ev.get("decision") == "refused")
    seen, lines = set(), []
    for ev in refusals:
        budget = ev.get("budget")
        if budget not in seen:
            seen.add(budget)
            lines.append(f"round {ev.round}: {ev.rid} refused on {budget}")
    return Look(
        lines, rid=refusals[0].rid if refusals else "B", round=refusals[0].round if refusals else None
    )


SCENARIO = Scenario(
    name="admission_budgets",
    title="Every admission budget says no once",
    teaches="PrefillAdder.add_one_req: rows, chunk, running requests and KV room, spent candidate by "
    "candidate",
    lesson="admission",
    flags={
        "max_total_tokens": 48,
        "max_prefill_tokens": 10,
        "chunked_prefill_size": 8,
        "max_running_requests": 3,
    },
    steps=(
        Submit(0, "A", text=" one two three four five six", max_new_tokens=6, params=DONE),
        Submit(0, "B", text=" red green blue yellow orange purple pink brown", max_new_tokens=6, params=DONE),
        Submit(1, "C", text=" cat dog", max_new_tokens=4, params=DONE),
        Submit(2, "D", text=" sun moon", max_new_tokens=4, params=DONE),
        Submit(2, "E", text=" apple pear plum", max_new_tokens=44, params=DONE),  # 3 + 44 of 48 slots
    ),
    look_at=look_at,
)
