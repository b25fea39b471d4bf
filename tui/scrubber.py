"""The scrubber: where the cursor is (event, round, time, mode), a bar over the whole timeline, and
buttons that run the same actions as the keys."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widget import Widget
from textual.widgets import Button, Static

from tui.frame import Frame
from tui.timeline import Timeline

CONTROLS = (  # id, label, action, tooltip
    ("start", "|<", "start", "first event (Home)"),
    ("round-back", "[", "round(-1)", "end of the previous round ([)"),
    ("back", "<", "step(-1)", "previous event (←)"),
    ("play", "play", "play", "play / pause (Space)"),
    ("step", ">", "step(1)", "next event (→)"),
    ("round", "]", "round(1)", "end of the next round (])"),
    ("end", ">|", "end", "last event (End)"),
    ("slower", "-", "slower", "play slower (-)"),
    ("faster", "+", "faster", "play faster (+)"),
)


class Bar(Widget):
    """The timeline as one line: done, the cursor, to come."""

    DEFAULT_CSS = "Bar { height: 1; width: 1fr; margin-left: 1; }"

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.fraction = 0.0

    def render(self) -> Text:
        width = max(self.size.width, 2)
        at = round(self.fraction * (width - 1))
        return Text.assemble(("━" * at, "green"), ("●", "bold"), ("─" * (width - at - 1), "grey50"))


class Scrubber(Vertical):
    DEFAULT_CSS = """
    Scrubber { height: 2; }
    Scrubber > #status { height: 1; text-wrap: nowrap; text-overflow: ellipsis; }
    Scrubber > Horizontal { height: 1; }
    Scrubber Button { min-width: 3; margin-right: 1; }
    """

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.text = Text()

    def compose(self) -> ComposeResult:
        yield Static(id="status")
        with Horizontal():
            for name, label, action, tooltip in CONTROLS:
                button = Button(label, action=f"app.{action}", compact=True, tooltip=tooltip,
                                id=f"ctl-{name}")
                button.can_focus = False  # the keys do it; focus stays on the pane
                button.active_effect_duration = 0  # every click counts, however fast they come
                yield button
            yield Bar()

    def show(self, frame: Frame, timeline: Timeline, live: bool) -> None:
        self.text = status_text(frame, timeline, live)
        self.query_one("#status", Static).update(self.text)
        self.query_one("#ctl-play", Button).label = "pause" if timeline.playing else "play"
        bar = self.query_one(Bar)
        bar.fraction = frame.cursor / (timeline.size - 1) if timeline.size > 1 else 0.0
        bar.refresh()


def status_text(frame: Frame, timeline: Timeline, live: bool) -> Text:
    text = Text()
    if live:
        text.append(" LIVE ", style="bold black on red")
        text.append(" ")
    text.append(f"{timeline.speed}/s ▶ " if timeline.playing else "paused ", style="bold")
    ev = frame.event
    if ev is None:
        text.append("waiting for events…", style="dim")
        return text
    text.append(f"#{frame.cursor} of {timeline.size} ")
    state = frame.state
    text.append(f"round {state.round if state and state.round is not None else '-'} ", style="bold")
    text.append(f"{frame.ms_since_start(ev.time_ns)} ", style="dim")
    text.append(ev.name, style="bold")
    if ev.ph in ("B", "E"):
        text.append(f" {ev.ph}")
    if timeline.pinned:
        text.append("  following ", style="dim")
        text.append(frame.rid_label(timeline.pinned), style=f"bold {frame.color(timeline.pinned)}")
    if timeline.filter:
        text.append(f"  /{timeline.filter}: {len(timeline.visible())} events", style="yellow")
    return text
