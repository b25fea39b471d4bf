"""Traces of a server with --dp-size N > 1: N scheduler processes (scheduler_dp0 …), each with its own
rounds, KV pool and radix tree. Replay re-simulates one scheduler, so a reader takes one rank's view: the
events of every process except the other ranks' schedulers (the HTTP server, the TokenizerManager, the
DataParallelController and the detokenizer stay, so a request routed elsewhere still shows its HTTP side)."""

from __future__ import annotations

import dataclasses

from tracer.reader import Trace
from tracer.schema import DP_SCHEDULER_PREFIX


def dp_scheduler_procs(trace: Trace) -> list[str]:
    """The data-parallel scheduler processes of the trace, by rank ([] for a single scheduler)."""
    procs = {p.proc for p in trace.processes()}
    ranks = [p for p in procs if p.startswith(DP_SCHEDULER_PREFIX) and p[len(DP_SCHEDULER_PREFIX):].isdigit()]
    return sorted(ranks, key=lambda p: int(p[len(DP_SCHEDULER_PREFIX):]))


def keeps(proc: str, rank_proc: str) -> bool:
    """Whether rank `rank_proc`'s view holds an event of process `proc`."""
    return proc == rank_proc or not proc.startswith(DP_SCHEDULER_PREFIX)


def rank_view(trace: Trace, rank_proc: str) -> Trace:
    """A trace of its own: every event `keeps` admits, re-indexed (copies: the full trace is untouched)."""
    events = [dataclasses.replace(ev) for ev in trace.events if keeps(ev.proc, rank_proc)]
    for i, ev in enumerate(events):
        ev.index = i
    processes = [p for p in trace.processes() if keeps(p.proc, rank_proc)]
    return Trace(trace.folder, events, processes, list(trace.warnings))


def pick_rank(trace: Trace, dp_rank: int) -> Trace:
    """The view of rank `dp_rank` when the trace has several scheduler ranks; else the trace unchanged.
    Raises ValueError for a rank the trace does not have."""
    procs = dp_scheduler_procs(trace)
    if not procs:
        return trace
    want = f"{DP_SCHEDULER_PREFIX}{dp_rank}"
    if want not in procs:
        raise ValueError(f"the trace has scheduler ranks {', '.join(procs)}, not {want}")
    return rank_view(trace, want)
