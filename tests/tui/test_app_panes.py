"""At every round end the panes show what tracer's replay() says the scheduler held then."""

from __future__ import annotations

import re

import pytest
from rich.text import Text

from tracer.fmt import ranges, short_rid
from tracer.replay import replay

pytestmark = pytest.mark.anyio


def plain(cells) -> list[str]:
    return [c.plain if isinstance(c, Text) else str(c) for c in cells]


async def show(pilot, tab: str) -> None:
    from tui.keys import TABS

    await pilot.press(str(TABS.index(tab) + 1))
    await pilot.pause()


async def test_round_kv_radix_queue_and_request_panes_follow_replay(engine_trace, open_app):
    rounds = replay(engine_trace)
    async with open_app(engine_trace, size=(100, 40)) as (app, pilot):
        for state in rounds:
            await pilot.press("right_square_bracket")
            assert app.timeline.cursor == state.event_index
            rid = app.rid  # req-a, the first request

            await show(pilot, "round")
            table = app.query_one("#round-rows")
            rows = [plain(table.get_row_at(i)) for i in range(table.row_count)]
            expected = [[short_rid(r.rid), str(r.position), str(r.input_id), str(r.slot),
                         "cached" if r.cached else "new"] for r in state.batch.rows]
            assert [row[:3] + row[4:6] for row in rows] == expected
            sampled = [row[6].split()[1] for row in rows if row[6]]
            assert sampled == [str(r.token) for r in state.batch.rows if r.sampled]
            title = app.panes["round"].title_text.plain
            assert f"round {state.round} {state.batch.mode}" in title
            assert f"out_cache_loc {ranges(state.batch.out_cache_loc)}" in title

            await show(pilot, "kv")
            kv = app.panes["kv"].text.plain
            assert f"{state.kv_size} slots, {state.free_slots} free" in kv
            for owner in set(state.slot_owner.values()) - {"(tree)", "(allocated)"}:
                assert f"{short_rid(owner)} {len(state.slots_of(owner))} " in kv
            starred = {int(s) for s in re.findall(r"(\d+)\*", kv)}
            assert starred == set(app.states.rows_of(rid).values()) | set(state.slots_of(rid))

            await show(pilot, "radix")
            labels = app.panes["radix"].labels
            assert len(labels) == len(state.tree)  # the root and every node
            for node in state.tree:
                if node["parent"] is not None:
                    assert any(f"[{node['id']}] " in lb and f"slots {ranges(node['value'])}  lock={node['lock_ref']}"
                               in lb for lb in labels), node

            await show(pilot, "queues")
            queues = app.panes["queues"].text.plain
            assert f"waiting_queue ({len(state.waiting)})  {', '.join(state.waiting) or 'empty'}" in queues
            assert f"running_batch ({len(state.running)})  {', '.join(state.running) or 'empty'}" in queues
            assert f"chunked_req   ({int(bool(state.chunked))})  {state.chunked or 'empty'}" in queues

            await show(pilot, "requests")
            table = app.panes["requests"]
            for r, req in state.reqs.items():
                row = plain(table.get_row(r))
                assert row[2:6] == [req.status, str(req.input_len), str(req.cached_tokens), str(req.output_len)]


async def test_known_moments_of_the_engine_scenario(engine_trace, open_app):
    async with open_app(engine_trace, size=(100, 40)) as (app, pilot):
        await pilot.press("right_square_bracket")  # round 1: req-a's prompt is chunked
        await show(pilot, "queues")
        assert "chunked_req   (1)  req-a" in app.panes["queues"].text.plain
        assert "waiting_queue (1)  req-b" in app.panes["queues"].text.plain
        await pilot.press(*["right_square_bracket"] * 3)  # round 4: req-a is retracted
        assert "waiting_queue (1)  req-a (retracted)" in app.panes["queues"].text.plain
        await show(pilot, "requests")
        assert plain(app.panes["requests"].get_row("req-a"))[2] == "retracted"
        assert plain(app.panes["requests"].get_row("req-b"))[2] == "finished"
        await pilot.press("right_square_bracket")  # round 5: req-b's slots 9-10 were evicted, 9 reused
        await show(pilot, "round")
        rows = app.query_one("#round-rows")
        last = plain(rows.get_row_at(rows.row_count - 1))
        assert last[:2] == ["req-a", "7"] and last[4:6] == ["9", "new"] and last[6] == "→ 42 ' three'"
        await show(pilot, "output")
        assert "detokenized text after 0 of 1" in app.panes["output"].text.plain
        await pilot.press("end")
        assert " one two three" in app.panes["output"].text.plain


async def test_selecting_a_request_moves_every_pane(engine_trace, open_app):
    async with open_app(engine_trace, size=(100, 40)) as (app, pilot):
        await pilot.press("right_square_bracket", "right_square_bracket", "n")
        assert app.rid == "req-b"
        assert app.query_one("LaneStrip").text.plain.startswith("req-b ")
        await show(pilot, "kv")
        starred = {int(s) for s in re.findall(r"(\d+)\*", app.panes["kv"].text.plain)}
        assert starred == {1, 2, 3, 4, 7}  # its shared prefix and its own token
        await show(pilot, "requests")
        await pilot.press("up")  # the table's cursor selects too
        assert app.rid == "req-a"
        await pilot.press("p")
        assert app.rid == "req-b"


async def test_a_served_request_streams_into_the_output_pane(server_trace, open_app):
    chunks = [ev.index for ev in server_trace.events if ev.name == "http.sse_chunk"]
    async with open_app(server_trace) as (app, pilot):
        await show(pilot, "output")
        assert "client text after 0 of 2 SSE chunk(s)" in app.panes["output"].text.plain
        await pilot.press(*["right"] * chunks[0])
        text = app.panes["output"].text.plain
        assert "client text after 1 of 2 SSE chunk(s):\nHello\n" in text and "prompt (3 tokens): hi there" in text
        await pilot.press("end")
        assert "after 2 of 2 SSE chunk(s):\nHello world\n" in app.panes["output"].text.plain
        await show(pilot, "lanes")
        lanes = app.panes["lanes"].text.plain
        # the response went out of the tokenizer manager as SSE chunks; the scheduler last sent token ids
        assert "▶ HTTP server + TokenizerManager  SSE chunk\n    latest: http.response_finished" in lanes
        assert "  Scheduler                       BatchTokenIDOutput" in lanes
        await show(pilot, "event")
        assert "http.response_finished" in app.panes["event"].text.plain


async def test_event_inspector_spells_tokens(engine_trace, open_app):
    sampled = next(ev.index for ev in engine_trace.events if ev.name == "sched.sampled" and ev.round == 2)
    async with open_app(engine_trace) as (app, pilot):
        await show(pilot, "event")
        await pilot.press(*["right"] * sampled)
        text = app.panes["event"].text.plain
        assert "sched.sampled" in text and "token_ids: [40 ' one', 50 ' x']" in text
        assert "rid req-a" in text and "rid req-b" in text and "round 2" in text
