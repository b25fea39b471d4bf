"""Fixtures of the TUI tests: the tracer's fixture traces (no model is loaded), and the app on them."""

from __future__ import annotations

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
