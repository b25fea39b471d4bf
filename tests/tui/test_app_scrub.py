"""Keys and on-screen controls move the scrubber (headless app on the engine fixture)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.anyio


async def until(pilot, condition, timeout: float = 30.0) -> None:
    """Wait for the app's timers to make condition() true: no fixed sleep, so a busy machine only waits
    longer (the timeout is for a player that never gets there)."""
    import time

    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "the player did not get there in time"
        await pilot.pause(0.05)


async def test_keys_step_events_rounds_and_ends(engine_trace, open_app):
    ends = [ev.index for ev in engine_trace.events if ev.name == "sched.round_end"]
    last = len(engine_trace.events) - 1
    async with open_app(engine_trace) as (app, pilot):
        t = app.timeline
        assert t.cursor == 0
        await pilot.press("right")
        assert t.cursor == 1
        await pilot.press("l", "l", "left")
        assert t.cursor == 2
        await pilot.press("h", "h", "h")
        assert t.cursor == 0
        await pilot.press("right_square_bracket")
        assert t.cursor == ends[0]
        status = app.query_one("Scrubber").text.plain
        assert f"#{ends[0]} of {last + 1} round 1" in status and "sched.round_end" in status
        await pilot.press("right_square_bracket", "right_square_bracket", "left_square_bracket")
        assert t.cursor == ends[1]
        await pilot.press("end")
        assert t.cursor == last
        await pilot.press("home")
        assert t.cursor == 0
        await pilot.press("G")
        assert t.cursor == last
        await pilot.press("g")
        assert t.cursor == 0


async def test_arrows_scrub_even_when_a_table_has_the_focus(engine_trace, open_app):
    async with open_app(engine_trace) as (app, pilot):
        assert app.focused is app.panes["requests"]
        await pilot.press("right", "right")
        assert app.timeline.cursor == 2
        await pilot.press("4")  # the round pane's table takes the focus
        assert app.query_one("TabbedContent").active == "round"
        await pilot.press("right_square_bracket", "left")
        assert app.timeline.cursor == app.index.round_ends[0] - 1


async def test_play_pause_and_speed(engine_trace, open_app):
    async with open_app(engine_trace) as (app, pilot):
        t = app.timeline
        await pilot.press("minus", "minus", "minus")  # as slow as it goes: one event a second
        assert t.speed == 1
        await pilot.press("space")
        assert t.playing and "1/s ▶" in app.query_one("Scrubber").text.plain
        await until(pilot, lambda: t.cursor >= 1)  # a second or so; longer on a loaded machine
        await pilot.press("space")
        assert not t.playing
        stopped = t.cursor
        assert stopped >= 1
        await pilot.pause(1.2)
        assert t.cursor == stopped  # paused: it stays
        await pilot.press(*["plus"] * 6)
        assert t.speed == 100
        await pilot.press("space")
        await until(pilot, lambda: not t.playing)  # 89 events at 100 a second: it plays to the end, stops
        assert t.cursor == len(engine_trace.events) - 1
        assert "paused" in app.query_one("Scrubber").text.plain


async def test_on_screen_controls_run_the_same_actions(engine_trace, open_app):
    async with open_app(engine_trace) as (app, pilot):
        t = app.timeline
        await pilot.click("#ctl-step")
        await pilot.click("#ctl-step")
        assert t.cursor == 2
        await pilot.click("#ctl-back")
        assert t.cursor == 1
        await pilot.click("#ctl-round")
        assert t.cursor == app.index.round_ends[0]
        await pilot.click("#ctl-end")
        assert t.cursor == len(engine_trace.events) - 1
        await pilot.click("#ctl-round-back")
        assert t.cursor == app.index.round_ends[-1]
        await pilot.click("#ctl-start")
        assert t.cursor == 0
        await pilot.click("#ctl-faster")
        assert t.speed == 10
        await pilot.click("#ctl-play")
        assert t.playing
        await pilot.click("#ctl-play")
        assert not t.playing
