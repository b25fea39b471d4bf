"""Invariants a correct trace must satisfy. Each failure is one line saying what broke and where.

They check the engine (no leaked KV slot, no lost message, every request finished) and the trace
against itself (replay from delta events agrees with the engine's own end-of-round summary).
"""

from __future__ import annotations

from collections import Counter, defaultdict

from tracer import schema as S
from tracer.check_admission import check_admission
from tracer.check_disagg import check_disagg
from tracer.dp_ranks import dp_scheduler_procs, rank_view
from tracer.event import Event
from tracer.reader import Trace
from tracer.replay import replay
from tracer.servers import server_names, server_view
from tracer.state import TREE, UNASSIGNED
from tracer.tp_ranks import check_tp_ranks
from tracer.tree import tree_slots

SCHED_TERMINAL = (S.SCHED_FINISHED, S.SCHED_REFUSED)
AFTER_FINISH = (S.SCHED_BATCH_FORMED, S.SCHED_OUTPUT_APPENDED)  # a finished request must not run again
HTTP_TERMINAL = (S.HTTP_RESPONSE_FINISHED, S.HTTP_ERROR)

CLIENT_LEFT = 499  # the HTTP status the server traces for a client that closed the connection


def check_trace(trace: Trace) -> list[str]:
    """Every failed invariant, one line each; an empty list means the trace is consistent. With several
    data-parallel scheduler ranks, the scheduler's own invariants (KV, rounds, replay, admission) are checked
    on each rank's view (tracer/dp_ranks.py), prefixed with the rank's process name. A merged trace of several
    servers (tracer/servers.py): each server's view is checked whole, then the KV transfers between them."""
    if servers := server_names(trace):
        return [f"{name}: {line}" for name in servers for line in check_trace(server_view(trace, name))] + \
            check_disagg(trace)
    out = (check_sequence(trace) + check_ipc(trace) + check_lifecycles(trace) + check_tokens(trace)
           + check_tp_ranks(trace))
    ranks = dp_scheduler_procs(trace)
    if not ranks:
        return out + _check_scheduler(trace)
    out += check_dispatch(trace)
    for proc in ranks:
        out += [f"{proc}: {line}" for line in _check_scheduler(rank_view(trace, proc))]
    return out


def _check_scheduler(trace: Trace) -> list[str]:
    return (check_kv(trace) + check_rounds(trace) + check_replay(trace) + check_admission(trace)
            + check_overlap(trace) + check_disagg(trace))


def check_dispatch(trace: Trace) -> list[str]:
    """Each request the DataParallelController dispatched arrived at the rank it chose, and only there."""
    arrived: dict[str, list[str]] = defaultdict(list)
    for ev in trace.events:
        if ev.name in SCHED_TERMINAL[1:] + (S.SCHED_REQ_CREATED,) and ev.rid is not None:
            arrived[ev.rid].append(ev.proc)
    out = []
    for ev in trace.events:
        if ev.name == S.DP_DISPATCH:
            want = f"{S.DP_SCHEDULER_PREFIX}{ev.get('dp_rank')}"
            if arrived.get(ev.rid) != [want]:
                out.append(f"dp: request {ev.rid} was dispatched to {want} ({ev.where}) but arrived at "
                           f"{arrived.get(ev.rid) or 'no scheduler'}")
    return out


def summary(trace: Trace) -> str:
    overlap = (" (overlap schedule: forwards on the forward thread, results one round late)"
               if is_overlap(trace) else "")
    return f"{len(trace.events)} events, {len(trace.rids())} requests, {len(trace.rounds())} rounds{overlap}"


def is_overlap(trace: Trace) -> bool:
    return any(ev.name == S.SCHED_CONFIG and ev.get("overlap_schedule") for ev in trace.events)


def check_overlap(trace: Trace) -> list[str]:
    """The overlap loop (sched.config overlap_schedule): the forward thread runs each round after its batch
    was formed, in round order, and each round's result is processed in a later round (sched.sampled's
    batch_round). The rest holds as for the normal loop: replay applies the late events to their round."""
    formed = {ev.round: ev.index for ev in trace.events if ev.name == S.SCHED_BATCH_FORMED}
    out, last = [], 0
    for ev in trace.events:
        if ev.name == S.MODEL_FORWARD and ev.thread is not None and ev.ph == S.PH_BEGIN:
            if formed.get(ev.round, ev.index + 1) > ev.index:
                out.append(f"overlap: {ev.where}: the forward of round {ev.round} begins before its batch is "
                           "formed")
            if ev.round is None or ev.round <= last:
                out.append(f"overlap: {ev.where}: the forward of round {ev.round} runs after round {last}'s")
            last = ev.round or last
        elif ev.name == S.SCHED_SAMPLED and ev.get("batch_round") is not None:
            done = ev.get("batch_round")
            if done not in formed or ev.round is None or done >= ev.round:
                out.append(f"overlap: {ev.where}: round {ev.round} processes the result of round {done}, "
                           "which is not an earlier round that formed a batch")
    return out


