"""The admission pane (key 9) on a real engine trace (the `admission_budgets` scenario): as the cursor moves
round by round it shows that round's starting budgets, each candidate and the refusals, the refusing budget's
cell in reverse video; mid-round, only the candidates looked at so far."""

from __future__ import annotations

import html
import re

import pytest

from tracer.reader import load_trace

from .conftest import screen_text

pytestmark = [pytest.mark.anyio, pytest.mark.slow]
SIZE = (140, 45)
ROUND = "right_square_bracket"


@pytest.fixture(scope="module")
def trace(scenario_runs):
    """The session's run of the `admission_budgets` scenario, read afresh for this module."""
    return load_trace(scenario_runs("admission_budgets").folder)


def cell_backgrounds(app, line_start: str) -> dict[str, str]:
    """The screen line that starts with `line_start`: each text run (stripped) -> its background colour."""
    svg = app.export_screenshot()
    rects = [(float(x), float(y), float(h), fill) for fill, x, y, h in
             re.findall(r'<rect fill="(#[0-9a-f]+)" x="([\d.]+)" y="([\d.]+)" width="[\d.]+" height="([\d.]+)"', svg)]
    lines: dict[float, list[tuple[float, str]]] = {}
    for x, y, text in re.findall(r'<text class="[^"]*" x="([\d.]+)" y="([\d.]+)"[^>]*>(.*?)</text>', svg):
        lines.setdefault(float(y), []).append((float(x), html.unescape(text).replace("\xa0", " ")))
    for y, runs in sorted(lines.items()):
        runs.sort()
        if "".join(t for _, t in runs).startswith(line_start):
            return {t.strip(): next(f for rx, ry, rh, f in rects if rx == x and ry < y <= ry + rh)
                    for x, t in runs if t.strip()}
    raise AssertionError(f"no line starts with {line_start!r}")


ROUNDS = {  # round -> what the pane shows at its end
    1: ["round 1 · PrefillAdder", "rem_input_tokens (input)   max_prefill_tokens 10 − mixed_decode_rows 0 = 10",
        "1 A: admitted [0, 6)", "2 B: refused by max_prefill_tokens: extend 8 > rem_input_tokens 4"],
    2: ["running:                   A · reserved_tokens = 5 × new_token_ratio 0.7 = 3.5",
        "2 C: refused by chunked_prefill_size: rem_chunk_tokens 0 left"],
    3: ["2 D: refused by max_running_requests: rem_running 0 left", "never considered: E (the round stopped at D)"],
    4: ["round 4: no PrefillAdder ran", "max_running_requests: 3 running of max_running_requests 3; waiting D, E"],
    10: ["1 E: refused by kv_cache: need 47 (extend 3 + future 44) > 43.305"],
    11: ["1 E: admitted [0, 3)"],
}


async def test_the_pane_follows_the_cursor_round_by_round(trace, open_app):
    async with open_app(trace, size=SIZE) as (app, pilot):
        await pilot.press("9")
        for n in range(1, 12):
            await pilot.press(ROUND)
            screen = screen_text(app)
            assert f"round {n}" in screen
            for line in ROUNDS.get(n, []):
                assert line in screen, (n, line)


@pytest.mark.parametrize("n,line_start,budget,others", [
    (1, "2B", "4", ["36", "2", "42"]),
    (2, "2C", "0", ["24.5", "2", "34", "1"]),
    (3, "2D", "0", ["21", "8", "6", "32"]),
    (10, "1E", "43.305", ["10", "8", "44", "2"]),
])
async def test_the_refusing_budget_is_in_reverse_video(trace, open_app, n, line_start, budget, others):
    async with open_app(trace, size=SIZE) as (app, pilot):
        await pilot.press("9", *[ROUND] * n)
        fills = cell_backgrounds(app, line_start)
        assert all(fills[o] != fills[budget] for o in others), fills
        assert len({fills[o] for o in others}) == 1  # the row's other budgets look alike


async def test_mid_round_only_the_candidates_seen_so_far(trace, open_app):
    first = next(ev for ev in trace.events if ev.name == "sched.admission")
    assert (first.round, first.rid) == (1, "A")
    async with open_app(trace, size=SIZE) as (app, pilot):
        await pilot.press("9", "home")
        while app.timeline.cursor < first.index:
            await pilot.press("right")
        screen = screen_text(app)
        assert "1 A: admitted [0, 6)" in screen
        assert "2 B:" not in screen
        assert "1 more candidate(s) later in this round: ] shows the whole round" in screen


async def test_a_version_1_trace_says_it_has_no_budgets(engine_trace, open_app):
    async with open_app(engine_trace, size=SIZE) as (app, pilot):
        await pilot.press("9", ROUND)
        assert "this trace predates the admission budgets (schema 2)" in screen_text(app)


async def test_help_lists_the_pane(engine_trace, open_app):
    async with open_app(engine_trace, size=SIZE) as (app, pilot):
        await pilot.press("question_mark")
        assert "9 Admit" in screen_text(app)
