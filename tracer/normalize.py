"""A trace with what differs from run to run taken out: the unit that scenario goldens pin and labs diff.

Kept: each event's process, name, phase, rid(s), round and attrs. Dropped: clocks (`ts`, `wall_ns`, `mono_ns`,
durations: a forward's and, with --tp-size, its collectives'), pids, `seq`, flow ids, and log-probabilities
(floats whose last digits follow the CPU's instruction set, not the engine's decisions). Events are ordered
per process, in the order each process wrote them: a process's own order is the engine's logic, while the
interleaving of processes follows the OS scheduler. The same holds for threads: a process's forward thread
(the overlap scheduler) keeps its own order, listed after the main loop's events. A --tp-size trace's other
ranks (scheduler_tp1, …) come last, each in its own order.
"""

from __future__ import annotations

import json
import re
from itertools import accumulate, groupby
from typing import Any

from tracer.event import Event
from tracer.reader import Trace
from tracer.schema import PROCESSES

VOLATILE_ATTRS = frozenset({"wall_ns", "mono_ns", "duration_ms", "comm_ms", "logprobs"})
PROCESS_ORDER = PROCESSES  # the offline engine, then the server's processes in pipeline order


def normalize_event(ev: Event) -> dict[str, Any]:
    rec: dict[str, Any] = {"proc": ev.proc, "name": ev.name}
    if ev.ph != "i":
        rec["ph"] = ev.ph
    if ev.round is not None:
        rec["round"] = ev.round
    if ev.thread is not None:
        rec["thread"] = ev.thread
    if ev.rid is not None:
        rec["rid"] = ev.rid
    if ev.rids is not None:
        rec["rids"] = list(ev.rids)
    attrs = {k: v for k, v in ev.attrs.items() if k not in VOLATILE_ATTRS}
    if attrs:
        rec["attrs"] = attrs
    return rec


def normalize(trace: Trace) -> list[dict[str, Any]]:
    """Every event, normalized, grouped by process (engine, tokenizer manager, scheduler, detokenizer); a
    --tp-size trace's other ranks (kept beside the timeline, Trace.tp_rank_events) after them."""

    def key(ev: Event) -> tuple:
        rank = PROCESS_ORDER.index(ev.proc) if ev.proc in PROCESS_ORDER else len(PROCESS_ORDER)
        return rank, ev.proc, ev.file, ev.thread or "", ev.line

    others = [ev for proc in sorted(trace.tp_rank_events) for ev in trace.tp_rank_events[proc]]
    return [normalize_event(ev) for ev in sorted(trace.events, key=key) + sorted(others, key=key)]


def event_line(rec: dict[str, Any]) -> str:
    """One normalized event as one line of text: `proc round name rid {attrs}`, stable for diffs."""
    head = [
        rec["proc"],
        f"r{rec['round']}" if "round" in rec else "-",
        rec["name"] + (f"/{rec['ph']}" if "ph" in rec else "") + (f"@{rec['thread']}" if "thread" in rec
                                                                  else ""),
    ]
    if "rid" in rec:
        head.append(rec["rid"])
    if "rids" in rec:
        head.append("[" + ",".join(rec["rids"]) + "]")
    attrs = rec.get("attrs")
    tail = " " + json.dumps(attrs, ensure_ascii=False, sort_keys=True, separators=(",", ":")) if attrs else ""
    return " ".join(head) + tail


def summary_text(trace: Trace) -> str:
    """The normalized trace, one event per line: what a scenario's golden file holds."""
    return "".join(event_line(rec) + "\n" for rec in normalize(trace))


# the processes that serve many requests at once: with several requests in flight, the order in which their
# events interleave there follows the clock (which stream wrote its next chunk first), not the engine
SHARED_PROCS = ("tokenizer_manager", "data_parallel_controller", "detokenizer")
# load polls and reports (the router's /health, the DP controller's loads): sent on their own clocks
LOAD_PROBES = frozenset({"GetLoadReq", "GetLoadReqOutput"})
# what goes to every rank and comes back from each (load polls, a cache flush): each rank answers on its own
# clock, so the replies of several ranks reach the detokenizer and the TokenizerManager in either order
RANK_REPLIES = LOAD_PROBES | {"FlushCacheReq", "FlushCacheReqOutput"}


def rid_key(rec: dict[str, Any]) -> str:
    return rec.get("rid") or ",".join(rec.get("rids") or [])


