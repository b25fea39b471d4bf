"""The states a request goes through, read off traces: replay each event and note every change of a
request's state, with the event that made it. The course draws the union over its scenarios as one state
diagram, each transition with the scenarios that show it (`{{ states ... }}` in a lesson page).

A request's state is its replayed status (tracer/state.py: waiting, running, retracted, finished, aborted,
and, on a PD prefill server, transferring), except that the request whose prompt is being prefilled a chunk
per round is `chunked`. `[*]` is before its first event and after it has finished or was aborted.
"""

from __future__ import annotations

from tracer.reader import Trace
from tracer.replayer import Replayer
from tracer.state import ABORTED, FINISHED

START = "[*]"
CHUNKED = "chunked"
ORDER = (START, "waiting", CHUNKED, "running", "retracted", "transferring", FINISHED, ABORTED)
# a state's name on a Chinese page's diagram (the table beside it gives the name the code uses)
ZH = {"waiting": "等待", CHUNKED: "分块预填充中", "running": "运行中", "retracted": "已撤回",
      "transferring": "KV 传输中", FINISHED: "已完成", ABORTED: "已中止"}


def transitions(trace: Trace) -> set[tuple[str, str, str]]:
    """Every (from state, to state, event name) that happens to some request of the trace."""
    r, now, seen = Replayer(trace.level or 2), {}, set()
    for ev in trace.events:
        r.apply(ev)
        for rid, req in r.reqs.items():
            state = CHUNKED if r.chunked == rid and req.status not in (FINISHED, ABORTED) else req.status
            if now.get(rid) != state:
                seen.add((now.get(rid, START), state, ev.name))
                now[rid] = state
    return seen


def union(traces: dict[str, Trace]) -> dict[tuple[str, str, str], list[str]]:
    """Each transition of any of the traces, with the names of the traces (scenarios) it happens in; in the
    order of ORDER (a state's way in before its ways out), then of the event's name."""
    out: dict[tuple[str, str, str], list[str]] = {}
    for name, trace in traces.items():
        for t in transitions(trace):
            out.setdefault(t, []).append(name)
    rank = {s: i for i, s in enumerate(ORDER)}
    def key(item):
        (a, b, event), _ = item
        return rank.get(a, len(ORDER)), rank.get(b, len(ORDER)), event

    return dict(sorted(out.items(), key=key))


def state_diagram(found: dict[tuple[str, str, str], list[str]], lang: str = "en") -> str:
    """Mermaid's stateDiagram-v2 of the transitions: one arrow per (from, to), labelled with its events; a
    finished or aborted request's arrow to the end. lang "zh": the states are named in Chinese."""
    arrows: dict[tuple[str, str], list[str]] = {}
    for (a, b, event), _ in found.items():
        arrows.setdefault((a, b), []).append(event)
    lines = ["stateDiagram-v2"]
    if lang == "zh":
        states = dict.fromkeys(s for pair in arrows for s in pair if s != START)
        lines += [f'    state "{ZH.get(s, s)}" as {s}' for s in states]
    for (a, b), events in arrows.items():
        lines.append(f"    {a} --> {b}: {', '.join(dict.fromkeys(events))}")
    for end in (FINISHED, ABORTED):
        if any(b == end for _, b in arrows):
            lines.append(f"    {end} --> {START}")
    return "\n".join(lines)
