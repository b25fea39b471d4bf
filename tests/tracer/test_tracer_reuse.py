"""One process may write several traces in turn (a test session, a notebook running scenarios): each new
trace starts clean, with no round left over from the engine that wrote the last one."""

from __future__ import annotations

from tracer.api import Tracer
from tracer.reader import load_trace


def test_a_new_trace_starts_before_any_round(tmp_path):
    t = Tracer()
    t.configure(tmp_path / "first", "engine")
    t.round = 7
    t.event("sched.round_end")
    t.close()
    t.configure(tmp_path / "second", "engine")
    t.event("sched.config", kv_size=8)
    t.close()
    first, second = load_trace(tmp_path / "first"), load_trace(tmp_path / "second")
    assert [ev.round for ev in first.events] == [None, 7]
    assert [(ev.name, ev.round) for ev in second.events] == [("trace.process_start", None), ("sched.config", None)]
