"""The overlap scheduler (--enable-overlap-schedule): round N's forward runs on the forward thread while the
scheduler processes round N-1's result and forms round N+1, so a request's finish is seen one round late."""

from __future__ import annotations

from minisgl.scenarios.base import Look, Scenario, Submit
from minisgl.scenarios.look import batches, events, first

DONE = {"ignore_eos": True}


def look_at(trace) -> Look:
    formed = {ev.round: ev for ev in batches(trace)}
    lines = []
    placeholders = next((ev for ev in batches(trace) if any(t < 0 for t in ev.get("input_ids") or [])), None)
    if placeholders is not None:
        lines.append(f"round {placeholders.round}: formed before round {placeholders.round - 1}'s tokens "
                     f"exist: its input ids {placeholders.get('input_ids')} hold FutureMap placeholders "
                     "(negative)")
    sampled = first(trace, "sched.sampled", lambda ev: ev.get("batch_round") is not None)
    if sampled is not None:
        lines.append(f"round {sampled.round}: the scheduler processes round {sampled.get('batch_round')}'s "
                     f"tokens while round {sampled.round}'s forward runs on the forward thread")
    late = None
    for done in events(trace, "sched.finished"):
        batch = formed.get(done.round)
        if batch is not None and done.rid in (batch.rids or []):
            late = late or done
            lines.append(f"round {done.round}: {done.rid} finishes on round {done.round - 1}'s token, but "
                         f"round {done.round}'s batch already has a row for it: that token is dropped, its "
                         "KV slot freed")
    rid = late.rid if late is not None else "A"
    return Look(lines or ["no round ran ahead of its result"], rid=rid,
                round=late.round if late is not None else None)


SCENARIO = Scenario(
    name="overlap_schedule",
    title="The overlap scheduler: forward and scheduling side by side",
    teaches="event_loop_overlap: round N's forward beside round N+1's forming, FutureMap placeholders, "
    "results and finishing one round late",
    lesson="overlap",
    flags={"max_total_tokens": 64, "chunked_prefill_size": -1, "enable_overlap_schedule": True},
    steps=(
        Submit(0, "A", text=" one two three four", max_new_tokens=3, params=DONE),
        Submit(0, "B", text=" red green blue", max_new_tokens=6, params=DONE),
        Submit(2, "C", text=" one two three five", max_new_tokens=2, params=DONE),
    ),
    look_at=look_at,
)
