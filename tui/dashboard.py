"""The dashboard: four panes at once, for a wide terminal — the round's batch (top left), the KV pool (top
right), the queues over the radix tree (bottom left) and the client's text (bottom right). They are second
copies of the single panes' widgets, drawn by the same code from the same Frame, all on every step."""

from __future__ import annotations

from typing import Self

from textual.app import ComposeResult
from textual.containers import Grid, Vertical
from textual.widgets import DataTable

from tui.frame import Frame
from tui.kv_grid import KVGrid
from tui.output import OutputPane
from tui.queues import QueuesPane
from tui.radix import RadixPane
from tui.round_pane import RoundPane

TITLES = {"round": "4 Round", "kv": "5 KV", "queues": "7 Queues", "radix": "6 Radix", "output": "8 Output"}


class Dashboard(Grid):
    DEFAULT_CSS = """
    Dashboard { grid-size: 2 2; grid-columns: 1fr 1fr; grid-rows: 1fr 1fr; }
    Dashboard .dash-cell { border: round $panel-lighten-2; border-title-color: $text-accent;
                           height: 1fr; padding: 0; }
    Dashboard .dash-cell:focus-within { border: round $accent; }
    Dashboard > Vertical > QueuesPane.dash-cell { height: auto; max-height: 60%; }
    """

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.panes = {"round": RoundPane(prefix="dash-", id="dash-round"), "kv": KVGrid(id="dash-kv"),
                      "queues": QueuesPane(id="dash-queues"), "radix": RadixPane(id="dash-radix"),
                      "output": OutputPane(id="dash-output")}
        for name, pane in self.panes.items():
            pane.add_class("dash-cell")
            pane.border_title = TITLES[name]

    def compose(self) -> ComposeResult:
        yield self.panes["round"]
        yield self.panes["kv"]
        with Vertical():
            yield self.panes["queues"]
            yield self.panes["radix"]
        yield self.panes["output"]

    def show(self, frame: Frame) -> None:
        for pane in self.panes.values():
            pane.show(frame)

    def focus(self, scroll_visible: bool = True) -> Self:
        """The dashboard itself takes no focus: its round table does, as the round pane's does."""
        self.panes["round"].query_one(DataTable).focus(scroll_visible)
        return self
