"""`minisgl trace show`: what happened, as tables — one row per request, one row per round, and with
--rid the request's own event-by-event timeline. Everything is computed from the trace by replay."""

from __future__ import annotations

from statistics import mean

from rich import box
from rich.console import Console
from rich.table import Table

from tracer import schema as S
from tracer.dp_ranks import dp_scheduler_procs, rank_view
from tracer.event import Event
from tracer.fmt import compact, finish_type, ms, ranges, short_rid
from tracer.reader import Trace, TraceError
from tracer.replay import replay, state_at
from tracer.schema import HTTP_REQUEST_RECEIVED, SCHED_BATCH_FORMED, SCHED_SAMPLED, SCHED_SPEC_VERIFIED
from tracer.state import ReqState
from tracer.tp_ranks import tp_ranks_by_round

PROC_SHORT = {"tokenizer_manager": "tm", "scheduler": "sched", "detokenizer": "detok", "engine": "engine",
              "data_parallel_controller": "dp"}


def _short_proc(proc: str) -> str:
    """tm, sched, detok …; a data-parallel rank's scheduler as sched0, sched1 …"""
    if proc.startswith(S.DP_SCHEDULER_PREFIX):
        return "sched" + proc[len(S.DP_SCHEDULER_PREFIX):]
    return PROC_SHORT.get(proc, proc[:6])
HIDDEN_ATTRS = {"type", "schema", "texts", "logprobs", "nodes", "sampling_params", "input_ids", "positions"}


def show(trace: Trace, console: Console, rid: str | None = None) -> None:
    """Print the requests table, the rounds table, and (with rid) that request's timeline."""
    console.print(f"[bold]{trace.folder}[/]: {len(trace.events)} events, level {trace.level}, processes "
                  + ", ".join(f"{p.proc}({p.pid})" for p in trace.processes()))
    for w in trace.warnings:
        console.print(f"[yellow]warning:[/] {w}")
    console.print(requests_table(trace))
    console.print(rounds_table(trace))
    if rid is not None:
        console.print(timeline_table(trace, find_rid(trace, rid)))


def find_rid(trace: Trace, rid: str) -> str:
    """The rid itself, or the one rid that starts with it (engine rids are long)."""
    if rid in trace.rids():
        return rid
    hits = [r for r in trace.rids() if r.startswith(rid)]
    if len(hits) == 1:
        return hits[0]
    if not hits:
        known = ", ".join(map(short_rid, trace.rids())) or "none"
        raise TraceError(f"no request {rid!r} in the trace (it has {known})")
    raise TraceError(f"{rid!r} is the start of {len(hits)} request ids; give more of it")


def requests_table(trace: Trace) -> Table:
    t = Table(title="Requests", box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1),
              caption="prompt/cached/out: tokens; wait (in the queue), TTFT, ITL (mean): ms; "
                      "pf/dec: prefill/decode rounds")
    for name in ("rid", "prompt", "cached", "out", "wait", "pf", "dec", "TTFT", "ITL", "finish"):
        t.add_column(name, justify="left" if name in ("rid", "finish") else "right")
    if not trace.events:
        return t
    final = state_at(trace, len(trace.events) - 1)
    received = {ev.rid: ev.time_ns for ev in trace.events if ev.name == HTTP_REQUEST_RECEIVED}
    for rid, req in final.reqs.items():
        start = received.get(rid, req.created_ns)
        wait = req.admitted_ns - req.enqueued_ns if req.admitted_ns and req.enqueued_ns else None
        ttft = req.token_ns[0] - start if req.token_ns and start is not None else None
        t.add_row(short_rid(rid), str(req.input_len), str(req.cached_tokens), str(req.output_len), ms(wait),
                  str(len(req.prefill_rounds)), str(len(req.decode_rounds)), ms(ttft), ms(_itl(req)),
                  finish_type(req.finish_reason) if req.finish_reason else req.status)
    return t


def _itl(req: ReqState) -> float | None:
    gaps = [b - a for a, b in zip(req.token_ns, req.token_ns[1:])]
    return mean(gaps) if gaps else None


