"""A grading scenario of the radix_cache lab: the radix cache at its boundaries, which the lesson's example
never reaches. Token ids are given directly, so every length is exact:

- B's prompt is the first 6 of A's cached tokens: its match splits A's node, its insert splits it again, and
  B locks the node its prompt ends on, whose only child is A's unlocked rest;
- C locks B's first 5 tokens a second time while B holds them;
- E fills the pool, so B's next decode round evicts one slot: A's 1-token leaf, an exact fit;
- G needs 4 slots: A's rest goes, which leaves the node B holds childless (it must stay), then D's leaf;
- F's match splits the node B holds (a split of a locked node); too long to fit, F waits, so the split node's
  LRU stamp shows in the round's tree as the split left it.
"""

from __future__ import annotations

from minisgl.scenarios.base import Look, Scenario, Submit
from minisgl.scenarios.look import events

DONE = {"ignore_eos": True}
P = tuple(range(1000, 1008))  # A's prompt: 8 tokens


def look_at(trace) -> Look:
    evicted = events(trace, "cache.evicted")
    lines = [f"round {ev.round}: evicted slots {ev.get('slots')}" for ev in evicted]
    return Look(lines or ["no eviction"], rid="B", round=evicted[0].round if evicted else None)


SCENARIO = Scenario(
    name="radix_boundaries",
    title="The radix cache at its boundaries",
    teaches="locks across a split, a split made by insert, an eviction of exactly the slots asked for",
    lesson="radix-cache",
    flags={"max_total_tokens": 36, "chunked_prefill_size": -1},
    steps=(
        Submit(0, "A", ids=P, max_new_tokens=2, params=DONE),
        # B's prompt is the first 6 of A's cached tokens: its match (capped at 5) and its insert each split
        # A's node, and B locks the node its prompt ends on, whose only child is A's unlocked rest
        Submit(2, "B", ids=P[:6], max_new_tokens=14, params=DONE),
        # C locks B's first 5 tokens a second time
        Submit(3, "C", ids=P[:5] + (1100,), max_new_tokens=2, params=DONE),
        Submit(4, "D", ids=(1200, 1201, 1202), max_new_tokens=1, params=DONE),
        # E fills the pool: B's next decode rounds evict one slot each, A's 1-token leaf first (an exact fit)
        Submit(6, "E", ids=tuple(range(1300, 1319)), max_new_tokens=1, params=DONE),
        # G needs 4 slots: A's rest goes, which leaves the node B holds childless (it stays), then D's leaf
        Submit(10, "G", ids=(1500, 1501, 1502, 1503), max_new_tokens=1, params=DONE),
        # F shares 3 tokens with the node B holds: its match splits a locked node; too long to fit, it waits
        Submit(11, "F", ids=P[:3] + tuple(range(1400, 1425)), max_new_tokens=1, params=DONE),
    ),
    look_at=look_at,
)
