"""The scrubber's model: a cursor over the merged timeline, with follow mode (one pinned request), a
filter, and play/pause. Plain Python, so every key's effect is unit-testable without a terminal."""

from __future__ import annotations

import bisect

from tui.index import TraceIndex

SPEEDS = (1, 2, 5, 10, 20, 50, 100)  # events per second while playing
DEFAULT_SPEED = 2  # SPEEDS[2]: 5 events per second


class Timeline:
    """Where the scrubber stands. `cursor` is an event index (-1 while a live trace has no events).

    Event steps visit only the visible events: the pinned request's (follow mode) that match the filter.
    Round steps land on the end of a round (its sched.round_end), where the round's whole batch, its
    sampled tokens and its KV writes are in place; in follow mode only the pinned request's rounds."""

    def __init__(self, index: TraceIndex):
        self.index = index
        self.cursor = 0 if index.trace.events else -1
        self.pinned: str | None = None
        self.filter = ""
        self.playing = False
        self.speed_level = DEFAULT_SPEED
        self._visible: list[int] | None = None  # None: every event

    # ---- what is visible --------------------------------------------------------------------------
    @property
    def size(self) -> int:
        return len(self.index.trace.events)

    @property
    def speed(self) -> int:
        return SPEEDS[self.speed_level]

    def visible(self) -> list[int] | range:
        """The event indices that event steps visit, ascending."""
        if self._visible is None:
            if self.pinned is None and not self.filter:
                return range(self.size)
            self._visible = self._compute_visible()
        return self._visible

    def _compute_visible(self) -> list[int]:
        events = self.index.requests[self.pinned].events if self.pinned in self.index.requests else []
        candidates = events if self.pinned is not None else range(self.size)
        if not self.filter:
            return list(candidates)
        keys, words = self.index.search_keys(), self.filter.lower().split()
        return [i for i in candidates if all(w in keys[i] for w in words)]

    def round_stops(self) -> list[int]:
        """The event indices that round steps land on."""
        if self.pinned is not None:
            return self.index.round_ends_of(self.pinned)
        return self.index.round_ends

    # ---- moves ------------------------------------------------------------------------------------
    def step(self, n: int = 1) -> bool:
        """Move n visible events forward (back if negative). Returns whether the cursor moved."""
        return self._move(self.visible(), n)

    def step_round(self, n: int = 1) -> bool:
        """Move to the end of the next (or, n < 0, the previous) round."""
        return self._move(self.round_stops(), n)

    def to_start(self) -> bool:
        vis = self.visible()
        return self._go(vis[0]) if len(vis) else False

    def to_end(self) -> bool:
        vis = self.visible()
        return self._go(vis[-1]) if len(vis) else False

    def at_end(self) -> bool:
        vis = self.visible()
        return not len(vis) or self.cursor >= vis[-1]

    def _move(self, stops: list[int] | range, n: int) -> bool:
        if not len(stops) or n == 0:
            return False
        if n > 0:  # the n-th stop after the cursor
            i = bisect.bisect_right(stops, self.cursor) + n - 1
            return self._go(stops[min(i, len(stops) - 1)]) if i - n + 1 < len(stops) else False
        i = bisect.bisect_left(stops, self.cursor) + n  # the |n|-th stop before the cursor
        return self._go(stops[max(i, 0)]) if i - n - 1 >= 0 else False

    def _go(self, i: int) -> bool:
        moved = i != self.cursor
        self.cursor = i
        return moved

    # ---- modes ------------------------------------------------------------------------------------
    def pin(self, rid: str | None) -> None:
        """Follow one request (None: follow none). The cursor moves to its nearest event if it is
        elsewhere."""
        self.pinned = rid
        self._changed()

    def set_filter(self, text: str) -> None:
        self.filter = text.strip()
        self._changed()

    def _changed(self) -> None:
        self._visible = None
        vis = self.visible()
        if not len(vis) or self.cursor in vis:
            return
        after = bisect.bisect_left(vis, self.cursor)
        self.cursor = vis[after] if after < len(vis) else vis[-1]

    def toggle_play(self) -> bool:
        self.playing = not self.playing
        if self.playing and self.at_end():
            self.to_start()  # play from the top once the end is reached, like a media player
        return self.playing

    def faster(self) -> int:
        self.speed_level = min(self.speed_level + 1, len(SPEEDS) - 1)
        return self.speed

    def slower(self) -> int:
        self.speed_level = max(self.speed_level - 1, 0)
        return self.speed

    def tick(self) -> bool:
        """One beat of play: a step forward; playing stops at the end. Returns whether it moved."""
        if not self.playing:
            return False
        moved = self.step(1)
        if self.at_end():
            self.playing = False
        return moved

    # ---- a live trace grows -----------------------------------------------------------------------
    def rebase(self, index: TraceIndex, event_key: tuple[int, int] | None, follow_tail: bool) -> None:
        """Take the grown trace's index. The cursor stays on the same event (found by (pid, seq)),
        or moves to the new last event when it was at the end (`tail -f`)."""
        self.index = index
        self._visible = None
        if not self.size:
            self.cursor = -1
            return
        if follow_tail or event_key is None:
            self.cursor = self.size - 1
        else:
            events = index.trace.events
            for i in range(max(self.cursor, 0), self.size):  # a late line only ever moves events later
                if (events[i].pid, events[i].seq) == event_key:
                    self.cursor = i
                    break
        self._changed()  # onto a visible event (the last one, when following the end)
