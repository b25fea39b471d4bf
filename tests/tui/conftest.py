"""Fixtures of the TUI tests: the tracer's fixture traces (no model is loaded), and the app on them."""

from __future__ import annotations

import html
import re
from collections import defaultdict

import pytest

from tests.tracer.helpers import ENGINE, SERVER
from tracer.reader import load_trace


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def engine_trace():
    """Two requests sharing a prefix, a chunked prompt, a retraction and an eviction (one process)."""
    return load_trace(ENGINE)


@pytest.fixture
def server_trace():
    """One served completion across three processes, with SSE chunks."""
    return load_trace(SERVER)


@pytest.fixture
def open_app():
    """`async with open_app(trace, size=(80, 24), **kwargs) as (app, pilot)`: the app, headless."""
    from contextlib import asynccontextmanager

    from tui.app import ReplayApp

    @asynccontextmanager
    async def run(trace, size=(80, 24), **kwargs):
        app = ReplayApp(trace, **kwargs)
        async with app.run_test(size=size) as pilot:
            await pilot.pause()
            yield app, pilot

    return run


def screen_text(app) -> str:
    """What the terminal shows, as lines of text (from the app's SVG screenshot)."""
    svg = app.export_screenshot()
    rows: dict[float, list[tuple[float, str]]] = defaultdict(list)
    for m in re.finditer(r'<text class="[^"]*" x="([\d.]+)" y="([\d.]+)"[^>]*>(.*?)</text>', svg):
        rows[float(m.group(2))].append((float(m.group(1)), html.unescape(m.group(3))))
    return "\n".join("".join(t for _, t in sorted(rows[y])).replace("\xa0", " ") for y in sorted(rows))
