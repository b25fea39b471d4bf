"""replay: the scheduler's state at every round, rebuilt from delta events only (fixture: two requests,
a shared prefix, a chunked prompt, a retraction and an eviction — see fixtures/make_fixtures.py)."""

from __future__ import annotations

import copy

import pytest

from tests.tracer.helpers import ENGINE, SERVER, find
from tracer.reader import load_trace
from tracer.replay import Replayer, replay, state_at
from tracer.state import TREE
from tracer.tree import nested

A, B = "req-a", "req-b"


@pytest.fixture(scope="module")
def states():
    return replay(load_trace(ENGINE))


def test_queues_at_every_round(states):
    got = [(s.round, s.waiting, s.running, s.chunked, s.free_slots) for s in states]
    assert got == [
        (1, [B], [], A, 6),  # req-a's first chunk runs; req-b waits
        (2, [], [], None, 3),  # both prefill; they join the running batch at the start of round 3
        (3, [], [A, B], None, 1),
        (4, [A], [], None, 0),  # req-a retracted to the queue's front, req-b finished
        (5, [], [], None, 1),
    ]


def test_kv_ownership_at_every_round(states):
    assert [s.slots_of(TREE) for s in states] == [
        [1, 2, 3, 4], list(range(1, 8)), list(range(1, 8)), list(range(1, 11)), list(range(1, 10))]
    r3 = states[2]
    assert (r3.slots_of(A), r3.slots_of(B)) == ([8], [9])  # this round's decode rows, not yet cached
    assert all(not s.slots_of(A) and not s.slots_of(B) for s in states if s is not r3)
    assert [s.cached_slots for s in states] == [4, 7, 7, 10, 9]


def test_radix_tree_at_every_round(states):
    def shape(node):
        return (node["key"], node["value"], node["lock_ref"], [shape(c) for c in node["children"]])

    root = [shape(nested(s.tree)) for s in states]
    assert root[0] == ([], [], 1, [([10, 11, 12, 13], [1, 2, 3, 4], 1, [])])
    assert root[1] == ([], [], 1, [([10, 11, 12, 13], [1, 2, 3, 4], 2, [([14, 15], [5, 6], 1, []),
                                                                        ([20], [7], 1, [])])])
    assert root[2] == root[1]  # a decode round changes no node
    assert root[4] == ([], [], 1, [([10, 11, 12, 13], [1, 2, 3, 4], 0, [
        ([14, 15], [5, 6], 0, [([40], [8], 0, [([41], [9], 0, [])])]), ([20], [7], 0, [])])])
    assert [n["id"] for n in states[4].tree] == [0, 1, 2, 3, 4, 6]  # node 5 ([50, 51]) was evicted


def test_request_progress(states):
    assert [(s.reqs[A].status, s.reqs[B].status) for s in states] == [
        ("running", "waiting"), ("running", "running"), ("running", "running"), ("retracted", "finished"),
        ("finished", "finished")]
    assert [s.reqs[A].output_ids for s in states] == [[], [40], [40, 41], [40, 41], [40, 41, 42]]
    a, b = states[-1].reqs[A], states[-1].reqs[B]
    assert (a.input_len, a.cached_tokens, a.output_len, a.prefix_len) == (6, 0, 3, 7)
    assert (b.input_len, b.cached_tokens, b.output_len, b.output_ids) == (5, 4, 3, [50, 51, 52])
    assert (a.prefill_rounds, a.decode_rounds) == ([1, 2, 5], [3])
    assert (b.prefill_rounds, b.decode_rounds) == ([2], [3, 4])
    assert a.finish_reason == {"type": "length", "length": 3}


def rows(state, rid=None):
    return [(r.rid, r.position, r.input_id, r.slot, r.cached, r.sampled, r.token) for r in state.batch.rows
            if rid in (None, r.rid)]


