"""The admission pane: the cursor's round as the PrefillAdder saw it — the budgets it started with, each
candidate so far with its needs, every budget before → after and the decision, the budget that decided it in
reverse video — the same data as `trace export --view admission` (tracer.admission)."""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from tracer.admission import (
    NAMES,
    AdderPass,
    Candidate,
    admission_of,
    cell,
    has_budgets,
    reserved_formula,
    start_lines,
)
from tracer.check_admission import BUDGETS
from tracer.fmt import short_rid
from tui.frame import Frame

SHORT = {"rem_total_tokens": "total", "rem_input_tokens": "input", "rem_chunk_tokens": "chunk",
         "rem_kv_room": "kv room", "rem_running": "running"}
ROW_STYLE = {"refused": "red", "chunked": "yellow"}
HIT_STYLE = {"refused": "bold reverse red", "chunked": "bold reverse yellow"}


class AdmissionPane(VerticalScroll):
    """Redrawn only when the round, the selected request or the admission events up to the cursor change."""

    DEFAULT_CSS = """
    AdmissionPane { height: 1fr; }
    AdmissionPane > Static { width: 1fr; height: auto; }
    """

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._body = Static()
        self._shown: tuple | None = None

    def compose(self) -> ComposeResult:
        yield self._body

    def show(self, frame: Frame) -> None:
        state = frame.state
        n = state.round if state is not None else None
        key = (n, frame.rid, _upto(frame, n))
        if key != self._shown:
            self._shown = key
            self._body.update(_view(frame, n))


def _upto(frame: Frame, n: int | None) -> int:
    """The last admission event of round n at or before the cursor: the pane changes only when it does."""
    if n is None:
        return -1
    return max((ev.index for ev in frame.trace.events_in_round(n) if ev.name in NAMES
                and ev.index <= frame.cursor),
               default=-1)


def _view(frame: Frame, n: int | None) -> Group | Text:
    if n is None:
        return Text("no scheduler round yet", style="dim")
    if not has_budgets(frame.trace):
        return Text("this trace predates the admission budgets (schema 2): it has no budgets to show",
                    style="dim")
    adm = admission_of(frame.trace, n, upto=frame.cursor)
    later = len(admission_of(frame.trace, n).candidates) - len(adm.candidates)
    parts: list = []
    for i, p in enumerate(adm.passes, start=1):
        head = f"round {n} · PrefillAdder" + (f" {i} of {len(adm.passes)}" if len(adm.passes) > 1 else "")
        parts += [Text(head, style="bold"), *_start(p), _candidates(frame, p)]
        parts += [Text.assemble((f"{k} {short_rid(c.rid)}: ", "bold"), (c.why, ROW_STYLE.get(c.decision, "")))
                  for k, c in enumerate(p.candidates, start=1)]
        if p.not_considered:
            parts.append(Text("never considered: " + ", ".join(short_rid(r) for r in p.not_considered)
                              + (f" (the round stopped at {short_rid(p.stopped_by)})" if p.stopped_by
                                 else "")))
    for s in adm.skipped:
        parts += [Text(f"round {n}: no PrefillAdder ran", style="bold"),
                  Text.assemble((s.reason, HIT_STYLE["refused"]), f": {s.num_running} running of "
                                f"max_running_requests {s.max_running_requests}; waiting "
                                + ", ".join(short_rid(r) for r in s.waiting))]
    if later > 0:
        parts.append(Text(f"{later} more candidate(s) later in this round: ] shows the whole round",
                          style="dim"))
    if not parts:
        parts.append(Text(f"round {n}: nothing waiting for admission (so far)", style="dim"))
    return Group(*parts)


def _start(p: AdderPass) -> list[Text]:
    if p.start is None:
        return []
    out = [Text.assemble((f"{name} ({SHORT[name]})".ljust(27), "cyan"), how)
           for name, how in start_lines(p.start)]
    running = ", ".join(short_rid(r) for r in p.start.running_rids) or "none"
    out.append(Text.assemble(("running: ".ljust(27), "cyan"), f"{running} · {reserved_formula(p.start)}"))
    return out


def _candidates(frame: Frame, p: AdderPass) -> Table:
    table = Table(box=None, padding=(0, 1, 0, 0), header_style="bold", expand=False)
    for name in ("#", "rid", "extend", "future", "locked"):
        table.add_column(name, no_wrap=True, justify="left" if name == "rid" else "right")
    for b in BUDGETS:
        table.add_column(SHORT[b], justify="right", min_width=len(SHORT[b]))
    table.add_column("decision", no_wrap=True, min_width=8)
    for k, c in enumerate(p.candidates, start=1):
        table.add_row(*_cells(frame, k, c), style=ROW_STYLE.get(c.decision, ""))
    return table


def _cells(frame: Frame, k: int, c: Candidate) -> list:
    rid = Text(short_rid(c.rid) + (" (chunk)" if c.source == "chunked_req" else ""),
               style=("bold " if c.rid == frame.rid else "") + frame.color(c.rid))
    budgets = [Text(cell(c, b), style=HIT_STYLE[c.decision] if b == c.deciding else "") for b in BUDGETS]
    return [str(k), rid, str(c.extend_input_len), str(c.future_tokens), str(c.prefix_locked), *budgets,
            Text(c.decision, style="bold" if c.decision == "refused" else "")]
