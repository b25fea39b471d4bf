"""A MIXED round (--enable-mixed-chunk): a new prompt's chunk and the running requests' decode rows in one
forward."""

from __future__ import annotations

from minisgl.scenarios.base import Look, Scenario, Submit
from minisgl.scenarios.look import batches, describe_batch

DONE = {"ignore_eos": True}


def look_at(trace) -> Look:
    mixed = [ev for ev in batches(trace) if ev.get("forward_mode") == "MIXED"]
    lines = [
        describe_batch(ev) + f"; decode rows for {', '.join(ev.get('decoding_rids') or [])}" for ev in mixed
    ]
    return Look(lines or ["no MIXED round ran"], rid="B", round=mixed[0].round if mixed else None)


SCENARIO = Scenario(
    name="mixed_round",
    title="Prefill and decode in one batch",
    teaches="mix_with_running: B's prompt chunks ride with A's decode rows; running_batch empties and "
    "comes back",
    lesson="chunked-retract-mixed",
    flags={"max_total_tokens": 64, "chunked_prefill_size": 4, "enable_mixed_chunk": True},
    steps=(
        Submit(0, "A", text=" one two three four", max_new_tokens=6, params=DONE),
        Submit(2, "B", text=" red green blue yellow orange purple", max_new_tokens=3, params=DONE),
    ),
    look_at=look_at,
)
