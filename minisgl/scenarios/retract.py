"""Retraction: the pool runs out mid-decode, a victim goes back to the waiting queue (its KV kept in the
radix cache), and it resumes later with the same tokens it would have produced alone."""

from __future__ import annotations

from minisgl.scenarios.base import Look, Scenario, Submit
from minisgl.scenarios.look import events, first

DONE = {"ignore_eos": True}


def look_at(trace) -> Look:
    victim = first(trace, "sched.retracted")
    if victim is None:
        return Look(["no request was retracted"], rid="A")
    back = first(
        trace,
        "sched.admission",
        lambda ev: (
            ev.rid == victim.rid and ev.index > victim.index and ev.get("decision") in ("admitted", "chunked")
        ),
    )
    frees = events(trace, "kv.free", lambda ev: ev.round == victim.round)
    lines = [
        f"round {victim.round}: no room for every decode row: {victim.rid} is retracted after "
        f"{victim.get('output_len')} token(s)"
        + (f", {sum(len(ev.get('slots') or []) for ev in frees)} slot(s) freed" if frees else "")
    ]
    if back is not None:
        lines.append(
            f"round {back.round}: {victim.rid} is admitted again, its prompt and tokens so far served "
            f"from the cache where they survived"
        )
    return Look(lines, rid=victim.rid, round=victim.round)


SCENARIO = Scenario(
    name="retract",
    title="Out of KV slots: retract, then resume",
    teaches="check_decode_mem, retract_decode's victim order, new_token_ratio reset, a resumed "
    "request's tokens",
    lesson="chunked-retract-mixed",
    # B is admitted while A decodes because only new_token_ratio (0.7) of A's future tokens is reserved;
    # 44 slots hold 24 + 19 tokens, so both cannot finish side by side
    flags={"max_total_tokens": 44, "chunked_prefill_size": -1, "max_running_requests": 4},
    steps=(
        Submit(0, "A", text=" one two three four", max_new_tokens=20, params=DONE),
        Submit(1, "B", text=" red green blue yellow", max_new_tokens=20, params=DONE),
    ),
    look_at=look_at,
)
