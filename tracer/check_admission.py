"""The PrefillAdder's arithmetic, checked from the trace alone (schema 2; older traces carry no budgets).

Each round's `sched.prefill_budget` says how the budgets started; each `sched.admission` says them before
and after one candidate. The budgets start as the round says, chain from one candidate to the next, and
drop by exactly what the decision spent.
"""

from __future__ import annotations

from tracer.event import Event
from tracer.reader import Trace
from tracer.schema import BUDGETS, SCHED_ADMISSION, SCHED_PREFILL_BUDGET, SCHED_ROUND_END

__all__ = ["BUDGETS", "check_admission"]  # BUDGETS lives in tracer.schema; importable from here as before
TOLERANCE = 1e-3  # rem_total_tokens is a float rounded to 4 decimals in the trace


def check_admission(trace: Trace) -> list[str]:
    """One line per broken step of the admission arithmetic; [] when every step adds up."""
    out: list[str] = []
    budgets: dict | None = None  # where the round's budgets stand now
    for ev in trace.events:
        if ev.name == SCHED_PREFILL_BUDGET:
            budgets = dict(ev.get("budgets") or {})
            out += _check_start(ev, budgets)
        elif ev.name == SCHED_ADMISSION and "before" in ev.attrs:
            before, after = ev.get("before") or {}, ev.get("after") or {}
            if budgets is None:
                out.append(f"admission: round {ev.round}: {ev.rid} ({ev.where}) has budgets but its round "
                           "has no sched.prefill_budget")
            else:
                for name in BUDGETS:
                    if not _same(before.get(name), budgets.get(name)):
                        out.append(f"admission: round {ev.round}: {ev.rid} ({ev.where}): before.{name} is "
                                   f"{before.get(name)}, but the round's budgets stood at "
                                   f"{budgets.get(name)}")
            spent = _spent(ev)
            for name in BUDGETS:
                b = before.get(name)
                want = None if b is None else b - spent[name]
                if not _same(after.get(name), want):
                    out.append(f"admission: round {ev.round}: {ev.rid} ({ev.where}): after.{name} is "
                               f"{after.get(name)}, expected {_fmt(want)} ({ev.get('decision')}: before {b} "
                               f"- spent {_fmt(spent[name])})")
            budgets = dict(after)
        elif ev.name == SCHED_ROUND_END:
            budgets = None
    return out


def _check_start(ev: Event, budgets: dict) -> list[str]:
    """rem_total_tokens = available + evictable - sum(future * new_token_ratio); rem_kv_room = available +
    evictable."""
    room = int(ev.get("available_size", 0)) + int(ev.get("evictable_size", 0))
    reserved = sum(f * float(ev.get("new_token_ratio", 0)) for f in ev.get("running_future_tokens") or [])
    out = []
    for name, want, how in (("rem_total_tokens", room - reserved, f"{room} - {_fmt(reserved)} reserved"),
                            ("rem_kv_room", room, "available + evictable")):
        if not _same(budgets.get(name), want):
            out.append(f"admission: round {ev.round} ({ev.where}): {name} starts at {budgets.get(name)}, "
                       f"expected {_fmt(want)} ({how})")
    return out


def _spent(ev: Event) -> dict[str, float]:
    """What the decision took from each budget: nothing when refused."""
    spent = dict.fromkeys(BUDGETS, 0.0)
    if ev.get("decision") not in ("admitted", "chunked"):
        return spent
    start, end = ev.get("extend_range") or [0, 0]
    rows, locked = end - start, int(ev.get("prefix_locked", 0))
    # a request admitted whole from the queue also reserves the tokens it may still produce
    whole = ev.get("decision") == "admitted" and ev.get("source") == "waiting_queue"
    future = int(ev.get("future_tokens", 0)) if whole else 0
    spent.update(rem_total_tokens=locked + rows + future, rem_input_tokens=rows, rem_chunk_tokens=rows,
                 rem_kv_room=locked + rows, rem_running=1)
    return spent


def _same(got, want) -> bool:
    if got is None or want is None:
        return got is None and want is None
    return abs(float(got) - float(want)) <= TOLERANCE


def _fmt(x) -> str:
    return "None" if x is None else f"{round(float(x), 4):g}"
