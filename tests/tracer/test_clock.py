"""The processes of one run share one clock anchor, so a reply never sorts before the message that caused it.

Real processes (spawned, as the server spawns its children) play ping-pong over a pipe; each side traces
its half. Before the anchor was shared, every process paired wall and monotonic time on its own, and the
few microseconds between the two reads could put a reply ahead of its message.
"""

from __future__ import annotations

import multiprocessing as mp
import os
from pathlib import Path

import pytest

from tracer.api import CLOCK_ENV, Tracer, clock_anchor
from tracer.reader import load_trace

ROUNDS = 300


def _ponger(trace_dir: str, conn) -> None:
    tracer = Tracer()
    tracer.configure(trace_dir, "ponger")
    for _ in range(ROUNDS):
        i = conn.recv()
        tracer.event("test.pong", rid=str(i))
        conn.send(i)
    tracer.close()


def test_spawned_processes_share_the_anchor_and_order_causally(tmp_path: Path, monkeypatch):
    monkeypatch.delenv(CLOCK_ENV, raising=False)
    tracer = Tracer()
    tracer.configure(tmp_path, "pinger")  # before the child starts, as the server's main process does
    ctx = mp.get_context("spawn")
    ours, theirs = ctx.Pipe()
    child = ctx.Process(target=_ponger, args=(str(tmp_path), theirs))
    child.start()
    try:
        for i in range(ROUNDS):
            tracer.event("test.ping", rid=str(i))
            ours.send(i)
            assert ours.recv() == i
            tracer.event("test.back", rid=str(i))
    finally:
        child.join(timeout=60)
        tracer.close()
    assert child.exitcode == 0

    trace = load_trace(tmp_path)
    starts = [e for e in trace.events if e.name == "trace.process_start"]
    assert len(starts) == 2 and len({e.pid for e in starts}) == 2
    assert len({(e.get("wall_ns"), e.get("mono_ns")) for e in starts}) == 1
    for i in range(ROUNDS):
        assert [e.name for e in trace.by_rid(str(i))] == ["test.ping", "test.pong", "test.back"], i


def test_anchor_is_reused_within_a_boot_and_renewed_after_one(monkeypatch):
    monkeypatch.delenv(CLOCK_ENV, raising=False)
    first = clock_anchor()
    assert clock_anchor() == first
    _, wall, mono = os.environ[CLOCK_ENV].split(":")
    assert (int(wall), int(mono)) == first
    monkeypatch.setenv(CLOCK_ENV, f"another-boot:{wall}:{mono}")
    renewed = clock_anchor()
    assert renewed != first and renewed[1] > first[1]


@pytest.mark.parametrize("junk", ["", "nonsense", "a:b:c", "::"])
def test_a_malformed_anchor_is_replaced(monkeypatch, junk):
    monkeypatch.setenv(CLOCK_ENV, junk)
    wall, mono = clock_anchor()
    assert wall > 0 and mono > 0
