"""The scheduler's state at any event, fast enough to scrub a 100k-event trace.

`tracer.replay.state_at` keeps a full copy of the state at every round end, and a copy holds every request
seen so far: fine for a lesson's trace, quadratic for a long one. Here one Replayer walks forward as the
cursor does, and tracer's checkpoints are kept only every `spacing` events (at a round end, where a Replayer
can resume), so a step back replays at most about `spacing` events.
"""

from __future__ import annotations

from tracer.reader import Trace
from tracer.replay import Checkpoints, Replayer
from tracer.state import RoundState


class StateCache:
    """`at(i)`: the state right after event i, equal to `tracer.replay.state_at(trace, i)`.

    The returned state shares the walking Replayer's lists and dicts (no copy per step): read it before the
    next call, and never change it."""

    def __init__(self, trace: Trace, spacing: int | None = None):
        self.trace = trace
        self.spacing = spacing or max(256, len(trace.events) // 64)
        self._checkpoints = Checkpoints(stride=self.spacing)
        self._r = Replayer(self._level())

    @property
    def _marks(self) -> list[int]:
        """The event index of each checkpoint, ascending."""
        return self._checkpoints.marks

    def _level(self) -> int:
        return self.trace.level or 2

    def at(self, index: int) -> RoundState:
        if not 0 <= index < len(self.trace.events):
            raise IndexError(f"event index {index} is outside the trace (0..{len(self.trace.events) - 1})")
        mark = self._checkpoints.last_mark(index)  # the last checkpoint at or before the event
        if index < self._r.event_index or mark > self._r.event_index:
            self._r = self._checkpoints.resume(index, self._level())
        events, checkpoints = self.trace.events, self._checkpoints
        for i in range(self._r.event_index + 1, index + 1):
            ev = events[i]
            self._r.apply(ev)
            checkpoints.offer(i, ev, self._r)
        return self._view()

    def rows_of(self, rid: str) -> dict[int, int | None]:
        """The request's KV row as of the last `at`: position -> slot (None where replay cannot tell)."""
        return self._r.row_of(rid)

    def _view(self) -> RoundState:
        r = self._r
        return RoundState(round=r.round, event_index=r.event_index, time_ns=r.time_ns, waiting=r.waiting,
                          running=r.running, chunked=r.chunked, reqs=r.reqs, slot_owner=r.slot_owner,
                          tree=r.tree, kv_size=r.kv_size, batch=r.batch)

    def forget_from(self, index: int) -> None:
        """A live trace changed from event `index` on: drop what was computed from those events."""
        self._checkpoints.forget_from(index)
        if self._r.event_index >= index:
            self._r = Replayer(self._level())
