"""StateCache: the state at any event, in any order of visits, equals tracer's own state_at."""

from __future__ import annotations

import random

import pytest

from tracer.replay import replay, state_at
from tui.states import StateCache


@pytest.mark.parametrize("spacing", [1, 7, 10_000])
@pytest.mark.parametrize("which", ["engine_trace", "server_trace"])
def test_equals_state_at_in_any_order(request, which, spacing):
    trace = request.getfixturevalue(which)
    cache = StateCache(trace, spacing=spacing)
    order = list(range(len(trace.events)))
    random.Random(spacing).shuffle(order)
    for i in order + list(range(len(trace.events))) + order[::-1]:
        assert cache.at(i) == state_at(trace, i), i


def test_round_ends_equal_replay_and_rows_follow(engine_trace):
    cache = StateCache(engine_trace, spacing=1)
    for state in replay(engine_trace):
        assert cache.at(state.event_index) == state
    # round 2: req-a's row holds its chunked prefix (slots 1-4) and this round's two tokens (5, 6)
    end2 = replay(engine_trace)[1].event_index
    cache.at(end2)
    assert cache.rows_of("req-a") == {0: 1, 1: 2, 2: 3, 3: 4, 4: 5, 5: 6}
    assert cache.rows_of("nobody") == {}


def test_forget_from_recomputes(engine_trace):
    cache = StateCache(engine_trace, spacing=1)
    last = len(engine_trace.events) - 1
    cache.at(last)
    cache.forget_from(30)
    assert all(mark < 30 for mark in cache._marks)
    assert cache.at(last) == state_at(engine_trace, last)
    with pytest.raises(IndexError):
        cache.at(last + 1)
