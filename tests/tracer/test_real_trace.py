"""Traces written by the real offline Engine: they pass every check, and replay rebuilds exactly the
state the live scheduler had at the end of every round (prefix hits, chunked prefill, a retraction,
an eviction, then a streamed request that the caller abandons, so it is aborted)."""

from __future__ import annotations

import pytest

from tracer.check import check_trace
from tracer.reader import load_trace
from tracer.replay import replay
from tracer.tree import nested

pytestmark = pytest.mark.slow

PROMPTS = {"req-a": [10, 11, 12, 13, 14, 15], "req-b": [10, 11, 12, 13, 20]}
PARAMS = {"max_new_tokens": 3, "ignore_eos": True, "temperature": 0.0}


def live_state(scheduler) -> dict:
    return {
        "waiting": [r.rid for r in scheduler.waiting_queue],
        "running": [r.rid for r in scheduler.running_batch.reqs],
        "chunked": scheduler.chunked_req.rid if scheduler.chunked_req is not None else None,
        "free": scheduler.token_to_kv_pool.available_size(),
        "tree": scheduler.tree_cache.snapshot(),
    }


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """The engine's trace folder and the live state after each round of the two-request workload."""
    from minisgl.entrypoints.engine import Engine

    folder = tmp_path_factory.mktemp("real-trace")
    base = Engine(dtype="float32", max_total_tokens=64)
    # the fixture's scenario: 10 KV slots and 4-token chunks force a chunk, a retraction and an eviction
    engine = base.fork(trace_dir=str(folder), max_total_tokens=10, chunked_prefill_size=4,
                       max_running_requests=4)
    try:
        for rid, ids in PROMPTS.items():
            engine._submit(rid, None, ids, PARAMS, stream=False)
        live = []
        while any(not engine._states[rid]["done"] for rid in PROMPTS):
            before = engine.scheduler.forward_ct
            engine._step()  # one scheduler round, then the detokenizer, as generate() does
            if engine.scheduler.forward_ct > before:
                live.append(live_state(engine.scheduler))
        results = [engine._finish_result(rid) for rid in PROMPTS]
        stream = engine.generate(input_ids=[30, 31, 32], stream=True, rid="req-s",
                                 sampling_params={"max_new_tokens": 6, "ignore_eos": True})
        chunks = [next(stream), next(stream)]
        stream.close()  # the caller walks away: the engine aborts req-s and lets the scheduler release it
    finally:
        engine.shutdown()
    return folder, live, results, chunks


def test_real_trace_passes_check(run):
    folder, _, results, chunks = run
    trace = load_trace(folder)
    assert check_trace(trace) == []
    assert [p.proc for p in trace.processes()] == ["engine"]
    assert set(trace.rids()) == {"req-a", "req-b", "req-s"}
    finished = {ev.rid: ev.get("finish_reason")["type"] for ev in trace.events if ev.name == "sched.finished"}
    assert finished == {"req-a": "length", "req-b": "length", "req-s": "abort"}
    # what the caller got is what the trace says was sampled
    sampled = {rid: [ev.get("token_id") for ev in trace.by_rid(rid) if ev.name == "sched.output_appended"]
               for rid in PROMPTS}
    assert sampled == {r["rid"]: r["output_ids"] for r in results}
    assert len(chunks) == 2


def test_replay_equals_the_live_scheduler_every_round(run):
    folder, live, _, _ = run
    states = replay(load_trace(folder))[: len(live)]
    assert len(states) == len(live) == 5
    for n, (state, want) in enumerate(zip(states, live), start=1):
        got = {"waiting": state.waiting, "running": state.running, "chunked": state.chunked,
               "free": state.free_slots, "tree": nested(state.tree)}
        assert got == want, f"round {n}"
    names = [ev.name for ev in load_trace(folder).events]
    assert "sched.retracted" in names and "cache.evicted" in names  # the workload did what it is for
