"""The replay benchmark's synthesized traces are traces the engine could have written: they pass
`trace check` (the benchmark checks every size it times, the largest included)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from tracer.check import check_trace
from tracer.reader import load_trace

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_replay.py"


def _bench():
    spec = importlib.util.spec_from_file_location("bench_replay", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_synthesized_trace_of_many_copies_passes_check(tmp_path):
    size = _bench().synthesize(tmp_path, 3_000)
    trace = load_trace(tmp_path)
    assert len(trace.events) == size >= 3_000
    assert len(trace.rids()) > 2 * 20  # many copies of the fixture's two requests, each with fresh rids
    assert check_trace(trace) == []
