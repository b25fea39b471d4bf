"""The replay app: a scrubber over a trace's merged timeline, with every pane in step with it.

The app owns the bindings and the moves; the Timeline decides where a move lands, the StateCache
rebuilds the scheduler's state there, and each pane draws one Frame. Only the tab in view is redrawn
on a step (the others catch up when their tab is opened), so stepping stays cheap on large traces; the
dashboard tab (tui.dashboard) is four panes in one, all redrawn on a step.
"""

from __future__ import annotations

from pathlib import Path

from textual import work
from textual.actions import SkipAction
from textual.app import App, ComposeResult
from textual.timer import Timer
from textual.widgets import Footer, Input, TabbedContent, TabPane

from tracer.reader import Trace, TraceError, TraceTail
from tui.admission_pane import AdmissionPane
from tui.dashboard import Dashboard
from tui.diagram import write_round_diagram
from tui.frame import Frame
from tui.help import HelpScreen
from tui.index import TraceIndex
from tui.inspector import EventInspector
from tui.keys import DASH, DASH_LABEL, TAB_LABELS, TABS, bindings
from tui.kv_grid import KVGrid
from tui.lanes import LanesPane, LaneStrip
from tui.output import OutputPane
from tui.queues import QueuesPane
from tui.radix import RadixPane
from tui.requests import RequestsTable
from tui.round_pane import RoundPane
from tui.scrubber import Scrubber
from tui.states import StateCache
from tui.timeline import Timeline

PANES = {"requests": RequestsTable, "lanes": LanesPane, "event": EventInspector, "round": RoundPane,
         "kv": KVGrid, "radix": RadixPane, "queues": QueuesPane, "output": OutputPane,
         "admission": AdmissionPane}
DASH_MIN_SIZE = (120, 36)  # a terminal at least this wide and tall opens on the dashboard