def test_batch_rows(states):
    assert [s.batch.mode for s in states] == ["EXTEND", "EXTEND", "DECODE", "DECODE", "EXTEND"]
    # round 1: an intermediate chunk: four new rows, none samples
    assert rows(states[0]) == [(A, p, 10 + p, 1 + p, False, False, None) for p in range(4)]
    # round 2: both requests read [10..13] from the cache and compute their tails
    cached = [(p, 10 + p, 1 + p, True, False, None) for p in range(4)]
    assert rows(states[1], A) == [(A, *c) for c in cached] + [(A, 4, 14, 5, False, False, None),
                                                                (A, 5, 15, 6, False, True, 40)]
    assert rows(states[1], B) == [(B, *c) for c in cached] + [(B, 4, 20, 7, False, True, 50)]
    assert rows(states[2]) == [(A, 6, 40, 8, False, True, 41), (B, 5, 50, 9, False, True, 51)]
    # round 5: the resumed request finds 7 tokens cached (its prompt and its first output token)
    r5 = rows(states[4])
    assert [(r[1], r[2], r[3]) for r in r5 if r[4]] == list(zip(range(7), [10, 11, 12, 13, 14, 15, 40],
                                                                [1, 2, 3, 4, 5, 6, 8]))
    assert r5[-1] == (A, 7, 41, 9, False, True, 42)
    assert [len(s.batch.forward_rows) for s in states] == [4, 3, 2, 1, 1]
    assert [s.batch.duration_ms for s in states] == [3.0, 2.5, 1.5, 1.2, 1.3]


def test_state_at_mid_round():
    trace = load_trace(ENGINE)
    names = [(ev.name, ev.round) for ev in trace.events]
    end2 = names.index(("sched.round_end", 2))
    at_end2 = state_at(trace, end2)
    assert (at_end2.running, at_end2.free_slots, at_end2.batch.round) == ([], 3, 2)
    # the first event of round 3: last round's prefill requests have joined the running batch
    first3 = state_at(trace, end2 + 1)
    assert (first3.round, first3.running, first3.batch) == (3, [A, B], None)
    assert first3.slots_of("(allocated)") == [8, 9]
    formed3 = state_at(trace, names.index(("sched.batch_formed", 3)))
    assert (formed3.batch.mode, formed3.batch.round) == ("DECODE", 3)
    evicted = state_at(trace, names.index(("cache.evicted", 5)))
    assert (evicted.free_slots, evicted.waiting, evicted.reqs[A].status) == (2, [], "running")
    last = state_at(trace, len(trace.events) - 1)
    assert {r: s.status for r, s in last.reqs.items()} == {A: "finished", B: "finished"}
    with pytest.raises(IndexError):
        state_at(trace, len(trace.events))


def test_state_at_agrees_with_replay_at_round_ends():
    trace = load_trace(ENGINE)
    for s in replay(trace):
        again = state_at(trace, s.event_index)
        assert (again.waiting, again.running, again.chunked, again.slot_owner, again.tree) == (
            s.waiting, s.running, s.chunked, s.slot_owner, s.tree)
        assert rows(again) == rows(s)


def test_pool_size_without_sched_config(broken):
    trace = load_trace(broken(ENGINE, lambda f: f["engine-4242.jsonl"].remove(
        find(f["engine-4242.jsonl"], "sched.config"))))
    assert [s.free_slots for s in replay(trace)] == [6, 3, 1, 0, 1]


def test_level_1_counts_tokens_from_the_batch(broken):
    level2 = {"sched.sampled", "sched.output_appended", "detok.decoded"}

    def to_level_1(files):
        records = files["engine-4242.jsonl"]
        records[:] = [r for r in records if r["name"] not in level2]
        records[0]["attrs"]["level"] = 1
        for r in records:
            if r["name"] == "sched.batch_formed":
                del r["attrs"]["input_ids"]

    states = replay(load_trace(broken(ENGINE, to_level_1)))
    assert [(s.reqs[A].output_len, s.reqs[B].output_len) for s in states] == [(0, 0), (1, 1), (2, 2), (2, 3),
                                                                              (3, 3)]
    assert states[2].batch.rows[0].input_id is None  # no token ids at level 1
    assert [s.waiting for s in states] == [[B], [], [], [A], []]


@pytest.mark.parametrize("source", [ENGINE, SERVER])
def test_round_snapshots_are_the_live_requests_then_and_later_events_leave_them_alone(source):
    """state() shares the copy of a request no event touched since the last snapshot (copy-on-write):
    every snapshot must still equal the live requests at the moment it was taken."""
    trace = load_trace(source)
    replayer = Replayer(trace.level)
    taken = []
    for ev in trace.events:
        replayer.apply(ev)
        if ev.name == "sched.round_end":
            taken.append((replayer.state(), copy.deepcopy(replayer.reqs)))
    assert len(taken) == len(trace.rounds()) > 1
    for state, live in taken:
        assert state.reqs == live
        assert all(state.reqs[r] is not replayer.reqs[r] for r in state.reqs)  # copies, never the live ones
