"""The radix cache: a finished request's tokens stay in the tree, a later prompt reuses them, and under a
small pool a long prompt evicts the least recently used leaves."""

from __future__ import annotations

from minisgl.scenarios.base import Look, Scenario, Submit
from minisgl.scenarios.look import events, first

DONE = {"ignore_eos": True}
LONG = " The quick brown fox jumps over the lazy dog while the cat sleeps on a warm mat by the door"


def look_at(trace) -> Look:
    hit = first(trace, "sched.prefix_matched", lambda ev: ev.rid == "B")
    evicted = events(trace, "cache.evicted")
    lines = [
        f"B: match_prefix found {hit.get('prefix_len')} cached token(s) of A's prompt "
        f"(slots {hit.get('matched_slots')}): round {hit.round} computes only the rest."
    ]
    if evicted:
        ev = evicted[0]
        lines.append(
            f"C: round {ev.round} evicts {len(ev.get('slots') or [])} slot(s) from the tree to make room "
            f"(least recently used leaves first)."
        )
    return Look(lines, rid="B", round=hit.round)


SCENARIO = Scenario(
    name="radix_cache",
    title="A prefix hit, then an eviction",
    teaches="match_prefix, insert, lock counts and LRU eviction; cached_tokens in the usage",
    lesson="radix-cache",
    flags={"max_total_tokens": 28, "chunked_prefill_size": -1},  # C (21 + 2 tokens) fits only by evicting
    steps=(
        Submit(0, "A", text=" red green blue yellow orange purple", max_new_tokens=2, params=DONE),
        Submit(99, "B", text=" red green blue pink", max_new_tokens=2, params=DONE),
        Submit(199, "C", text=LONG, max_new_tokens=2, params=DONE),
    ),
    look_at=look_at,
)
