"""Every scenario, run once per test session on the real engine (the offline ones on the session's shared
weights, the server ones on a real `minisgl serve`), with its trace and its outcome."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from minisgl.scenarios import NAMES, get
from minisgl.scenarios.base import Scenario
from minisgl.scenarios.driver import Outcome, run
from tracer.reader import Trace, load_trace


@dataclass
class Ran:
    scenario: Scenario
    folder: str
    outcome: Outcome
    trace: Trace


@pytest.fixture(scope="session")
def scenario_runs(base_engine, tmp_path_factory):
    """ran(name) runs a scenario the first time it is asked for, then hands back the same run."""
    runs: dict[str, Ran] = {}

    def ran(name: str) -> Ran:
        if name not in runs:
            sc = get(name)
            folder = str(tmp_path_factory.mktemp(f"scenario-{name}"))
            outcome = run(sc, folder, loaded=base_engine)
            runs[name] = Ran(sc, folder, outcome, load_trace(folder))
        return runs[name]

    return ran


OFFLINE = [n for n in NAMES if get(n).server is None]
SERVED = [n for n in NAMES if get(n).server is not None]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