def check_sequence(trace: Trace) -> list[str]:
    """No event is missing: each file's `seq` counts 0, 1, 2 … from every trace.process_start, so a lost or
    deleted line shows as a gap, and a line written twice as a repeat."""
    by_file: dict[str, list[Event]] = defaultdict(list)
    for ev in trace.events:
        by_file[ev.file].append(ev)
    out = []
    for file, evs in by_file.items():
        expected = 0
        for ev in sorted(evs, key=lambda e: e.line):
            if ev.name == S.TRACE_PROCESS_START and ev.seq == 0:
                expected = 0  # the same process traced again into this folder: a new count
            if ev.seq != expected:
                what = (f"{ev.seq - expected} event(s) missing before it" if ev.seq > expected
                        else f"expected {expected}")
                out.append(f"seq: {ev.where}: {ev.name} has seq {ev.seq}: {what}")
            expected = ev.seq + 1
    return out


def check_ipc(trace: Trace) -> list[str]:
    """Every message sent was received, and every message received was sent: same flow id on both ends."""
    ends: dict[str, dict[str, list[Event]]] = defaultdict(lambda: {"send": [], "recv": []})
    for ev in trace.events:
        if ev.name in (S.IPC_SEND, S.IPC_RECV) and ev.flow_id is not None:
            ends[ev.flow_id]["send" if ev.name == S.IPC_SEND else "recv"].append(ev)
    out = []
    for fid, pair in ends.items():
        for have, lack, verb in (("send", "recv", "sent"), ("recv", "send", "received")):
            if pair[have] and not pair[lack]:
                ev = pair[have][0]
                other = "received" if verb == "sent" else "sent"
                out.append(f"ipc: message {fid} ({ev.get('msg')}) was {verb} by {ev.proc} ({ev.where}) "
                           f"but never {other}")
            if len(pair[have]) > 1:
                out.append(f"ipc: message {fid} was {verb} {len(pair[have])} times")
    return out


def check_lifecycles(trace: Trace) -> list[str]:
    """Every request starts where requests enter (HTTP, or sched.req_created offline) and ends finished
    or aborted."""
    server = any(p.proc == "tokenizer_manager" for p in trace.processes())  # else the offline engine
    starts = (S.HTTP_REQUEST_RECEIVED,) if server else (S.SCHED_REQ_CREATED, S.SCHED_REFUSED)
    out = []
    for rid in trace.rids():
        evs = trace.by_rid(rid)
        names = [ev.name for ev in evs]
        first_start = next((i for i, n in enumerate(names) if n in starts), None)
        if first_start is None:
            out.append(f"request {rid}: never received (no {' or '.join(starts)} event); first event is "
                       f"{evs[0].name} ({evs[0].where})")
            continue
        reached_scheduler = any(n in (S.SCHED_REQ_CREATED, S.SCHED_REFUSED) for n in names)
        needed = [SCHED_TERMINAL] if reached_scheduler else []
        if server:
            needed.append(HTTP_TERMINAL)
        for terminal in needed:
            end = next((i for i, n in enumerate(names) if n in terminal), None)
            if end is None:
                out.append(f"request {rid}: never finished or aborted (no {' or '.join(terminal)}); "
                           f"last event is {evs[-1].name} ({evs[-1].where})")
            elif end < first_start:
                out.append(f"request {rid}: {names[end]} ({evs[end].where}) comes before it was received")
        done = next((ev for ev in evs if ev.name in SCHED_TERMINAL), None)
        if done is not None:
            late = next((ev for ev in evs if ev.index > done.index and ev.name in AFTER_FINISH), None)
            if late is not None:
                out.append(f"request {rid}: {late.name} ({late.where}) after it finished ({done.where})")
    return out


def check_kv(trace: Trace) -> list[str]:
    """No slot is allocated twice, and by the end every allocated slot was freed or handed to the cache."""
    out, owner = [], {}
    for ev in trace.events:
        slots = [int(s) for s in ev.get("slots") or []]
        if ev.name == S.KV_ALLOC:
            taken = [s for s in slots if s in owner]
            if taken:
                out.append(f"kv: {ev.where} allocates slot(s) {taken[:8]} that are still held "
                           f"(by {owner[taken[0]]})")
            owner.update((s, UNASSIGNED) for s in slots)
        elif ev.name == S.KV_ASSIGNED:
            owner.update((s, ev.rid or UNASSIGNED) for s in slots)
        elif ev.name == S.CACHE_INSERTED:
            owner.update((s, TREE) for s in slots)
        elif ev.name in (S.KV_FREE, S.CACHE_EVICTED):
            for s in slots:
                owner.pop(s, None)
    leaked: dict[str, list[int]] = defaultdict(list)
    for s, o in owner.items():
        if o != TREE:
            leaked[o].append(s)
    for o, slots in leaked.items():
        who = "allocated but never assigned" if o == UNASSIGNED else f"still held by {o}"
        out.append(f"kv: {len(slots)} slot(s) {sorted(slots)[:8]} {who} at the end: never freed or cached")
    return out


