"""The round pane: the current round's batch, one row per token — the request, the token, its position,
the KV slot it is written to (out_cache_loc), cached prefix or computed now, and the token it sampled."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import DataTable, Static

from tracer import schema as S
from tracer.diagrams.facts import collectives
from tracer.fmt import ranges
from tracer.reader import Trace
from tracer.state import BatchRow, RoundBatch
from tracer.tp_ranks import tp_ranks_by_round
from tui.frame import Frame

COLUMNS = ("rid", "pos", "token", "text", "slot", "kv", "sampled")


class RoundPane(Vertical):
    DEFAULT_CSS = """
    RoundPane > .round-title { height: auto; }
    RoundPane > DataTable { height: 1fr; }
    """

    def __init__(self, *, prefix: str = "", **kwargs):
        """prefix: for the ids of its title and table, so that a second copy (the dashboard's) has its own."""
        super().__init__(**kwargs)
        self.prefix = prefix
        self.title_text = Text()
        self._shown: tuple | None = None

    def compose(self) -> ComposeResult:
        yield Static(id=f"{self.prefix}round-title", classes="round-title")
        yield DataTable(cursor_type="row", zebra_stripes=True, id=f"{self.prefix}round-rows")

    def on_mount(self) -> None:
        self.query_one(DataTable).add_columns(*COLUMNS)

    def show(self, frame: Frame) -> None:
        state = frame.state
        batch = state.batch if state else None
        key = (state.round if state else None, frame.rid, _signature(batch))
        if key == self._shown:
            return
        self._shown = key
        self.title_text = round_title(frame, batch)
        self.query_one(".round-title", Static).update(self.title_text)
        table = self.query_one(DataTable)
        table.clear()
        for row in batch.rows if batch else []:
            table.add_row(*row_cells(frame, row))


def _signature(batch: RoundBatch | None) -> tuple | None:
    """What changes the table: a new batch, or a sampled token arriving in this one."""
    if batch is None:
        return None
    return batch.round, batch.formed_ns, batch.duration_ms, tuple(r.token for r in batch.rows if r.sampled)


def round_title(frame: Frame, batch: RoundBatch | None) -> Text:
    state = frame.state
    if state is None:
        return Text("no events yet", style="dim")
    if batch is None:
        where = f"round {state.round}" if state.round is not None else "before the first round"
        return Text(f"{where}: no batch formed yet (the scheduler is still preparing it)", style="dim")
    computed = len(batch.forward_rows)
    text = Text()
    text.append(f"round {batch.round} ", style="bold")
    text.append(f"{batch.mode} · {len(batch.rids)} request(s) · {computed} row(s) computed")
    cached = len(batch.rows) - computed
    if cached:
        text.append(f" + {cached} cached prefix row(s)")
    drafts = sum(r.draft for r in batch.rows)
    if drafts:
        text.append(f" ({drafts} of them draft rows: speculative tokens under verification)")
    text.append(f" · out_cache_loc {ranges(batch.out_cache_loc)}")
    if batch.duration_ms is not None:
        text.append(f" · forward {batch.duration_ms:.1f} ms")
    if frame.trace.tp_rank_events:
        text.append(f" · {tp_note(frame.trace, batch.round)}")
    return text


_TP_NOTES: dict[int, tuple[Trace, dict[int, str]]] = {}


def tp_note(trace: Trace, round: int) -> str:
    """A --tp-size trace: the tp ranks that ran this round's forward and the collectives each made (rank 0's
    model.forward end), as the lifecycle diagram says it: "tp ranks 0 1 2: 61 all-reduces, 1 all-gather"."""
    cached = _TP_NOTES.get(id(trace))
    if cached is None or cached[0] is not trace or round not in cached[1]:  # new, or grown (a live trace)
        ends = {ev.round: ev for ev in trace.events if ev.name == S.MODEL_FORWARD and ev.ph == S.PH_END}
        notes = {r: collectives(ends[r], ranks) for r, ranks in tp_ranks_by_round(trace).items() if r in ends}
        cached = _TP_NOTES[id(trace)] = (trace, notes)
    return cached[1].get(round, "tp ranks: this round's forward is not in the trace")


def row_cells(frame: Frame, row: BatchRow) -> list:
    color = frame.color(row.rid)
    selected = row.rid == frame.rid
    style = f"bold {color}" if selected else color
    token_text = frame.index.text_of(row.input_id)
    sampled = ""
    if row.sampled:
        sampled = "→ ?" if row.token is None else f"→ {row.token}"
        if row.token is not None and frame.index.text_of(row.token) is not None:
            sampled += f" {frame.index.text_of(row.token)!r}"
    return [Text(frame.rid_label(row.rid), style=style), str(row.position),
            "-" if row.input_id is None else str(row.input_id),
            "" if token_text is None else repr(token_text), "-" if row.slot is None else str(row.slot),
            "cached" if row.cached else "draft" if row.draft else "new",
            Text(sampled, style="bold" if row.sampled else "")]
