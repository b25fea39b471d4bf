"""One round's admission as data: the PrefillAdder's starting budgets, each candidate's needs and decision,
the budget that decided it, and who was never looked at. The admission diagram and the replay app's pane both
draw this, so they cannot disagree.

    from tracer.admission import admission_of
    adm = admission_of(trace, 1)          # RoundAdmission
    for c in adm.candidates: print(c.rid, c.decision, c.deciding, c.why)
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tracer.event import Event
from tracer.reader import Trace, TraceError

NAMES = ("sched.prefill_budget", "sched.admission", "sched.admission_stopped", "sched.prefill_skipped")
# the flag an event names in `budget` -> the PrefillAdder counter that ran out (kv_cache: see _deciding)
COUNTER = {"max_running_requests": "rem_running", "max_prefill_tokens": "rem_input_tokens",
           "chunked_prefill_size": "rem_chunk_tokens", "kv_cache": "rem_kv_room"}


class PredatesBudgets(TraceError):
    """A version 1 trace: it says who was admitted, but not the budgets behind the decisions."""


@dataclass
class Start:
    """How the round's budgets started (sched.prefill_budget)."""

    available_size: int
    evictable_size: int
    new_token_ratio: float
    running_rids: list[str]
    running_future_tokens: list[int]
    reserved_tokens: float
    mixed_decode_rows: int
    budgets: dict[str, float | int | None]
    config: dict = field(default_factory=dict)  # sched.config: max_prefill_tokens, max_running_requests, ...


@dataclass
class Candidate:
    """One sched.admission: what the request asked for, the budgets before and after, and why it went so."""

    rid: str
    source: str  # waiting_queue (add_one_req) or chunked_req (add_chunked_req)
    decision: str  # admitted, chunked or refused
    extend_range: tuple[int, int] | None
    extend_input_len: int
    future_tokens: int
    prefix_locked: int
    need: int | None  # extend_input_len + future_tokens, when refused on kv_cache
    budget: str | None  # the flag the event names: max_prefill_tokens, chunked_prefill_size, ...
    before: dict[str, float | int | None]
    after: dict[str, float | int | None]
    deciding: str | None = None  # the counter that refused it or cut its chunk; None when admitted whole
    why: str = ""
    index: int = -1  # the event's place in the timeline


@dataclass
class AdderPass:
    """One PrefillAdder: a round has one, or more when a loop iteration admitted nobody and ran no batch."""

    start: Start | None
    candidates: list[Candidate] = field(default_factory=list)
    not_considered: list[str] = field(default_factory=list)
    stopped_by: str | None = None


@dataclass
class Skipped:
    """sched.prefill_skipped: get_new_batch_prefill returned before building an adder."""

    reason: str
    num_running: int
    max_running_requests: int
    waiting: list[str]


@dataclass
class RoundAdmission:
    round: int
    passes: list[AdderPass] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)

    @property
    def candidates(self) -> list[Candidate]:
        return [c for p in self.passes for c in p.candidates]

    @property
    def empty(self) -> bool:
        return not self.passes and not self.skipped


def num(x: float | None) -> str:
    """A budget as the trace means it: 48, 38.5, 25.212; None (no chunking) as a dash."""
    if x is None:
        return "—"
    if float(x).is_integer():
        return str(int(x))
    return f"{float(x):.4f}".rstrip("0").rstrip(".")


def cell(c: Candidate, name: str) -> str:
    """One budget of one candidate: `before → after`, or just `before` when the decision left it alone."""
    b, a = c.before.get(name), c.after.get(name)
    return num(b) if num(a) == num(b) else f"{num(b)} → {num(a)}"


def reserved_formula(s: Start, limit: int = 8) -> str:
    """reserved_tokens with its numbers: Σ future_tokens of the running requests × new_token_ratio."""
    fut = s.running_future_tokens
    if not fut:
        return "reserved_tokens = 0 (nothing running)"
    terms = (" + ".join(map(str, fut[:limit]))
             + (f" + … ({len(fut) - limit} more)" if len(fut) > limit else ""))
    total = f"({terms} = {sum(fut)})" if len(fut) > 1 else terms
    return f"reserved_tokens = {total} × new_token_ratio {num(s.new_token_ratio)} = {num(s.reserved_tokens)}"


def start_lines(s: Start) -> list[tuple[str, str]]:
    """(budget, how it starts) for each of the five counters, with the numbers."""
    room = s.available_size + s.evictable_size
    b = s.budgets

    def flag(name: str) -> str:
        return f"{name} {s.config[name]}" if s.config.get(name) is not None else name

    total = f"available {s.available_size} + evictable {s.evictable_size} − reserved {num(s.reserved_tokens)}"
    rows = f"{flag('max_prefill_tokens')} − mixed_decode_rows {s.mixed_decode_rows}"
    running = f"{flag('max_running_requests')} − {len(s.running_rids)} running"
    chunk = b.get("rem_chunk_tokens")
    return [("rem_total_tokens", f"{total} = {num(b.get('rem_total_tokens'))}"),
            ("rem_input_tokens", f"{rows} = {num(b.get('rem_input_tokens'))}"),
            ("rem_chunk_tokens", "no chunking" if chunk is None else f"chunked_prefill_size = {num(chunk)}"),
            ("rem_kv_room", f"available {s.available_size} + evictable {s.evictable_size} = {num(room)}"),
            ("rem_running", f"{running} = {num(b.get('rem_running'))}")]


