"""The app on a trace the real engine wrote (a served chat completion, tests/diagrams/fixtures): every
round end matches replay(), prompt tokens show their text, and the output pane ends with the answer."""

from __future__ import annotations

from pathlib import Path

import pytest

from tracer.reader import load_trace
from tracer.replay import replay

from .test_app_panes import plain, show

CHAT = Path(__file__).resolve().parents[1] / "diagrams" / "fixtures" / "server_chat"
pytestmark = [pytest.mark.anyio,
              pytest.mark.skipif(not CHAT.is_dir(), reason="the real served-chat trace is not in this checkout")]


async def test_a_real_served_chat_replays(open_app):
    trace = load_trace(CHAT)
    (rid,) = trace.rids()
    chunks = [ev.get("delta") for ev in trace.events if ev.name == "http.sse_chunk"]
    answer = "".join(chunks)
    tokenized = next(ev for ev in trace.events if ev.name == "tm.tokenized")
    async with open_app(trace, size=(100, 40)) as (app, pilot):
        assert plain(app.panes["requests"].get_row(rid))[1] == "What is the capital o…"  # the user turn, not the chat template
        await show(pilot, "round")
        for state in replay(trace):
            await pilot.press("right_square_bracket")
            assert app.timeline.cursor == state.event_index
            table = app.query_one("#round-rows")
            assert table.row_count == len(state.batch.rows)
        await pilot.press("home", "right_square_bracket")  # the prefill: every prompt token, with its text
        table = app.query_one("#round-rows")
        texts = [plain(table.get_row_at(i))[3] for i in range(table.row_count)]
        assert texts == [repr(t) for t in tokenized.get("input_texts")]
        await show(pilot, "output")
        await pilot.press("end")
        assert f"client text after {len(chunks)} of {len(chunks)} SSE chunk(s)" in app.panes["output"].text.plain
        assert answer.strip() and answer in app.panes["output"].text.plain
        await show(pilot, "lanes")
        assert "▶ HTTP server + TokenizerManager  SSE chunk" in app.panes["lanes"].text.plain
