"""The `?` screen: every key, and what each pane shows."""

from __future__ import annotations

from typing import ClassVar

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from tui.keys import KEYS

PANES = (
    ("0 Dash",
     "round, KV, queues over radix, and output at once (the start on a terminal of 120×36 or more)"),
    ("1 Reqs",
     "every request: prompt, status, in/cached/out tokens, time to first token, rounds; ↑/↓ selects"),
    ("2 Lanes", "the process holding the selected request, and the type it has there"),
    ("3 Event", "every field of the event at the cursor, token ids with their text"),
    ("4 Round", "this round's batch, a row per token: position, KV slot, cached or new, sampled token"),
    ("5 KV", "the KV pool, slots coloured by owner; * marks the selected request's slots"),
    ("6 Radix", "the radix tree: tokens, slots, lock counts; the selected request's path in colour"),
    ("7 Queues", "waiting_queue, running_batch, chunked_req"),
    ("8 Output", "the text the client has received so far (SSE chunks)"),
    ("9 Admit",
     ("this round's PrefillAdder: starting budgets, each candidate's needs, budgets before → after, "
                 "the decision; the budget that refused it (or cut its chunk) in reverse video")),
)


def help_table() -> Table:
    keys = Table(title="Keys", show_header=False, box=None, padding=(0, 2, 0, 0))
    keys.add_column(style="bold cyan", no_wrap=True)
    keys.add_column()
    for k in KEYS:
        keys.add_row(k.label, k.description)
    keys.add_row("Tab", "move the focus between the controls, the tabs and the pane")
    return keys


def panes_table() -> Table:
    panes = Table(title="Panes", show_header=False, box=None, padding=(0, 2, 0, 0))
    panes.add_column(style="bold cyan", no_wrap=True)
    panes.add_column()
    for name, what in PANES:
        panes.add_row(name, what)
    return panes


class HelpScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll { width: 90%; max-width: 100; height: 90%; border: round $accent;
                                  background: $surface; padding: 0 1; }
    """
    BINDINGS: ClassVar = [Binding("escape,question_mark,q", "dismiss", "close")]

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(Text("minisgl replay — Esc closes this help", style="bold"))
            yield Static(help_table())
            yield Static(panes_table())
