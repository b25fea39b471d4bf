"""Which request and which round a diagram is about: the user's choice checked, or a sensible default."""

from __future__ import annotations

from tracer.diagrams.errors import DiagramError
from tracer.fmt import short_rid
from tracer.reader import Trace, TraceError
from tracer.replay import replay, state_at
from tracer.schema import SCHED_BATCH_FORMED
from tracer.state import RoundState


def resolve_rid(trace: Trace, rid: str | None) -> str | None:
    """The full rid for `rid` (a unique prefix will do), or None when none was given."""
    if rid is None:
        return None
    from tracer.show import find_rid

    try:
        return find_rid(trace, rid)
    except TraceError as e:
        raise DiagramError(str(e)) from None


def request_for(trace: Trace, rid: str | None, view: str) -> str:
    """A view that follows one request: the given one, or the trace's only request."""
    full = resolve_rid(trace, rid)
    if full is not None:
        return full
    rids = trace.rids()
    if len(rids) == 1:
        return rids[0]
    known = ", ".join(short_rid(r) for r in rids) or "none"
    raise DiagramError(f"the {view} view follows one request: give --rid (this trace has {len(rids)}: "
                       f"{known})")


def batch_rounds(trace: Trace, rid: str) -> list[int]:
    """The rounds whose batch held `rid`, ascending."""
    formed = (ev for ev in trace.by_rid(rid) if ev.name == SCHED_BATCH_FORMED)
    return sorted({ev.round for ev in formed if ev.round is not None})


def pick_round(trace: Trace, rid: str | None, round: int | None) -> int:
    """`round` if the trace has it; else the request's first batched round; else the trace's last round."""
    rounds = trace.rounds()
    if not rounds:
        raise DiagramError("the trace has no scheduler rounds (no batch was ever formed)")
    if round is not None:
        if round not in rounds:
            raise DiagramError(f"round {round} is not in the trace (it has rounds {rounds[0]}–{rounds[-1]})")
        return round
    if rid is None:
        return rounds[-1]
    mine = batch_rounds(trace, rid)
    if not mine:
        raise DiagramError(f"request {short_rid(rid)} never ran in a batch, so it has no round to draw; "
                           "give --round N")
    return mine[0]


def round_state(trace: Trace, n: int) -> RoundState:
    """The scheduler's state at the end of round `n` (or as far as a trace still being written goes)."""
    for state in replay(trace):
        if state.round == n:
            return state
    events = trace.events_in_round(n)
    if not events:
        raise DiagramError(f"round {n} is not in the trace")
    return state_at(trace, events[-1].index)


def replayed_rounds(trace: Trace, upto: int) -> list[RoundState]:
    """The states of every round up to and including `upto`, in order."""
    ended = {s.round: s for s in replay(trace)}
    return [ended[n] if n in ended else round_state(trace, n) for n in trace.rounds() if n <= upto]


def admissions(trace: Trace, rid: str | None, round: int | None, all_rounds: bool) -> list:
    """The admission view's rounds: `round`; every round with admission events (all_rounds); else the first
    round that looked at the request, or the first with any admission event. Schema 2 traces only."""
    from tracer.admission import NAMES, PredatesBudgets, admission_of, admission_rounds, require_budgets

    try:
        require_budgets(trace)
    except PredatesBudgets as e:
        raise DiagramError(str(e)) from None
    if round is not None:
        return [admission_of(trace, pick_round(trace, None, round))]
    rounds = admission_rounds(trace)
    if not rounds:
        raise DiagramError("no round of this trace has admission events (nothing ever waited for a batch)")
    if all_rounds:
        return [admission_of(trace, n) for n in rounds]
    full = resolve_rid(trace, rid)
    if full is not None:
        mine = [n for n in rounds
                if any(ev.name in NAMES and full in (*ev.all_rids, *(ev.get("waiting") or []),
                                                                       *(ev.get("not_considered") or []))
                                         for ev in trace.events_in_round(n))]
        if not mine:
            raise DiagramError(f"request {short_rid(full)} never waited for admission; give --round N")
        rounds = mine
    return [admission_of(trace, rounds[0])]


def scheduler_view(trace: Trace, rid: str | None) -> Trace:
    """A --dp-size trace has one scheduler per rank, each with its own rounds, pool and tree: the round, kv,
    radix and admission views draw the view of the rank `rid` was dispatched to (rank 0 without a rid).
    Any other trace is returned as it is."""
    from tracer.dp_ranks import dp_scheduler_procs, rank_view
    from tracer.schema import DP_DISPATCH, DP_SCHEDULER_PREFIX

    if not dp_scheduler_procs(trace):
        return trace
    full = resolve_rid(trace, rid)
    rank = next((ev.get("dp_rank") for ev in trace.events if ev.name == DP_DISPATCH and ev.rid == full), 0)
    return rank_view(trace, f"{DP_SCHEDULER_PREFIX}{rank}")
