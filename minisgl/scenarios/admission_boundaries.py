"""A grading scenario of the add_one_req and chunked_prefill labs: the PrefillAdder at the boundaries the
lesson's examples never reach. Token ids are given directly, so every length is exact (a 46-slot pool,
6 prefill rows, 8 chunk rows):

- Z (34 tokens) arrives at an idle engine, longer than the rows: the first candidate of a round is chunked,
  not refused; its later chunks are cut by the rows (6), not by the chunk (8). It leaves its prompt cached;
- R1 (Z plus one token) locks Z's cached prompt: the lock takes 34 evictable slots out of both rooms;
- R2 needs exactly the rem_total_tokens R1 left (3 + 6 = 9): admitted, an exact fit;
- R3 comes third in that idle round and needs more than is left: only the first request of an idle engine
  skips the KV check, so R3 is refused, and admitted next round;
- H1 and H2 run and hold slots while X (Z's first 30 tokens, 24 of them still cached, then 8 new ones) is
  chunked from the waiting queue: its extend range starts after the prefix it locks, and the walk stops
  there, so Y, waiting behind it, is not looked at;
- X's second chunk is cut by the KV room (4 slots left, fewer than the rows); the round after, no room is
  left at all: X is refused and kept, and H1 is retracted to give the running H2 its next slot;
- X's last chunk is admitted whole; Y and the retracted H1 come back once there is room.
"""

from __future__ import annotations

from minisgl.scenarios.base import Look, Scenario, Submit
from minisgl.scenarios.look import events

DONE = {"ignore_eos": True}
Z = tuple(range(1000, 1034))  # 34 tokens: chunks of 6 rows, the last one 4


def look_at(trace) -> Look:
    notable = events(trace, "sched.admission", lambda ev: ev.get("decision") != "admitted" or ev.rid == "R2")
    lines = []
    for ev in notable:
        before = ev.get("before") or {}
        lines.append(f"round {ev.round}: {ev.rid} {ev.get('decision')} ({ev.get('budget') or 'exact fit'}), "
                     f"extend_range {ev.get('extend_range')}, need {ev.get('need')}, rem_total_tokens "
                     f"{before.get('rem_total_tokens')}, rem_kv_room {before.get('rem_kv_room')}")
    cut = [ev for ev in notable if ev.rid == "X" and ev.get("budget") == "kv_cache"]
    return Look(lines, rid="X", round=cut[0].round if cut else None)


SCENARIO = Scenario(
    name="admission_boundaries",
    title="The PrefillAdder at its boundaries",
    teaches="exact fits of rem_total_tokens, the idle engine's first request, a locked prefix, a chunk cut "
    "by the rows and by the KV room, a chunked request refused for lack of room",
    lesson="admission",
    flags={
        "max_total_tokens": 46,
        "max_prefill_tokens": 6,
        "chunked_prefill_size": 8,
        "max_running_requests": 4,
    },
    steps=(
        # the first candidate of an idle engine, longer than the rows: chunked 6 rows at a time
        Submit(0, "Z", ids=Z, max_new_tokens=1, params=DONE),
        # an idle round: R1 locks Z's 34 cached slots, R2 needs exactly what is left, R3 more than that
        Submit(6, "R1", ids=Z + (1100,), max_new_tokens=2, params=DONE),
        Submit(6, "R2", ids=(1200, 1201, 1202), max_new_tokens=6, params=DONE),
        Submit(6, "R3", ids=(1300, 1301), max_new_tokens=1, params=DONE),
        # two running requests that hold slots while X is chunked
        Submit(15, "H1", ids=(1400, 1401, 1402, 1403, 1404), max_new_tokens=6, params=DONE),
        Submit(15, "H2", ids=(1500,), max_new_tokens=6, params=DONE),
        # X: 30 tokens of Z (24 still cached), then 8 new ones: a chunk from the queue after a locked prefix,
        # then one cut by the KV room, then none at all; Y waits behind it
        Submit(17, "X", ids=Z[:30] + tuple(range(1600, 1608)), max_new_tokens=2, params=DONE),
        Submit(17, "Y", ids=(1700, 1701), max_new_tokens=1, params=DONE),
    ),
    look_at=look_at,
)
