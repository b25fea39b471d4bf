"""The scenario tests' names: every scenario runs once per test session on the real engine, through the
`scenario_runs` fixture of tests/conftest.py (shared with the schema, diagram and replay-app tests)."""

from __future__ import annotations

import pytest

from minisgl.scenarios import GRADING, NAMES, get

OFFLINE = [n for n in NAMES if get(n).server is None]
GRADING_OFFLINE = [n for n in GRADING if get(n).server is None]  # the labs' boundary scenarios
SERVED = [n for n in NAMES if get(n).server is not None]
# served scenarios whose client sends in a fixed order and never polls: the same normalized trace every run
# (pd_disaggregation: its random bootstrap rooms and free ports numbered in order, tracer/normalize.py)
SERVED_GOLDEN = ["data_parallel", "tensor_parallel", "pd_disaggregation"]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
