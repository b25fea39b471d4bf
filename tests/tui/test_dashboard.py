"""The dashboard (key 0): four panes at once, the same content as the single panes, all in step."""

from __future__ import annotations

import re

import pytest
from rich.text import Text

from tracer.fmt import ranges, short_rid
from tracer.replay import replay
from tui.dashboard import Dashboard

pytestmark = pytest.mark.anyio

WIDE, SMALL = (140, 45), (80, 24)


def plain(cells) -> list[str]:
    return [c.plain if isinstance(c, Text) else str(c) for c in cells]


def table_rows(table) -> list[list[str]]:
    return [plain(table.get_row_at(i)) for i in range(table.row_count)]


def starred(kv: str) -> set[int]:
    return {int(s) for s in re.findall(r"(\d+)\*", kv)}


def dash_content(app) -> dict:
    """What the dashboard shows, in the terms a single pane can be compared in (the KV grid's line breaks
    follow its width, so: its header, its starred slots and its legend)."""
    d = app.query_one(Dashboard).panes
    kv = d["kv"].text.plain
    return {"round": (d["round"].title_text.plain, table_rows(app.query_one("#dash-round-rows"))),
            "kv": (kv.split("\n", 1)[0], starred(kv), kv.rsplit("\n\n", 1)[1]),
            "queues": d["queues"].text.plain, "radix": d["radix"].labels, "output": d["output"].text.plain}


async def single_content(app, pilot) -> dict:
    """The same, read from the single panes (each shown in turn), then back to the dashboard."""
    out = {}
    for key, tab in (("4", "round"), ("5", "kv"), ("6", "radix"), ("7", "queues"), ("8", "output")):
        await pilot.press(key)
        await pilot.pause()
        pane = app.panes[tab]
        if tab == "round":
            out[tab] = (pane.title_text.plain, table_rows(app.query_one("#round-rows")))
        elif tab == "kv":
            out[tab] = (pane.text.plain.split("\n", 1)[0], starred(pane.text.plain),
                        pane.text.plain.rsplit("\n\n", 1)[1])
        elif tab == "radix":
            out[tab] = pane.labels
        else:
            out[tab] = pane.text.plain
    await pilot.press("0")
    await pilot.pause()
    return out


async def test_the_dashboard_is_the_start_on_a_wide_terminal_only(engine_trace, open_app):
    async with open_app(engine_trace, size=WIDE) as (app, _):
        assert app.active_tab == "dash"
        assert app.focused is app.query_one("#dash-round-rows")
        assert app.panes["requests"].cursor_row == 0 and "req-b" in app.panes["requests"].rows_shown
    async with open_app(engine_trace, size=SMALL) as (app, pilot):
        assert app.active_tab == "requests" and app.focused is app.panes["requests"]
        await pilot.press("0")
        assert app.active_tab == "dash"
        await pilot.press("1")
        assert app.active_tab == "requests"


async def test_a_wide_start_on_a_request_still_selects_it(engine_trace, open_app):
    async with open_app(engine_trace, size=WIDE, rid="req-b") as (app, pilot):
        assert app.active_tab == "dash" and app.timeline.pinned == "req-b"
        assert "Request req-b" in app.query_one(Dashboard).panes["output"].text.plain
        await pilot.press("1")
        assert app.rid == "req-b" and app.panes["requests"].cursor_row == 1


async def test_at_every_round_end_the_four_panes_match_replay_and_the_single_panes(engine_trace, open_app):
    rounds = replay(engine_trace)
    async with open_app(engine_trace, size=WIDE) as (app, pilot):
        for state in rounds:
            await pilot.press("right_square_bracket")
            assert app.timeline.cursor == state.event_index and app.active_tab == "dash"
            shown = dash_content(app)

            title, rows = shown["round"]
            assert f"round {state.round} {state.batch.mode}" in title
            assert f"out_cache_loc {ranges(state.batch.out_cache_loc)}" in title
            assert [row[:3] + row[4:6] for row in rows] == [
                [short_rid(r.rid), str(r.position), str(r.input_id), str(r.slot), "cached" if r.cached else "new"]
                for r in state.batch.rows]
            assert f"{state.kv_size} slots, {state.free_slots} free" in shown["kv"][0]
            assert shown["kv"][1] == set(app.states.rows_of(app.rid).values()) | set(state.slots_of(app.rid))
            queues = shown["queues"]
            assert f"waiting_queue ({len(state.waiting)})  {', '.join(state.waiting) or 'empty'}" in queues
            assert f"running_batch ({len(state.running)})  {', '.join(state.running) or 'empty'}" in queues
            assert len(shown["radix"]) == len(state.tree)

            assert await single_content(app, pilot) == shown


async def test_stepping_moves_all_four(engine_trace, open_app):
    async with open_app(engine_trace, size=WIDE) as (app, pilot):
        before = dash_content(app)
        assert "before the first round: no batch formed yet" in before["round"][0] and before["radix"] == []
        await pilot.press("right_square_bracket")  # round 1: req-a's prompt is chunked
        one = dash_content(app)
        assert one["round"][0].startswith("round 1 EXTEND") and len(one["round"][1]) == 4
        assert one["kv"][0] == "KV pool at round 1: 10 slots, 6 free" and one["kv"][1] == {1, 2, 3, 4}
        assert "chunked_req   (1)  req-a" in one["queues"] and one["queues"] != before["queues"]
        assert one["radix"][1] == "[1] slots 1-4  lock=1  4 tok  10 11 12 13"
        await pilot.press("right_square_bracket")
        two = dash_content(app)
        for part in ("round", "kv", "queues", "radix"):
            assert two[part] != one[part], part
        await pilot.press("end")
        assert " one two three" in dash_content(app)["output"]
        assert dash_content(app)["output"] != two["output"]


async def test_follow_mode_moves_the_dashboard_with_the_followed_request(engine_trace, open_app):
    async with open_app(engine_trace, size=WIDE) as (app, pilot):
        await pilot.press("n", "f", "right_square_bracket", "right_square_bracket")
        assert app.timeline.pinned == "req-b"
        shown = dash_content(app)
        assert shown["output"].startswith("Request req-b")
        assert shown["kv"][1] == {1, 2, 3, 4, 7}  # its shared prefix and its own token
        assert "req-b" in shown["kv"][2]


async def test_sse_chunks_stream_into_the_dashboard(server_trace, open_app):
    chunks = [ev.index for ev in server_trace.events if ev.name == "http.sse_chunk"]
    async with open_app(server_trace, size=WIDE) as (app, pilot):
        output = app.query_one(Dashboard).panes["output"]
        assert "client text after 0 of 2 SSE chunk(s)" in output.text.plain
        await pilot.press(*["right"] * chunks[0])
        assert "client text after 1 of 2 SSE chunk(s):\nHello\n" in output.text.plain
        await pilot.press("end")
        assert "after 2 of 2 SSE chunk(s):\nHello world\n" in output.text.plain
