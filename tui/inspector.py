"""The event inspector: every field of the event at the cursor, token ids with their text."""

from __future__ import annotations

from typing import Any

from rich.text import Text

from tracer.event import Event
from tui.frame import Frame
from tui.index import TraceIndex
from tui.textpane import TextPane

TOKEN_KEYS = {"input_ids", "token_ids", "token_id", "output_ids"}


class EventInspector(TextPane):
    def render_text(self, frame: Frame) -> Text:
        ev = frame.event
        if ev is None:
            return Text("no events yet", style="dim")
        return event_text(ev, frame)


def event_text(ev: Event, frame: Frame) -> Text:
    text = Text()
    text.append(f"#{ev.index} ", style="dim")
    text.append(ev.name, style="bold")
    text.append(f"  ph={ev.ph}  {frame.ms_since_start(ev.time_ns)}\n")
    text.append(f"proc {ev.proc}  pid {ev.pid}  seq {ev.seq}  {ev.where}\n", style="dim")
    if ev.round is not None:
        text.append(f"round {ev.round}\n")
    for rid in ev.all_rids:
        text.append("rid ", style="dim")
        text.append(rid + "\n", style=f"bold {frame.color(rid)}")
    if ev.flow_id:
        text.append(f"flow {ev.flow_id} ({ev.flow_dir})\n")
    for key, value in ev.attrs.items():
        text.append(f"{key}: ", style="cyan")
        text.append(_value(key, value, frame.index) + "\n")
    return text


def _value(key: str, value: Any, index: TraceIndex) -> str:
    if key == "nodes" and isinstance(value, list):
        return f"{len(value)} radix-tree nodes (the Radix tab draws them)"
    if key in TOKEN_KEYS:
        return tokens_text(value, index)
    return str(value)


def tokens_text(value: Any, index: TraceIndex) -> str:
    """Token ids with their text where the trace has it: `40 " one"`."""
    if isinstance(value, int):
        text = index.text_of(value)
        return str(value) if text is None else f"{value} {text!r}"
    if isinstance(value, list):
        return "[" + ", ".join(tokens_text(v, index) for v in value) + "]"
    return str(value)
