"""Tensor-parallel traces (`minisgl serve --tp-size N`): rank 0's scheduler writes the `scheduler` process
every reader knows; ranks 1..N-1 write `scheduler_tp1`, `scheduler_tp2`, … with the same kinds of events.

Ranks run the same scheduling decisions on the same inputs, so their events repeat rank 0's. The reader
keeps them beside the timeline (`Trace.tp_rank_events`), not in it: replay, diagrams and the other checks
read rank 0, as they read the one scheduler of a tp=1 trace. `check_tp_ranks` then holds every other rank
to rank 0: the same forwards (round, mode, rows, requests) and, at trace level 2, the same sampled tokens.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

from tracer import schema as S

if TYPE_CHECKING:
    from tracer.event import Event
    from tracer.reader import Trace

TP_RANK_PREFIX = "scheduler_tp"


def is_tp_rank(proc: str) -> bool:
    return proc.startswith(TP_RANK_PREFIX)


def split_tp_ranks(events: list[Event]) -> tuple[list[Event], dict[str, list[Event]]]:
    """(the timeline's events, the other ranks' events by process name)."""
    main: list[Event] = []
    ranks: dict[str, list[Event]] = defaultdict(list)
    for ev in events:
        (ranks[ev.proc] if is_tp_rank(ev.proc) else main).append(ev)
    return main, dict(ranks)


def tp_ranks_by_round(trace: Trace) -> dict[int, list[int]]:
    """A --tp-size trace: for each round, the tp ranks that traced its model.forward (rank 0 is `scheduler`);
    {} for a trace without tp ranks."""
    if not trace.tp_rank_events:
        return {}
    out: dict[int, list[int]] = {}
    for ev in trace.events + [e for evs in trace.tp_rank_events.values() for e in evs]:
        if ev.name == S.MODEL_FORWARD and ev.ph == S.PH_BEGIN and ev.round is not None:
            rank = int(ev.proc[len(TP_RANK_PREFIX):]) if is_tp_rank(ev.proc) else 0
            out.setdefault(ev.round, []).append(rank)
    return {r: sorted(ranks) for r, ranks in out.items()}


def _steps(events: list[Event]) -> list[tuple]:
    """What must agree across ranks, in the order the rank wrote it."""
    out = []
    for ev in sorted(events, key=lambda e: (e.file, e.line)):
        if ev.name == S.MODEL_FORWARD and ev.ph == S.PH_BEGIN:
            out.append(("model.forward", ev.round, ev.get("forward_mode"), ev.get("num_rows"),
                        tuple(ev.rids or ())))
        elif ev.name == S.SCHED_SAMPLED:
            out.append(("sched.sampled", ev.round, tuple(ev.rids or ()), tuple(ev.get("token_ids") or ())))
    return out


def check_tp_ranks(trace: Trace) -> list[str]:
    """Every other rank ran rank 0's forwards and sampled its tokens; its own `seq` has no gap."""
    if not trace.tp_rank_events:
        return []
    rank0 = _steps([ev for ev in trace.events if ev.proc == "scheduler"])
    out = []
    for proc, events in sorted(trace.tp_rank_events.items()):
        steps = _steps(events)
        if len(steps) != len(rank0):
            out.append(f"tp: {proc} traced {len(steps)} forwards and samplings, rank 0 {len(rank0)}")
        for i, (mine, ref) in enumerate(zip(steps, rank0)):
            if mine != ref:
                out.append(f"tp: {proc}'s step {i} differs from rank 0's: {mine[:4]} vs {ref[:4]}")
                break
        seqs = sorted((ev.file, ev.line, ev.seq, ev.name) for ev in events)
        expected = 0
        for file, line, seq, name in seqs:
            if name == S.TRACE_PROCESS_START and seq == 0:
                expected = 0
            if seq != expected:
                out.append(f"seq: {file}:{line}: {name} has seq {seq}, expected {expected}")
                break
            expected = seq + 1
    return out