class ReplayApp(App[None]):
    TITLE = "minisgl replay"
    ENABLE_COMMAND_PALETTE = False
    CSS = """
    TabbedContent { height: 1fr; }
    TabPane { padding: 0; }
    #filter { display: none; }
    #filter.shown { display: block; }
    """
    BINDINGS = bindings()

    def __init__(self, trace: Trace, *, tail: TraceTail | None = None, rid: str | None = None,
                 poll_seconds: float = 0.5):
        """trace: the trace to replay (tail.trace in live mode). rid: the request to select and follow."""
        super().__init__()
        self.trace = trace
        self.tail = tail
        self.poll_seconds = poll_seconds
        self.index = TraceIndex(trace)
        self.timeline = Timeline(self.index)
        self.states = StateCache(trace)
        self.rid = rid if rid is not None else next(iter(self.index.requests), None)
        self._follow_at_start = rid is not None
        self._play_timer: Timer | None = None
        self._poll_timer: Timer | None = None
        self.panes: dict = {}
        self.last_diagram: Path | None = None

    def compose(self) -> ComposeResult:
        yield Scrubber()
        yield LaneStrip()
        with TabbedContent(initial="requests"):
            with TabPane(DASH_LABEL, id=DASH):
                yield Dashboard(id=f"{DASH}-pane")
            for tab, label in zip(TABS, TAB_LABELS):
                with TabPane(label, id=tab):
                    yield PANES[tab](id=f"{tab}-pane")
        yield Input(placeholder="filter: words of an event name or rid (Enter keeps it, Esc clears it)",
                    id="filter", compact=True)
        yield Footer()

    def on_mount(self) -> None:
        self.panes = {tab: self.query_one(f"#{tab}-pane") for tab in (DASH, *TABS)}
        self._scrubber, self._strip = self.query_one(Scrubber), self.query_one(LaneStrip)
        self._tabs = self.query_one(TabbedContent)
        if self.size.width >= DASH_MIN_SIZE[0] and self.size.height >= DASH_MIN_SIZE[1]:
            self._tabs.active = DASH
        if self._follow_at_start and self.rid is not None:
            self.timeline.pin(self.rid)
        self.refresh_view()
        if self.active_tab != "requests":
            self.panes["requests"].show(self.frame())  # every request's row, for select(), out of view
        self.panes[self.active_tab].focus()
        if self.rid is not None:
            self.panes["requests"].select(self.rid)
        if self.tail is not None:
            self._poll_timer = self.set_interval(self.poll_seconds, self.poll_trace)

    # ---- drawing ----------------------------------------------------------------------------------
    def frame(self) -> Frame:
        cursor = self.timeline.cursor
        state = self.states.at(cursor) if cursor >= 0 else None
        row = self.states.rows_of(self.rid) if state is not None and self.rid is not None else {}
        event = self.trace.events[cursor] if cursor >= 0 else None
        return Frame(self.trace, self.index, cursor, event, state, self.rid, row)

    def refresh_view(self) -> None:
        frame = self.frame()
        self._scrubber.show(frame, self.timeline, live=self.tail is not None)
        self._strip.show(frame)
        self.panes[self.active_tab].show(frame)

    @property
    def active_tab(self) -> str:
        return self._tabs.active or "requests"

    def on_tabbed_content_tab_activated(self, event: TabbedContent.TabActivated) -> None:
        if self.panes and event.pane.id in self.panes:
            self.panes[event.pane.id].show(self.frame())

    # ---- moving the cursor ------------------------------------------------------------------------
    def _scrubbing(self) -> None:
        """Keys that move the cursor are priority bindings; let them through to a text box or a dialog."""
        if len(self.screen_stack) > 1 or isinstance(self.focused, Input):
            raise SkipAction()

    def _moved(self, moved: bool) -> None:
        if moved:
            self.refresh_view()

    def action_step(self, n: int) -> None:
        self._scrubbing()
        self._moved(self.timeline.step(n))

    def action_round(self, n: int) -> None:
        self._scrubbing()
        self._moved(self.timeline.step_round(n))

    def action_start(self) -> None:
        self._scrubbing()
        self._moved(self.timeline.to_start())

    def action_end(self) -> None:
        self._scrubbing()
        self._moved(self.timeline.to_end())

    def action_play(self) -> None:
        self._scrubbing()
        self.timeline.toggle_play()
        self._restart_player()
        self.refresh_view()

    def action_faster(self) -> None:
        self._scrubbing()
        self.timeline.faster()
        self._restart_player()
        self.refresh_view()

    def action_slower(self) -> None:
        self._scrubbing()
        self.timeline.slower()
        self._restart_player()
        self.refresh_view()

    def _restart_player(self) -> None:
        if self._play_timer is not None:
            self._play_timer.stop()
            self._play_timer = None
        if self.timeline.playing:
            self._play_timer = self.set_interval(1 / self.timeline.speed, self._play_tick)

    def _play_tick(self) -> None:
        moved = self.timeline.tick()
        if not self.timeline.playing:
            self._restart_player()
        if moved or not self.timeline.playing:
            self.refresh_view()

    # ---- requests, follow mode, filter ------------------------------------------------------------
    def select_rid(self, rid: str) -> None:
        """Select a request; in follow mode, follow it instead."""
        if rid == self.rid:
            return
        self.rid = rid
        if self.timeline.pinned is not None:
            self.timeline.pin(rid)
        self.panes["requests"].select(rid)
        self.refresh_view()

    def on_requests_table_selected(self, message: RequestsTable.Selected) -> None:
        self.select_rid(message.rid)

    def action_select(self, n: int) -> None:
        rids = self.index.rids
        if not rids:
            return
        at = rids.index(self.rid) if self.rid in rids else -n
        self.select_rid(rids[(at + n) % len(rids)])

    def action_follow(self) -> None:
        self._scrubbing()
        if self.timeline.pinned is not None:
            self.timeline.pin(None)
            self.notify("stopped following: steps visit every event")
        elif self.rid is not None:
            self.timeline.pin(self.rid)
            self.notify(f"following {self.rid}: steps visit only its events and rounds")
        self.refresh_view()

    def action_filter(self) -> None:
        box = self._filter_box()
        box.add_class("shown")
        box.focus()

    def _filter_box(self) -> Input:
        return self.screen_stack[0].query_one("#filter", Input)

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "filter":
            self.timeline.set_filter(event.value)
            self.refresh_view()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "filter":
            if not event.value.strip():
                event.input.remove_class("shown")
            self.panes[self.active_tab].focus()

    def action_clear_filter(self) -> None:
        box = self._filter_box()
        if not box.has_class("shown") and not self.timeline.filter:
            raise SkipAction()
        with box.prevent(Input.Changed):
            box.value = ""
        box.remove_class("shown")
        self.timeline.set_filter("")
        self.panes[self.active_tab].focus()
        self.refresh_view()

    # ---- panes, help, diagram ---------------------------------------------------------------------
    def action_tab(self, tab: str) -> None:
        self._tabs.active = tab
        self.panes[tab].focus()

    def action_help(self) -> None:
        if len(self.screen_stack) == 1:
            self.push_screen(HelpScreen())

    def action_diagram(self) -> None:
        state = self.frame().state
        n = state.round if state is not None else None
        if n is None or n not in self.trace.rounds():
            self.notify("no scheduler round at the cursor yet: step to a round first", severity="warning")
            return
        self._write_diagram(n, self.rid)

    @work(thread=True, exclusive=True, group="diagram")
    def _write_diagram(self, n: int, rid: str | None) -> None:
        """On a thread: the exporter replays the trace, which takes a while on a long one."""
        try:
            path = write_round_diagram(self.trace, n, rid)
        except ImportError:
            self.call_from_thread(self.notify, "this tracer has no diagrams exporter (tracer.diagrams)",
                                  severity="error")
            return
        except (TraceError, OSError) as e:
            self.call_from_thread(self.notify, f"could not write the diagram: {e}", severity="error")
            return
        self.last_diagram = path
        self.call_from_thread(self.notify, f"round {n}'s diagram written to {path}", title="diagram")

    # ---- live mode --------------------------------------------------------------------------------
    def poll_trace(self) -> None:
        """Read what the server appended; the cursor stays on its event, or follows the end."""
        if self.tail is None:
            return
        cursor = self.timeline.cursor
        key = (self.trace.events[cursor].pid, self.trace.events[cursor].seq) if cursor >= 0 else None
        at_end = self.timeline.at_end()
        try:
            changed = self.tail.poll()
        except TraceError as e:
            if self._poll_timer is not None:
                self._poll_timer.stop()
            self.notify(f"stopped reading the trace: {e}", severity="error", timeout=30)
            return
        if changed is None:
            return
        self.index = TraceIndex(self.trace)
        self.states.forget_from(changed)
        self.timeline.rebase(self.index, key, follow_tail=at_end)
        if self.rid is None:
            self.rid = next(iter(self.index.requests), None)
        self.refresh_view()
        if self.active_tab != "requests":
            self.panes["requests"].show(self.frame())  # new requests get their row even out of view
