"""Follow mode, the filter, the help screen, the diagram key and live mode, in the headless app."""

from __future__ import annotations

import shutil
import time

import pytest

from tests.tracer.helpers import ENGINE, SERVER
from tracer.reader import TraceTail, load_trace
from tui.help import HelpScreen
from tui.keys import KEYS

from .conftest import screen_text

pytestmark = pytest.mark.anyio


async def test_follow_mode_visits_only_the_pinned_request(engine_trace, open_app):
    async with open_app(engine_trace) as (app, pilot):
        await pilot.press("n", "f")  # select req-b, follow it
        assert app.timeline.pinned == "req-b"
        assert "following req-b" in app.query_one("Scrubber").text.plain
        await pilot.press("home")
        seen = [app.timeline.cursor]
        for _ in range(len(engine_trace.events)):
            await pilot.press("right")
            seen.append(app.timeline.cursor)
        visited = sorted(set(seen))
        assert visited == [ev.index for ev in engine_trace.by_rid("req-b")]
        await pilot.press("home")
        rounds = []
        for _ in range(6):
            await pilot.press("right_square_bracket")
            rounds.append(engine_trace.events[app.timeline.cursor].round)
        assert rounds == [1, 2, 3, 4, 4, 4]  # req-b finished in round 4: round 5 is skipped
        await pilot.press("f")
        assert app.timeline.pinned is None
        await pilot.press("right_square_bracket")
        assert engine_trace.events[app.timeline.cursor].round == 5


async def test_starting_on_a_request_follows_it(engine_trace, open_app):
    async with open_app(engine_trace, rid="req-b") as (app, _):
        assert app.rid == "req-b" and app.timeline.pinned == "req-b"
        assert engine_trace.events[app.timeline.cursor].rid == "req-b"  # its first event: tm.tokenized
        assert app.panes["requests"].cursor_row == 1


async def test_filter_by_name_and_rid_then_clear(engine_trace, open_app):
    async with open_app(engine_trace) as (app, pilot):
        await pilot.press("slash")
        assert app.focused.id == "filter"
        # typed letters go to the box: l, h, g, d, p, f, n must not move, pin or write anything
        await pilot.press(*"sched.sampled")
        assert app.timeline.filter == "sched.sampled" and app.timeline.pinned is None and app.rid == "req-a"
        await pilot.press("enter")
        assert app.focused is app.panes["requests"]
        seen = {app.timeline.cursor}
        for _ in range(6):
            await pilot.press("right")
            seen.add(app.timeline.cursor)
        assert [engine_trace.events[i].name for i in sorted(seen)] == ["sched.sampled"] * 5
        assert "/sched.sampled: 5 events" in app.query_one("Scrubber").text.plain
        await pilot.press("slash", "end", *" req-b", "enter")  # every word must match: name and rid
        assert app.timeline.filter == "sched.sampled req-b"
        assert len(app.timeline.visible()) == 3
        await pilot.press("escape")
        assert app.timeline.filter == "" and len(app.timeline.visible()) == len(engine_trace.events)
        assert not app.query_one("#filter").has_class("shown")


async def test_help_lists_every_key(engine_trace, open_app):
    async with open_app(engine_trace, size=(120, 50)) as (app, pilot):
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        shown = screen_text(app)
        for key in KEYS:
            assert key.description in shown and key.label in shown
        await pilot.press("right")  # the help screen is on top: the scrubber does not move
        assert app.timeline.cursor == 0
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)


async def test_diagram_key_writes_the_current_round(tmp_path, open_app):
    folder = tmp_path / "trace"
    shutil.copytree(ENGINE, folder)
    async with open_app(load_trace(folder)) as (app, pilot):
        await pilot.press("d")  # no round yet at the first event
        await app.workers.wait_for_complete()
        assert not (folder / "diagrams").exists()
        await pilot.press("right_square_bracket", "right_square_bracket", "d")
        await app.workers.wait_for_complete()
        await pilot.pause()
        path = folder / "diagrams" / "round-2.dot"
        assert app.last_diagram == path
        text = path.read_text()
        assert text.startswith(("digraph", "strict digraph")) and "req-b" in text


async def until(pilot, condition, seconds: float = 60.0) -> None:
    """Let the app run (its live tail polls every 0.05 s) until condition() holds; fail after `seconds`."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "the live tail never caught up"
        await pilot.pause(0.05)


async def test_live_mode_picks_up_appended_events(tmp_path, open_app):
    (src,) = ENGINE.glob("*.jsonl")
    lines = src.read_text().splitlines(keepends=True)
    path = tmp_path / src.name
    path.write_text("".join(lines[:12]))  # both requests arrived, no round yet
    tail = TraceTail(tmp_path)
    tail.poll()
    async with open_app(tail.trace, tail=tail, poll_seconds=0.05) as (app, pilot):
        assert app.timeline.size == 12
        assert "LIVE" in app.query_one("Scrubber").text.plain
        await pilot.press("end")
        with path.open("a") as f:
            f.write("".join(lines[12:40]))
        await until(pilot, lambda: app.timeline.size == 40)
        assert app.timeline.cursor == 39  # at the end: it follows the end
        await pilot.press("home", *["right"] * 10)
        with path.open("a") as f:
            f.write("".join(lines[40:]) + '{"v":1,"seq":89')  # and a half-written line
        await until(pilot, lambda: app.timeline.size == len(lines))
        assert app.timeline.cursor == 10  # elsewhere: it stays
        assert app.panes["requests"].rows_shown["req-a"][2] == "waiting"  # as replayed at event 10
        await pilot.press("end")
        assert app.panes["requests"].rows_shown["req-a"][2] == "finished"


async def test_live_mode_starts_on_an_empty_folder(tmp_path, open_app):
    tail = TraceTail(tmp_path)
    tail.poll()
    async with open_app(tail.trace, tail=tail, poll_seconds=0.05) as (app, pilot):
        assert "waiting for events" in app.query_one("Scrubber").text.plain
        assert app.rid is None
        for p in sorted(SERVER.glob("*.jsonl")):
            shutil.copy(p, tmp_path / p.name)
        await until(pilot, lambda: app.timeline.size == len(load_trace(SERVER).events))
        assert app.rid == "s1"
        assert "s1" in app.panes["requests"].rows_shown


async def test_live_mode_keeps_the_cursor_on_its_event_when_earlier_lines_arrive(tmp_path, open_app):
    files = {p.name: p.read_text() for p in SERVER.glob("*.jsonl")}
    (tmp_path / "scheduler-200.jsonl").write_text(files["scheduler-200.jsonl"])
    tail = TraceTail(tmp_path)
    tail.poll()
    async with open_app(tail.trace, tail=tail, poll_seconds=0.05) as (app, pilot):
        await pilot.press(*["right"] * 8)
        event = app.trace.events[app.timeline.cursor]
        assert event.name == "sched.batch_formed"
        for name in ("tokenizer_manager-100.jsonl", "detokenizer-300.jsonl"):
            (tmp_path / name).write_text(files[name])
        await until(pilot, lambda: app.timeline.size == len(load_trace(SERVER).events))
        assert app.trace.events[app.timeline.cursor] is event  # same event, now further down the timeline
        assert app.timeline.cursor > 8
        assert "sched.batch_formed" in app.query_one("Scrubber").text.plain
