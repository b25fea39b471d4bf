"""Export a trace as Chrome/Perfetto trace-event JSON (open it at ui.perfetto.dev or chrome://tracing).

Layout: one track group per process (a thread per lane: rounds, model, sched, kv, cache, ipc, …, and a
"forward thread" track for the overlap scheduler's forwards, which run beside the next round), one
track group "requests" with a thread per request (queued / prefill / decode slices), and a flow arrow
from every ipc.send to its ipc.recv. All slices are complete ("X") events, so a torn trace still exports.
"""

from __future__ import annotations

import json
from typing import Any

from tracer import schema as S
from tracer.event import Event
from tracer.reader import Trace

LANES = ("rounds", "model", "sched", "kv", "cache", "ipc", "detok", "tm", "http", "trace")
THREAD_TRACKS = {"forward": len(LANES) + 2}  # events of a thread other than the main loop (Event.thread)
BULKY = {"nodes", "input_ids", "positions", "out_cache_loc", "matched_slots"}  # args show their length only


def export_perfetto(trace: Trace) -> str:
    """The trace as a JSON string in the Chrome trace-event format."""
    return json.dumps(perfetto_events(trace), separators=(",", ":"))


def perfetto_events(trace: Trace) -> dict[str, Any]:
    t0 = trace.start_ns
    out: list[dict[str, Any]] = []

    def us(ns: int) -> float:
        return round((ns - t0) / 1000, 3)

    pids = sorted({ev.pid for ev in trace.events})
    names = {p.pid: p.proc for p in trace.processes()}
    for i, pid in enumerate(pids):
        out.append(_meta("process_name", pid, 0, f"{names.get(pid, 'process')} ({pid})"))
        out.append(_meta("process_sort_index", pid, 0, i, key="sort_index"))
        for tid, lane in enumerate(LANES, start=1):
            out.append(_meta("thread_name", pid, tid, lane))
            out.append(_meta("thread_sort_index", pid, tid, tid, key="sort_index"))
        for thread, tid in THREAD_TRACKS.items():
            if any(ev.pid == pid and ev.thread == thread for ev in trace.events):
                out.append(_meta("thread_name", pid, tid, f"{thread} thread"))
                out.append(_meta("thread_sort_index", pid, tid, 2, key="sort_index"))  # next to the rounds
    req_pid = (max(pids) if pids else 0) + 1
    out.append(_meta("process_name", req_pid, 0, "requests"))
    out.append(_meta("process_sort_index", req_pid, 0, len(pids), key="sort_index"))
    req_tid = {rid: i for i, rid in enumerate(trace.rids(), start=1)}
    for rid, tid in req_tid.items():
        out.append(_meta("thread_name", req_pid, tid, rid))

    out += _round_slices(trace, us)
    out += _forward_slices(trace, us)
    out += _request_slices(trace, us, req_pid, req_tid)
    out += _ipc_flows(trace, us)
    for ev in trace.events:
        if ev.name in (S.MODEL_FORWARD, S.IPC_SEND, S.IPC_RECV, S.SCHED_ROUND_END):
            continue  # drawn as slices and flows above
        out.append({"name": ev.name, "cat": ev.lane, "ph": "i", "s": "t", "ts": us(ev.time_ns), "pid": ev.pid,
                    "tid": _tid(ev.lane), "args": _args(ev)})
        for rid in ev.all_rids:
            out.append({"name": ev.name, "cat": ev.lane, "ph": "i", "s": "t", "ts": us(ev.time_ns),
                        "pid": req_pid, "tid": req_tid[rid], "args": _args(ev)})
    return {"traceEvents": out, "displayTimeUnit": "ms",
            "otherData": {"source": str(trace.folder), "events": len(trace.events)}}


def _meta(name: str, pid: int, tid: int, value: Any, key: str = "name") -> dict[str, Any]:
    return {"name": name, "ph": "M", "ts": 0, "pid": pid, "tid": tid, "args": {key: value}}


def _tid(lane: str) -> int:
    return LANES.index(lane) + 1 if lane in LANES else len(LANES) + 1


def _args(ev: Event) -> dict[str, Any]:
    args: dict[str, Any] = {k: (f"{len(v)} items" if k in BULKY and isinstance(v, list) else v)
                            for k, v in ev.attrs.items()}
    if ev.round is not None:
        args["round"] = ev.round
    if ev.all_rids:
        args["rids"] = ev.all_rids
    args["seq"] = ev.seq
    return args


def _x(name: str, cat: str, start: float, end: float, pid: int, tid: int, args: dict | None = None) -> dict:
    return {"name": name, "cat": cat, "ph": "X", "ts": start, "dur": max(round(end - start, 3), 0.0),
            "pid": pid, "tid": tid, "args": args or {}}


