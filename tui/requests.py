"""The requests table: one row per request, its status and counts as of the cursor. Moving the table's
cursor (up/down) selects the request that the lanes, KV, radix and output panes follow."""

from __future__ import annotations

from rich.text import Text
from textual.message import Message
from textual.widgets import DataTable

from tracer.fmt import ranges
from tracer.state import ReqState
from tui.frame import Frame

COLUMNS = ("rid", "prompt", "status", "in", "cached", "out", "TTFT ms", "rounds")  # in/cached/out: tokens
PREVIEW = 22  # characters of the prompt shown
USER_TURN, END_TURN = "<|im_start|>user", "<|im_end|>"  # ChatML, the bundled model's chat template


class RequestsTable(DataTable):
    """Rows keyed by rid; `show` updates only the cells that changed."""

    class Selected(Message):
        def __init__(self, rid: str):
            super().__init__()
            self.rid = rid

    def __init__(self, **kwargs):
        super().__init__(cursor_type="row", zebra_stripes=True, **kwargs)
        self.rows_shown: dict[str, tuple] = {}  # rid -> the plain values of its cells

    def on_mount(self) -> None:
        for i, name in enumerate(COLUMNS):
            self.add_column(name, key=f"c{i}")

    def show(self, frame: Frame) -> None:
        for rid in frame.index.rids:
            values = request_row(frame, rid)
            old = self.rows_shown.get(rid)
            if old == values:
                continue
            cells = [Text(values[0], style=f"bold {frame.color(rid)}"), *values[1:]]
            if old is None:
                self.add_row(*cells, key=rid)
            else:
                for i, (a, b) in enumerate(zip(old, values)):
                    if a != b:
                        self.update_cell(rid, f"c{i}", cells[i], update_width=True)
            self.rows_shown[rid] = values

    def select(self, rid: str) -> None:
        """Put the table's cursor on the request (without announcing a new selection)."""
        if rid in self.rows_shown:
            row = self.get_row_index(rid)
            if row != self.cursor_row:
                with self.prevent(DataTable.RowHighlighted):
                    self.move_cursor(row=row)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        # stale: the first row is highlighted as rows are added, before `select` moves the cursor
        if event.row_key.value is not None and event.cursor_row == self.cursor_row:
            self.post_message(self.Selected(event.row_key.value))


def request_row(frame: Frame, rid: str) -> tuple[str, ...]:
    """The request's cells as plain strings: rid, prompt preview, status, prompt/cached/output tokens,
    time to first token, and the rounds it has been batched in."""
    info = frame.index.requests[rid]
    req: ReqState | None = frame.state.reqs.get(rid) if frame.state else None
    preview = prompt_preview(info.prompt_text, info.prompt_ids)
    if req is None:
        arrived = bool(info.events) and info.events[0] <= frame.cursor
        status = "arrived" if arrived else "-"
        n_prompt = len(info.prompt_ids) if info.prompt_ids and arrived else None
        return (frame.rid_label(rid), preview, status, _n(n_prompt), "-", "-", "-", "-")
    start = info.received_ns if info.received_ns is not None else req.created_ns
    ttft = f"{(req.token_ns[0] - start) / 1e6:.1f}" if req.token_ns and start is not None else "-"
    rounds = ranges(sorted(set(req.prefill_rounds) | set(req.decode_rounds)))
    return (frame.rid_label(rid), preview, req.status, _n(req.input_len), _n(req.cached_tokens),
            _n(req.output_len), ttft, rounds)


def prompt_preview(text: str | None, ids: list[int] | None) -> str:
    """The start of the prompt: the last user turn of a ChatML prompt, else the text, else the ids."""
    if text is None:
        text = "ids " + " ".join(map(str, ids)) if ids else "-"
    if USER_TURN in text:
        text = text.rsplit(USER_TURN, 1)[1].split(END_TURN, 1)[0]
    text = " ".join(text.split())
    return text if len(text) <= PREVIEW else text[: PREVIEW - 1] + "…"


def _n(x: int | None) -> str:
    return "-" if x is None else str(x)
