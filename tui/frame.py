"""One scrubber position, as every pane sees it: computed once per step, then handed to each pane."""

from __future__ import annotations

from dataclasses import dataclass, field

from tracer.event import Event
from tracer.fmt import short_rid
from tracer.reader import Trace
from tracer.state import RoundState
from tui.index import TraceIndex
from tui.palette import RID_COLORS


@dataclass
class Frame:
    """`state` shares the replayer's objects (see StateCache): panes read it, never change it."""

    trace: Trace
    index: TraceIndex
    cursor: int  # -1 when the trace has no events yet
    event: Event | None
    state: RoundState | None
    rid: str | None  # the selected request
    rid_row: dict[int, int | None] = field(default_factory=dict)  # its KV row: position -> slot

    def color(self, rid: str | None) -> str:
        order = self.index.rid_order
        return RID_COLORS[order.get(rid, 0) % len(RID_COLORS)] if rid is not None else "white"

    def rid_label(self, rid: str | None, width: int = 10) -> str:
        return short_rid(rid, width)

    def ms_since_start(self, time_ns: int) -> str:
        """Time since the first request's first event (before it, negative: the server was starting)."""
        t0 = self.index.t0 if self.index.t0 is not None else self.trace.start_ns
        return f"{(time_ns - t0) / 1e6:+.3f} ms"
