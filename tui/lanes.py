"""Process lanes: which process holds the selected request at the cursor, and with which type.

The lane of the request's latest event lights up; each lane also shows the type the request last had
there, so a served request can be seen in two places at once (the scheduler decodes the next token
while the detokenizer turns the last one into text)."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.widgets import Static

from tui.frame import Frame
from tui.index import LANE_SHORT, LANE_TITLES, LANES, TYPE_CHAIN, Handoff, TraceIndex
from tui.textpane import TextPane

HISTORY = 6  # the request's latest events listed under the lanes


@dataclass
class LaneState:
    lane: str
    type: str | None  # the type the request last had in this lane
    last: Handoff | None  # its latest event in this lane
    lit: bool  # the lane of its latest event overall


def lane_states(index: TraceIndex, rid: str | None, cursor: int) -> list[LaneState]:
    """The four lanes for one request at the cursor."""
    handoffs = index.handoffs_until(rid, cursor) if rid is not None else []
    types: dict[str, str] = {}
    last: dict[str, Handoff] = {}
    for h in handoffs:
        last[h.lane] = h
        if h.type:
            types[h.lane] = h.type
    lit = handoffs[-1].lane if handoffs else None
    return [LaneState(lane, types.get(lane), last.get(lane), lane == lit) for lane in LANES]


def current_type(index: TraceIndex, rid: str | None, cursor: int) -> str | None:
    """The type of the request's latest typed handoff at or before the cursor."""
    for h in reversed(index.handoffs_until(rid, cursor) if rid else []):
        if h.type:
            return h.type
    return None


class LaneStrip(Static):
    """One line, always in view: the four lanes, the lit one with the request's type there."""

    DEFAULT_CSS = "LaneStrip { height: 1; text-wrap: nowrap; text-overflow: ellipsis; }"

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.text = Text()

    def show(self, frame: Frame) -> None:
        self.text = strip_text(frame)
        self.update(self.text)


def strip_text(frame: Frame) -> Text:
    text = Text()
    if frame.rid is None:
        return Text("no request in the trace yet", style="dim")
    color = frame.color(frame.rid)
    text.append(f"{frame.rid_label(frame.rid)} ", style=f"bold {color}")
    for i, ls in enumerate(lane_states(frame.index, frame.rid, frame.cursor)):
        if i:
            text.append(" │ ", style="dim")
        if ls.lit:
            text.append(f" {LANE_SHORT[ls.lane]}: {ls.type or '-'} ", style=f"bold black on {color}")
            if ls.last is not None and ls.last.sending_to:
                text.append(f" → {LANE_SHORT[ls.last.sending_to]}", style=color)
        else:
            text.append(LANE_SHORT[ls.lane], style="" if ls.type else "dim")
    return text


class LanesPane(TextPane):
    """The lanes in full: each lane's type and latest event, the type chain so far, the latest events."""

    def render_text(self, frame: Frame) -> Text:
        text = Text()
        rid = frame.rid
        if rid is None:
            return Text("no request in the trace yet", style="dim")
        color = frame.color(rid)
        text.append("Request ")
        text.append(rid, style=f"bold {color}")
        text.append(f" at event #{frame.cursor}\n\n")
        for ls in lane_states(frame.index, rid, frame.cursor):
            mark, style = ("▶ ", f"bold black on {color}") if ls.lit else ("  ", "")
            text.append(mark, style=f"bold {color}")
            text.append(f"{LANE_TITLES[ls.lane]:<31}", style=style)
            text.append(f" {ls.type or '—'}\n", style="bold" if ls.lit else ("" if ls.type else "dim"))
            if ls.last is not None:
                to = f" → {LANE_TITLES[ls.last.sending_to]}" if ls.last.sending_to else ""
                text.append(f"    latest: {ls.last.name} #{ls.last.index}{to}\n",
                            style="" if ls.lit else "dim")
        text.append("\ntypes: ", style="bold")
        seen = {h.type for h in frame.index.handoffs_until(rid, frame.cursor) if h.type}
        now = current_type(frame.index, rid, frame.cursor)
        for i, name in enumerate(TYPE_CHAIN):
            if i:
                text.append(" → ", style="dim")
            style = f"bold black on {color}" if name == now else ("green" if name in seen else "dim")
            text.append(name, style=style)
        text.append("\n\nlatest events of this request:\n", style="bold")
        for h in frame.index.handoffs_until(rid, frame.cursor)[-HISTORY:]:
            text.append(f"  #{h.index:<6} {LANE_SHORT[h.lane]:<11} {h.name}"
                        + (f" ({h.type})" if h.type else "") + "\n")
        return text
