"""Every key of the app, in one table: the bindings, the help screen and the docs page are made from it."""

from __future__ import annotations

from typing import NamedTuple

from textual.binding import Binding


class Key(NamedTuple):
    keys: str  # Textual key names, comma-separated
    label: str  # how the help screen writes the keys
    action: str
    description: str
    footer: str = ""  # the word shown in the footer line; empty: not shown there
    # before the focused widget: the moves, since tables and trees bind arrows and space
    priority: bool = False


KEYS: tuple[Key, ...] = (
    Key("right,l", "→ l", "step(1)", "next event", footer="step", priority=True),
    Key("left,h", "← h", "step(-1)", "previous event", footer="back", priority=True),
    Key("right_square_bracket", "]", "round(1)", "end of the next round", footer="round", priority=True),
    Key("left_square_bracket", "[", "round(-1)", "end of the previous round", priority=True),
    Key("home,g", "Home g", "start", "first event", priority=True),
    Key("end,G", "End G", "end", "last event", priority=True),
    Key("space", "Space", "play", "play / pause", footer="play", priority=True),
    Key("plus,equals_sign", "+", "faster", "play faster"),
    Key("minus", "-", "slower", "play slower"),
    Key("f", "f", "follow", "follow the selected request (its events and rounds only) / stop",
        footer="follow"),
    Key("n", "n", "select(1)", "select the next request"),
    Key("p", "p", "select(-1)", "select the previous request"),
    Key("slash", "/", "filter", "filter events by name or rid (Enter keeps it, Esc clears it)",
        footer="filter"),
    Key("escape", "Esc", "clear_filter", "clear the filter"),
    Key("d", "d", "diagram", "write the current round's diagram (DOT) next to the trace"),
    Key("0", "0", "", "show the dashboard: round, KV, queues + radix and output at once"),
    Key("1,2,3,4,5,6,7,8,9", "1 … 9", "",
        "show a pane: requests, lanes, event, round, KV, radix, queues, output, "
        "admission"),
    Key("question_mark", "?", "help", "this help", footer="help"),
    Key("q", "q", "quit", "quit", footer="quit"),
)

TABS = ("requests", "lanes", "event", "round", "kv", "radix", "queues", "output", "admission")
TAB_LABELS = ("1 Reqs", "2 Lanes", "3 Event", "4 Round", "5 KV", "6 Radix", "7 Queues", "8 Output", "9 Admit")
DASH, DASH_LABEL = "dash", "0 Dash"  # the dashboard's tab, placed first, on key 0


def bindings() -> list[Binding]:
    out = []
    for k in KEYS:
        if k.action:
            out.append(Binding(k.keys, k.action, k.footer or k.description, show=bool(k.footer),
                               key_display=k.label.split()[0], priority=k.priority))
    out.append(Binding("0", f"tab('{DASH}')", "show the dashboard", show=False))
    for i, tab in enumerate(TABS, start=1):
        out.append(Binding(str(i), f"tab('{tab}')", f"show the {tab} pane", show=False))
    return out