def _round_slices(trace: Trace, us) -> list[dict]:
    """A round lasts from its first scheduler event to its sched.round_end."""
    first: dict[tuple[int, int], Event] = {}
    out = []
    for ev in trace.events:
        if ev.round is None or ev.lane not in S.SCHED_LANES or ev.thread is not None:
            continue
        first.setdefault((ev.pid, ev.round), ev)
        if ev.name == S.SCHED_ROUND_END:
            start = first[(ev.pid, ev.round)]
            args = {k: ev.get(k) for k in ("free_slots", "cached_slots", "evictable_slots")}
            args.update(waiting=len(ev.get("waiting") or []), running=len(ev.get("running") or []))
            out.append(_x(f"round {ev.round}", "round", us(start.time_ns), us(ev.time_ns), ev.pid,
                          _tid("rounds"), args))
    return out


def _forward_slices(trace: Trace, us) -> list[dict]:
    """model.forward B/E pairs become one slice each; a B without its E (a torn trace) is left out."""
    open_b: dict[tuple[int, str | None], Event] = {}
    out = []
    for ev in trace.events:
        if ev.name != S.MODEL_FORWARD:
            continue
        if ev.ph == "B":
            open_b[(ev.pid, ev.thread)] = ev
        elif ev.ph == "E" and (ev.pid, ev.thread) in open_b:
            b = open_b.pop((ev.pid, ev.thread))
            name = f"forward {b.get('forward_mode', '')} x{b.get('num_rows', '?')}"
            tid = THREAD_TRACKS.get(ev.thread, _tid("model")) if ev.thread else _tid("model")
            out.append(_x(name, "model", us(b.time_ns), us(ev.time_ns), ev.pid, tid,
                          {"round": ev.round, "duration_ms": ev.get("duration_ms")}))
    return out


def _request_slices(trace: Trace, us, pid: int, tids: dict[str, int]) -> list[dict]:
    """Each request's phases in turn: queued, prefill, decode (and queued again after a retraction)."""
    out = []
    for rid, tid in tids.items():
        phase: tuple[str, int] | None = None
        evs = trace.by_rid(rid)

        def close(at: int) -> None:
            nonlocal phase
            if phase is not None:
                out.append(_x(phase[0], "request", us(phase[1]), us(at), pid, tid, {"rid": rid}))
            phase = None

        for ev in evs:
            if ev.name == S.SCHED_ENQUEUED:
                close(ev.time_ns)
                phase = ("queued (retracted)" if ev.get("retracted") else "queued", ev.time_ns)
            elif ev.name == S.SCHED_ADMISSION and ev.get("decision") in ("admitted", "chunked"):
                if phase is None or phase[0].startswith("queued"):
                    close(ev.time_ns)
                    phase = ("prefill", ev.time_ns)
            elif ev.name == S.SCHED_OUTPUT_APPENDED and phase is not None and phase[0] == "prefill":
                close(ev.time_ns)
                phase = ("decode", ev.time_ns)
            elif ev.name in (S.SCHED_RETRACTED, S.SCHED_FINISHED, S.SCHED_REFUSED):
                close(ev.time_ns)
        if evs:
            close(evs[-1].time_ns)
    return out


def _ipc_flows(trace: Trace, us) -> list[dict]:
    """A short slice at each end of a message, joined by a flow arrow (only messages with both ends)."""
    ends: dict[str, dict[str, Event]] = {}
    for ev in trace.events:
        if ev.name in (S.IPC_SEND, S.IPC_RECV) and ev.flow_id is not None:
            ends.setdefault(ev.flow_id, {})[ev.name] = ev
    stamps = sorted({(ev.pid, us(ev.time_ns)) for pair in ends.values() for ev in pair.values()})
    next_stamp = {a: b[1] for a, b in zip(stamps, stamps[1:]) if a[0] == b[0]}
    out = []
    for n, (fid, pair) in enumerate(ends.items(), start=1):
        for ev in pair.values():
            t = us(ev.time_ns)
            end = min(t + 1.0, next_stamp.get((ev.pid, t), t + 1.0))  # at most 1 us, never over the next one
            verb = "send" if ev.name == S.IPC_SEND else "recv"
            out.append(_x(f"{verb} {ev.get('msg', '')}", "ipc", t, end, ev.pid, _tid("ipc"),
                          {**_args(ev), "flow": fid}))
        if len(pair) == 2:
            s, f = pair[S.IPC_SEND], pair[S.IPC_RECV]
            common = {"name": s.get("msg", "ipc"), "cat": "ipc", "id": n}
            out.append({**common, "ph": "s", "ts": us(s.time_ns), "pid": s.pid, "tid": _tid("ipc")})
            out.append({**common, "ph": "f", "bp": "e", "ts": us(f.time_ns), "pid": f.pid,
                        "tid": _tid("ipc")})
    return out