def served_summary_text(trace: Trace) -> str:
    """summary_text for a run of the real server with several requests in flight (the served scenarios
    with goldens): the HTTP server + TokenizerManager, the DataParallelController and the detokenizer list
    each request's events together, in the order the process wrote them (rid-less events first, load polls
    and flushes after them in text order); every scheduler keeps its own order, which is the engine's
    logic."""
    recs = normalize(trace)
    if any("/" in rec["proc"] for rec in recs):  # a merged prefill/decode trace (tracer/servers.py)
        recs = pair_neutral(recs)

    def key(item: tuple[int, dict[str, Any]]) -> tuple:
        i, rec = item
        if rec["proc"] not in SHARED_PROCS:
            return rec["proc"], "", 0, "", i
        rid = rid_key(rec)
        if not rid and (rec.get("attrs") or {}).get("msg") in RANK_REPLIES:
            # load polls and reports, a flush and its replies (several schedulers answer, on their own
            # clocks): how many is the engine's logic, their order among themselves and beside other
            # rid-less messages is not
            return rec["proc"], rid, 1, event_line(rec), 0
        return rec["proc"], rid, 0, "", i

    order = {proc: n for n, proc in enumerate(dict.fromkeys(rec["proc"] for rec in recs))}
    ranked = [rec for _, rec in sorted(enumerate(recs),
                                       key=lambda item: (order[item[1]["proc"]], *key(item)[1:]))]
    out: list[dict[str, Any]] = []
    for (proc, rid), group in groupby(ranked, key=lambda rec: (rec["proc"], rid_key(rec))):
        group = list(group)
        out += delivery_order(group) if proc == "tokenizer_manager" and rid else group
    return "".join(event_line(rec) + "\n" for rec in out)


def delivery_order(recs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One request's events in the TokenizerManager, which two asyncio tasks write: the receive loop
    (tm.waiter_woken, with the text it delivered) and the request's handler (http.sse_chunk, ...). When both
    are ready, which writes first follows the clock, so each handler event is listed after the wake that
    delivered its text (an SSE chunk: the first wake whose text, added up, covers the chunks' text so far;
    another event: the last wake written before it), and before the next receive. Each task keeps its own
    order."""
    texts = [(rec.get("attrs") or {}).get("delta_text") or "" for rec in recs
             if rec["name"] == "tm.waiter_woken"]
    delivered = list(accumulate(len(text) for text in texts))
    if not delivered:
        return recs
    keyed, wakes, sent, at = [], 0, 0, 0
    for i, rec in enumerate(recs):
        if rec["name"] in ("ipc.recv", "tm.waiter_woken"):  # the loop: a receive, then the wake it causes
            wakes += rec["name"] == "tm.waiter_woken"
            keyed.append(((wakes + (rec["name"] == "ipc.recv"), 0, i), rec))
            continue
        attrs = rec.get("attrs") or {}
        if rec["name"] == "http.sse_chunk" and "delta" in attrs:
            sent += len(attrs["delta"])
            at = max(at, next((n + 1 for n, text in enumerate(delivered) if text >= sent), len(delivered)))
        else:
            at = max(at, wakes)
        keyed.append(((at, 1, i), rec))
    return [rec for _, rec in sorted(keyed, key=lambda item: item[0])]


# what differs between two runs of a prefill/decode pair behind the router, beyond one server's run
ENDPOINT = re.compile(r"^(tcp://[^:]+):\d+$")  # the bootstrap server's and the decode side's free ports


def pair_neutral(recs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A merged pair's records with the router's random bootstrap rooms numbered in the order they first
    appear (room 1, room 2, ...), each free port named the same way (tcp://127.0.0.1:port-1, ...), and the
    router's health polls (GetLoadReq) left out."""
    rooms: dict[Any, str] = {}
    ports: dict[str, str] = {}

    def neutral(key: str, value: Any) -> Any:
        if key == "room" and value is not None:
            return rooms.setdefault(value, f"room-{len(rooms) + 1}")
        if isinstance(value, str) and (m := ENDPOINT.match(value)):
            return f"{m.group(1)}:" + ports.setdefault(value, f"port-{len(ports) + 1}")
        return value

    out = []
    for rec in recs:
        attrs = rec.get("attrs") or {}
        if attrs.get("msg") in LOAD_PROBES:
            continue
        if attrs:
            rec = {**rec, "attrs": {k: neutral(k, v) for k, v in attrs.items()}}
        out.append(rec)
    return out