def check_tokens(trace: Trace) -> list[str]:
    """Sampled tokens are the detokenized ones, and the detokenized text is what was streamed: all of it,
    or, for a client that closed the connection (HTTP 499) or a request a shutdown ended
    (tm.shutdown_aborted), a beginning of it (the engine went on decoding until the abort reached it;
    nobody was there to send that text to)."""
    sampled, detok_ids, detok_text = defaultdict(list), defaultdict(list), defaultdict(str)
    sse, woken = defaultdict(str), defaultdict(str)
    left: set[str] = set()
    for ev in trace.events:
        if ev.name in (S.HTTP_ERROR, S.HTTP_RESPONSE_FINISHED) and ev.get("status") == CLIENT_LEFT:
            left.add(ev.rid)
        if ev.name == S.TM_SHUTDOWN_ABORTED:
            left.add(ev.rid)
        if ev.name == S.SCHED_OUTPUT_APPENDED:
            sampled[ev.rid].append(ev.get("token_id"))
        elif ev.name == S.DETOK_DECODED:
            detok_ids[ev.rid] += list(ev.get("token_ids") or [])
            detok_text[ev.rid] += ev.get("delta") or ""
        elif ev.name == S.HTTP_SSE_CHUNK:
            sse[ev.rid] += ev.get("delta") or ""
        elif ev.name == S.TM_WAITER_WOKEN:
            woken[ev.rid] += ev.get("delta_text") or ""
    out = []
    if detok_ids:  # level 1 has neither; a scheduler-only trace has no detokenizer
        for rid in dict.fromkeys([*sampled, *detok_ids]):
            if sampled[rid] != detok_ids[rid]:
                out.append(f"tokens: request {rid}: sampled {_short(sampled[rid])} but detokenized "
                           f"{_short(detok_ids[rid])}")
    for name, streamed in (("SSE chunks", sse), (S.TM_WAITER_WOKEN, woken)):
        for rid, text in streamed.items():
            if text != detok_text[rid] and not (rid in left and detok_text[rid].startswith(text)):
                out.append(f"text: request {rid}: detokenizer sent {detok_text[rid]!r} but {name} "
                           f"carried {text!r}")
    return out


def check_rounds(trace: Trace) -> list[str]:
    """Rounds are numbered 1, 2, 3 … with no gap; each forms one batch and ends once."""
    ends = [ev.round for ev in trace.events if ev.name == S.SCHED_ROUND_END]
    formed = Counter(ev.round for ev in trace.events if ev.name == S.SCHED_BATCH_FORMED)
    out = []
    if None in ends or None in formed:
        out.append("rounds: a sched.batch_formed or sched.round_end has no round number")
    numbers = [n for n in ends if n is not None]
    expected = list(range(1, len(numbers) + 1))
    if numbers != expected:
        out.append(f"rounds: sched.round_end rounds go {_short(numbers)}, expected {_short(expected)}")
    for n, count in Counter(numbers).items():
        if count > 1:
            out.append(f"rounds: round {n} ends {count} times")
    for n, count in formed.items():
        if n is not None and count > 1:
            out.append(f"rounds: round {n} forms {count} batches")
        if n is not None and n not in numbers:
            out.append(f"rounds: round {n} formed a batch but has no sched.round_end")
    return out


def check_replay(trace: Trace) -> list[str]:
    """Replay (from delta events) and the engine's sched.round_end agree at every round."""
    out = []
    round_ends = [ev for ev in trace.events if ev.name == S.SCHED_ROUND_END]
    for state, ev in zip(replay(trace), round_ends):
        facts = [("waiting", state.waiting, ev.get("waiting")), ("running", state.running, ev.get("running")),
                 ("chunked", state.chunked, ev.get("chunked")),
                 ("cached_slots", state.cached_slots, ev.get("cached_slots"))]
        if state.kv_size is not None:
            facts.append(("free_slots", state.free_slots, ev.get("free_slots")))
        for name, mine, theirs in facts:
            if name in ev.attrs and mine != theirs:  # a null is a claim too (nothing chunked)
                out.append(f"round {ev.round}: {name}: replay says {_short(mine)}, sched.round_end says "
                           f"{_short(theirs)} ({ev.where})")
        owned_by_tree, in_tree = set(state.slots_of(TREE)), tree_slots(state.tree)
        if state.tree and owned_by_tree != in_tree:
            out.append(f"round {ev.round}: the tree holds slots {_short(sorted(in_tree))} but cache events "
                       f"gave it {_short(sorted(owned_by_tree))}")
    return out


def _short(x: object, limit: int = 12) -> str:
    if isinstance(x, list) and len(x) > limit:
        return f"[{', '.join(map(repr, x[:limit]))}, … {len(x) - limit} more]"
    return repr(x)
