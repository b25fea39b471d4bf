"""A real trace whose PrefillAdder refuses on each budget in turn: the `admission_budgets` scenario (rows in
round 1, chunk in round 2, running requests in round 3, KV room in round 10), run on the session's shared
engine the first time a test module asks for it, and shared by the diagram and replay-app tests after that."""

from __future__ import annotations

from pathlib import Path

_RUNS: dict[str, Path] = {}


def admission_budgets_trace(base_engine, tmp_path_factory) -> Path:
    """The folder of the scenario's level-3 trace (written once per test session)."""
    if "folder" not in _RUNS:
        from minisgl.scenarios import get
        from minisgl.scenarios.driver import run

        folder = tmp_path_factory.mktemp("admission_budgets")
        run(get("admission_budgets"), str(folder), loaded=base_engine)
        _RUNS["folder"] = folder
    return _RUNS["folder"]