def rounds_table(trace: Trace) -> Table:
    """One row per round. A --dp-size trace: every rank's rounds, each rank replayed on its own view, with a
    `dp rank` column; a --tp-size trace: a `tp` column, the ranks whose model.forward ran that round.
    A single scheduler's table has neither."""
    dp_procs = dp_scheduler_procs(trace)
    ranked = [(int(p[len(S.DP_SCHEDULER_PREFIX):]), replay(rank_view(trace, p))) for p in dp_procs] \
        or [(None, replay(trace))]
    states = [s for _, rank_states in ranked for s in rank_states]
    tp = tp_ranks_by_round(trace)
    # speculative decoding
    spec = any(s.batch is not None and s.batch.mode == "TARGET_VERIFY" for s in states)
    t = Table(title="Rounds", box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1),
              caption="rows: rows computed; extend/seq: per request; ms: model forward"
                      + ("; drafts: per request, its draft-token rows in a TARGET_VERIFY round"
                         if spec else "")
                      + ("; dp rank: the scheduler rank that ran it, each counting its own rounds" if dp_procs
                         else "")
                      + ("; tp: the tensor-parallel ranks whose forward ran it" if tp else ""))
    lead = (("dp rank",) if dp_procs else ()) + ("round",)
    names = (lead + ("mode", "rids", "rows", "extend", "seq") + (("drafts",) if spec else ())
             + ("out_cache_loc",) + (("tp",) if tp else ()) + ("ms",))
    for name in names:
        t.add_column(name, justify="right" if name in ("dp rank", "round", "rows", "ms") else "left",
                     overflow="fold", no_wrap=name == "mode" and spec)
    for rank, rank_states in ranked:
        for state in rank_states:
            head = ([str(rank)] if dp_procs else []) + [str(state.round)]
            b = state.batch
            if b is None:
                t.add_row(*head, "-", "", "0", *[""] * (len(names) - len(head) - 3))
                continue
            drafts = [_ints([sum(r.draft for r in b.rows if r.rid == rid) for rid in b.rids]
                            if b.mode == "TARGET_VERIFY" else [])] if spec else []
            ranks = [ranges(tp.get(state.round, [])) or "-"] if tp else []
            t.add_row(*head, b.mode, " ".join(short_rid(r, 8) for r in b.rids),
                      str(len(b.forward_rows)), _ints(b.extend_lens), _ints(b.seq_lens), *drafts,
                      ranges(b.out_cache_loc), *ranks,
                      "-" if b.duration_ms is None else f"{b.duration_ms:.1f}")
    return t


def _ints(xs: list[int]) -> str:
    return " ".join(map(str, xs)) if xs else "-"


def timeline_table(trace: Trace, rid: str) -> Table:
    t = Table(title=f"Request {rid}", caption="ms: since the request's first event", box=box.SIMPLE_HEAD,
              pad_edge=False, padding=(0, 1))
    t.add_column("ms", justify="right", no_wrap=True)
    t.add_column("proc", no_wrap=True)
    t.add_column("event", no_wrap=True)
    t.add_column("facts", overflow="fold")
    events = trace.by_rid(rid)
    start = events[0].time_ns if events else trace.start_ns  # ms since the request's first event
    for ev in events:
        t.add_row(f"{(ev.time_ns - start) / 1e6:.3f}", _short_proc(ev.proc), _event_name(ev),
                  facts(ev, rid))
    return t


def _event_name(ev: Event) -> str:
    name = ev.name
    if ev.ph in ("B", "E"):
        name += f" {ev.ph}"
    return name


def facts(ev: Event, rid: str | None = None) -> str:
    """The event's attributes on one line; for a batch, only this request's column of each list."""
    parts = []
    if ev.round is not None:
        parts.append(f"r{ev.round}")
    attrs = dict(ev.attrs)
    rids = ev.rids or ev.get("rids") or []
    if rid in rids and ev.name == SCHED_BATCH_FORMED:
        i = rids.index(rid)
        attrs = {"mode": ev.get("forward_mode"), "of": len(rids)}
        attrs.update({k: ev.get(k)[i] for k in ("prefix_lens", "extend_lens", "seq_lens")
                      if len(ev.get(k) or []) > i})
    elif rid in rids and ev.name == SCHED_SAMPLED:
        i = rids.index(rid)
        # TARGET_VERIFY: a token per row, each request's rows in turn
        rows = ev.get("rows") or [1] * len(rids)
        at = slice(sum(rows[:i]), sum(rows[: i + 1]))
        attrs = {k: v[at] if rows[i] > 1 else v[at][0] for k, v in (("token", ev.get("token_ids")),
                 ("text", ev.get("texts"))) if isinstance(v, list) and len(v) >= at.stop}
    elif rid in rids and ev.name == SCHED_SPEC_VERIFIED:
        i = rids.index(rid)
        attrs = {k: ev.get(k)[i] for k in ("draft_lens", "accepted_lens", "appended_lens")
                 if len(ev.get(k) or []) > i}
    for k, v in attrs.items():
        if k in HIDDEN_ATTRS or v is None or v == "":
            continue
        parts.append(f"{k}={compact(v)}")
    if ev.flow_id:
        parts.append(f"flow={ev.flow_id}")
    return " ".join(parts)
