"""The scrubber's model on the engine fixture: every move a key makes, without a terminal."""

from __future__ import annotations

from tests.tracer.helpers import ENGINE
from tracer.reader import TraceTail
from tui.index import TraceIndex
from tui.timeline import SPEEDS, Timeline


def _timeline(trace) -> Timeline:
    return Timeline(TraceIndex(trace))


def test_event_steps_and_ends(engine_trace):
    t = _timeline(engine_trace)
    n = len(engine_trace.events)
    assert t.cursor == 0 and not t.step(-1)
    assert t.step(1) and t.cursor == 1
    assert t.step(5) and t.cursor == 6
    assert t.step(-2) and t.cursor == 4
    assert t.to_end() and t.cursor == n - 1 and t.at_end()
    assert not t.step(1) and t.cursor == n - 1
    assert t.step(-1000) and t.cursor == 0  # a big step stops at the first event
    assert not t.to_start()


def test_round_steps_land_on_round_ends(engine_trace):
    t = _timeline(engine_trace)
    ends = [ev.index for ev in engine_trace.events if ev.name == "sched.round_end"]
    visited = []
    while t.step_round(1):
        visited.append(t.cursor)
    assert visited == ends
    assert [engine_trace.events[i].round for i in visited] == [1, 2, 3, 4, 5]
    assert t.step(1) and t.step_round(-1) and t.cursor == ends[-1]  # back from just after a round end
    assert t.step_round(-2) and t.cursor == ends[-3]
    t.to_start()
    assert not t.step_round(-1)


def test_follow_visits_only_the_pinned_request(engine_trace):
    t = _timeline(engine_trace)
    t.step(4)  # tm.tokenized of req-b
    t.pin("req-a")
    assert "req-a" in engine_trace.events[t.cursor].all_rids and t.cursor > 4  # moved to its next event
    t.to_start()
    seen = [t.cursor]
    while t.step(1):
        seen.append(t.cursor)
    assert seen == [ev.index for ev in engine_trace.by_rid("req-a")]
    # req-b ran in rounds 2, 3 and 4 (it was never chunked, and finished in round 4)
    t.pin("req-b")
    t.to_start()
    rounds = []
    while t.step_round(1):
        rounds.append(engine_trace.events[t.cursor].round)
    assert rounds == [1, 2, 3, 4]  # round 1: it was created and queued
    t.pin(None)
    assert len(t.visible()) == len(engine_trace.events)


def test_filter_by_name_and_rid(engine_trace):
    t = _timeline(engine_trace)
    t.set_filter("kv.assigned req-b")
    names = [(engine_trace.events[i].name, engine_trace.events[i].rid) for i in t.visible()]
    assert names == [("kv.assigned", "req-b")] * 3
    assert engine_trace.events[t.cursor].name == "kv.assigned"  # the cursor moved onto a match
    t.set_filter("no-such-event")
    assert list(t.visible()) == [] and not t.step(1)
    t.set_filter("")
    assert t.step(1)


def test_play_ticks_forward_and_stops_at_the_end(engine_trace):
    t = _timeline(engine_trace)
    assert not t.tick()  # paused
    assert t.toggle_play()
    assert t.tick() and t.cursor == 1
    assert t.faster() == SPEEDS[3] and t.slower() == SPEEDS[2]
    for _ in range(5):
        t.slower()
    assert t.speed == SPEEDS[0]
    t.to_end()
    t.step(-1)
    assert t.tick() and not t.playing  # reached the end: paused
    assert t.toggle_play() and t.cursor == 0  # play again from the top


def test_rebase_keeps_the_event_or_follows_the_end(tmp_path):
    (src,) = ENGINE.glob("*.jsonl")
    lines = src.read_text().splitlines(keepends=True)
    path = tmp_path / src.name
    path.write_text("".join(lines[:30]))
    tail = TraceTail(tmp_path)
    tail.poll()
    t = _timeline(tail.trace)
    t.step(10)
    key = (tail.trace.events[10].pid, tail.trace.events[10].seq)
    with path.open("a") as f:
        f.write("".join(lines[30:50]))
    tail.poll()
    t.rebase(TraceIndex(tail.trace), key, follow_tail=False)
    assert t.cursor == 10 and t.size == 50
    t.to_end()
    with path.open("a") as f:
        f.write("".join(lines[50:]))
    tail.poll()
    t.rebase(TraceIndex(tail.trace), None, follow_tail=True)
    assert t.cursor == len(lines) - 1
