"""Small questions a scenario asks of its own trace, to say where to look (round numbers, rows, slots)."""

from __future__ import annotations

from typing import Any, Callable

from tracer.event import Event
from tracer.reader import Trace


def events(trace: Trace, name: str, pred: Callable[[Event], bool] = lambda ev: True) -> list[Event]:
    return [ev for ev in trace.events if ev.name == name and pred(ev)]


def first(trace: Trace, name: str, pred: Callable[[Event], bool] = lambda ev: True) -> Event | None:
    return next((ev for ev in trace.events if ev.name == name and pred(ev)), None)


def batches(trace: Trace) -> list[Event]:
    """Every round's sched.batch_formed, in round order."""
    return events(trace, "sched.batch_formed")


def batch_of(trace: Trace, rid: str, mode: str | None = None) -> Event | None:
    """The first batch that holds `rid` (in the given forward mode, if one is given)."""
    return next(
        (
            ev
            for ev in batches(trace)
            if rid in (ev.rids or []) and (mode is None or ev.get("forward_mode") == mode)
        ),
        None,
    )


def describe_batch(ev: Event) -> str:
    rows = len(ev.get("out_cache_loc") or [])
    return f"round {ev.round}: {ev.get('forward_mode')} of {rows} row(s) for {', '.join(ev.rids or [])}"


def result_line(rid: str, result: dict[str, Any]) -> str:
    if "error" in result:
        return f"{rid}: refused: {result['error']}"
    if "sse_messages" in result:  # a server scenario's client: what it read off the stream
        return f"{rid}: {result['sse_messages']} SSE message(s) read: {result['text']!r}"
    if "tool_calls" in result:  # a chat answer whose text the serving layer turned into calls
        calls = ", ".join(f"{c['function']['name']}({c['function']['arguments']})"
                          for c in result["tool_calls"])
        return f"{rid}: finish_reason {result['finish_reason']}, tool_calls {calls}"
    if "reasoning_content" in result:  # a chat answer whose <think> block the reasoning parser took out
        return f"{rid}: reasoning_content {result['reasoning_content']!r}, content {result['content']!r}"
    if "left" in result:  # a client that went away without an answer
        return f"{rid}: the client left: {result['left']}"
    meta = result.get("meta_info") or result  # /generate's answer carries it in meta_info
    reason = (meta.get("finish_reason") or {}).get("type")
    return f"{rid}: {len(result['output_ids'])} token(s), finished by {reason}: {result['text']!r}"