def has_budgets(trace: Trace) -> bool:
    """Whether the trace is schema 2 or later (version 1 carries no budgets)."""
    key = "admission.has_budgets"
    if key not in trace.cache:
        trace.cache[key] = any(ev.v >= 2 for ev in trace.events if ev.name == "trace.process_start")
    return trace.cache[key]


def require_budgets(trace: Trace) -> None:
    if not has_budgets(trace):
        raise PredatesBudgets("this trace predates the admission budgets (schema 2): its sched.admission "
                              "events say who was admitted, not the budgets; record it again with this "
                              "engine")


def config_of(trace: Trace) -> dict:
    """The scheduler's sched.config (empty in a trace without one)."""
    key = "admission.config"
    if key not in trace.cache:
        trace.cache[key] = next((dict(ev.attrs) for ev in trace.events if ev.name == "sched.config"), {})
    return trace.cache[key]


def admission_rounds(trace: Trace) -> list[int]:
    """The rounds with an adder or a skipped prefill, ascending."""
    return sorted({ev.round for ev in trace.events if ev.name in NAMES and ev.round is not None})


def admission_of(trace: Trace, round: int, upto: int | None = None) -> RoundAdmission:
    """Round `round`'s admission from its events (only those at timeline index ≤ `upto`, when given)."""
    out = RoundAdmission(round)
    for ev in trace.events_in_round(round):
        if upto is not None and ev.index > upto:
            break
        if ev.name == "sched.prefill_budget":
            out.passes.append(AdderPass(_start(ev, config_of(trace))))
        elif ev.name == "sched.admission":
            if not out.passes:
                out.passes.append(AdderPass(None))
            out.passes[-1].candidates.append(_candidate(ev, out.passes[-1]))
        elif ev.name == "sched.admission_stopped" and out.passes:
            out.passes[-1].not_considered = list(ev.get("not_considered") or [])
            out.passes[-1].stopped_by = ev.get("stopped_by")
        elif ev.name == "sched.prefill_skipped":
            out.skipped.append(Skipped(ev.get("reason", "max_running_requests"),
                                       int(ev.get("num_running", 0)), int(ev.get("max_running_requests", 0)),
                                       list(ev.get("waiting") or [])))
    return out


def _start(ev: Event, config: dict) -> Start:
    return Start(int(ev.get("available_size", 0)), int(ev.get("evictable_size", 0)),
                 float(ev.get("new_token_ratio", 0)), list(ev.get("running_rids") or []),
                 list(ev.get("running_future_tokens") or []), float(ev.get("reserved_tokens", 0)),
                 int(ev.get("mixed_decode_rows", 0)), dict(ev.get("budgets") or {}), config)


def _candidate(ev: Event, p: AdderPass) -> Candidate:
    rng = ev.get("extend_range")
    c = Candidate(ev.rid or "?", ev.get("source", "waiting_queue"), ev.get("decision", "?"),
                  tuple(rng) if rng else None, int(ev.get("extend_input_len", 0)),
                  int(ev.get("future_tokens", 0)), int(ev.get("prefix_locked", 0)), ev.get("need"),
                  ev.get("budget"), dict(ev.get("before") or {}), dict(ev.get("after") or {}), index=ev.index)
    c.deciding = _deciding(c, p)
    c.why = _why(c)
    return c


def _deciding(c: Candidate, p: AdderPass) -> str | None:
    """The counter behind the decision, as PrefillAdder.add_one_req tests them."""
    if c.decision == "admitted" or c.budget not in COUNTER:
        return None
    if c.budget != "kv_cache" or c.decision != "refused" or c.source != "waiting_queue":
        return COUNTER[c.budget]
    room, total = c.before.get("rem_kv_room"), c.before.get("rem_total_tokens")
    # the first request of an idle engine is never held back by rem_total_tokens
    idle = (p.start is not None and not p.start.running_rids
            and all(x.decision == "refused" for x in p.candidates))
    if c.need is not None and total is not None and c.need > total and not idle:
        return "rem_total_tokens"
    return "rem_kv_room" if room is not None else None


def _why(c: Candidate) -> str:
    """The decision in one line, with the numbers that made it."""
    left = c.before.get(c.deciding) if c.deciding else None
    if c.decision == "admitted":
        return f"admitted [{c.extend_range[0]}, {c.extend_range[1]})" if c.extend_range else "admitted"
    if c.decision == "chunked":
        rng = f"[{c.extend_range[0]}, {c.extend_range[1]})" if c.extend_range else ""
        return f"chunked {rng}: {c.deciding or c.budget} had {num(left)} of {c.extend_input_len} rows".strip()
    by = f"refused by {c.budget}"
    if c.deciding == "rem_total_tokens":
        return f"{by}: need {c.need} (extend {c.extend_input_len} + future {c.future_tokens}) > {num(left)}"
    if c.deciding in ("rem_input_tokens", "rem_kv_room") and left is not None and left > 0:
        return f"{by}: extend {c.extend_input_len} > {c.deciding} {num(left)}"
    if c.deciding is not None:
        return f"{by}: {c.deciding} {num(left)} left"
    return by
