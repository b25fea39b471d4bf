"""Replay a whole trace, and resume it at any event: the one checkpoint scheme that `replay`, `state_at`
and the TUI's StateCache share (the state machine itself is `tracer.replayer.Replayer`).

A checkpoint is a Replayer's state at a `sched.round_end` plus its scratch (each live request's KV row
and known tokens): a Replayer restored from one continues exactly as the original would have.
"""

from __future__ import annotations

import bisect

from tracer.event import Event
from tracer.reader import Trace
from tracer.replayer import Replayer
from tracer.schema import SCHED_ROUND_END
from tracer.state import RoundState

__all__ = ["Checkpoint", "Checkpoints", "Replayer", "replay", "state_at"]

Checkpoint = tuple[RoundState, tuple[dict, dict]]  # the state, and (rows, tokens) of the live requests


class Checkpoints:
    """Checkpoints at round ends at least `stride` events apart (0: every round end), ascending, and a
    Replayer resumed from the nearest one: a step back replays at most about `stride` events."""

    def __init__(self, stride: int = 0):
        self.stride = stride
        self.marks: list[int] = []  # the event index of each checkpoint, ascending
        self.saved: list[Checkpoint] = []

    def offer(self, index: int, ev: Event, r: Replayer) -> None:
        """Called after `r` applied events[index]: keep a checkpoint if that is a round end far enough on."""
        if ev.name == SCHED_ROUND_END and index - (self.marks[-1] if self.marks else 0) >= self.stride:
            self.marks.append(index)
            self.saved.append(save(r))

    def last_mark(self, index: int) -> int:
        """The event index of the last checkpoint at or before `index`; -1 when there is none."""
        k = bisect.bisect_right(self.marks, index) - 1
        return self.marks[k] if k >= 0 else -1

    def resume(self, index: int, level: int) -> Replayer:
        """A Replayer at the last checkpoint at or before event `index` (a fresh one when there is none)."""
        k = bisect.bisect_right(self.marks, index) - 1
        return restore(self.saved[k], level) if k >= 0 else Replayer(level)

    def forget_from(self, index: int) -> None:
        """Drop the checkpoints taken at event `index` or later (a live trace changed from there on)."""
        k = bisect.bisect_left(self.marks, index)
        del self.marks[k:], self.saved[k:]


# save and restore read and set the Replayer's scratch: they are its checkpoint half, kept here so that the
# scheme (what a checkpoint holds, how a Replayer resumes) is written once
def save(r: Replayer) -> Checkpoint:
    """A copy of the Replayer's state and scratch: what replay remembers across rounds beyond RoundState."""
    rows = {rid: dict(row) for rid, row in r._rows.items()}
    return r.state(), (rows, {rid: dict(t) for rid, t in r._tokens.items()})


def restore(checkpoint: Checkpoint, level: int) -> Replayer:
    """A Replayer that continues from a checkpoint taken at a sched.round_end."""
    (state, (rows, tokens)), r = checkpoint, Replayer(level)
    r.kv_size, r.round = state.kv_size, state.round
    r.event_index, r.time_ns = state.event_index, state.time_ns
    r.waiting, r.running, r.chunked = list(state.waiting), list(state.running), state.chunked
    r.reqs = {k: s.copy() for k, s in state.reqs.items()}
    r.slot_owner, r.tree = dict(state.slot_owner), state.tree
    r.batch = r._result_batch = state.batch.copy() if state.batch else None
    r._batches = {r.batch.round: r.batch} if r.batch else {}
    r._rows, r._tokens = {k: dict(v) for k, v in rows.items()}, {k: dict(v) for k, v in tokens.items()}
    r._round_closed = True
    return r


def replay(trace: Trace) -> list[RoundState]:
    """The state at the end of every round (at each sched.round_end), in order."""
    return [state for state, _ in _checkpoints(trace).saved]


def state_at(trace: Trace, event_index: int) -> RoundState:
    """The state right after events[event_index]: the last round's state, plus this round's events so far."""
    if not 0 <= event_index < len(trace.events):
        raise IndexError(f"event index {event_index} is outside the trace (0..{len(trace.events) - 1})")
    r = _checkpoints(trace).resume(event_index, trace.level or 2)
    for ev in trace.events[r.event_index + 1 : event_index + 1]:
        r.apply(ev)
    return r.state()


def _checkpoints(trace: Trace) -> Checkpoints:
    """One replay of the whole trace, a checkpoint at every round end, kept in trace.cache (Trace.extend
    clears it): replay is pure."""
    cached = trace.cache.get("replay_checkpoints")
    if cached is not None:
        return cached
    r, out = Replayer(trace.level or 2), Checkpoints()
    for i, ev in enumerate(trace.events):
        r.apply(ev)
        out.offer(i, ev, r)
    trace.cache["replay_checkpoints"] = out
    return out
