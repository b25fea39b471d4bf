"""Traces written by the real offline Engine: they pass every check, and replay rebuilds exactly the
state the live scheduler had at the end of every round — under fcfs at every trace level (prefix hits,
chunked prefill, a retraction, an eviction), with MIXED rounds, and with lpm reordering the queue."""

from __future__ import annotations

import json

import pytest

from tests.tracer.live import Arrival, assert_replay_is_live, drive
from tracer.check import check_trace
from tracer.reader import load_trace

pytestmark = pytest.mark.slow

PARAMS = {"max_new_tokens": 3, "ignore_eos": True, "temperature": 0.0}
# 10 KV slots and 4-token chunks force a chunk, a retraction and an eviction
TIGHT = {"max_total_tokens": 10, "chunked_prefill_size": 4, "max_running_requests": 4}
TIGHT_ARRIVALS = [
    Arrival(0, [("req-a", [10, 11, 12, 13, 14, 15], PARAMS), ("req-b", [10, 11, 12, 13, 20], PARAMS)])
]


@pytest.fixture(scope="module")
def run(base_engine, tmp_path_factory):
    """The two-request workload traced at level 2, then a streamed request the caller abandons."""
    folder = tmp_path_factory.mktemp("real-trace")
    engine = base_engine.fork(trace_dir=str(folder), **TIGHT)
    try:
        live = drive(engine, TIGHT_ARRIVALS)
        stream = engine.generate(input_ids=[30, 31, 32], stream=True, rid="req-s",
                                 sampling_params={"max_new_tokens": 6, "ignore_eos": True})
        chunks = [next(stream), next(stream)]
        stream.close()  # the caller walks away: the engine aborts req-s and lets the scheduler release it
    finally:
        engine.shutdown()
    return folder, live, chunks


def test_real_trace_passes_check(run):
    folder, live, chunks = run
    trace = load_trace(folder)
    assert check_trace(trace) == []
    assert [p.proc for p in trace.processes()] == ["engine"]
    assert set(trace.rids()) == {"req-a", "req-b", "req-s"}
    finished = {ev.rid: ev.get("finish_reason")["type"] for ev in trace.events if ev.name == "sched.finished"}
    assert finished == {"req-a": "length", "req-b": "length", "req-s": "abort"}
    # what the caller got is what the trace says was sampled
    sampled = {rid: [ev.get("token_id") for ev in trace.by_rid(rid) if ev.name == "sched.output_appended"]
               for rid in live.results}
    assert sampled == {rid: r["output_ids"] for rid, r in live.results.items()}
    assert len(chunks) == 2


def test_replay_equals_the_live_scheduler_every_round(run):
    folder, live, _ = run
    trace = load_trace(folder)
    assert len(live.live) == 5
    assert_replay_is_live(_up_to_round(trace, len(live.live)), live)
    names = [ev.name for ev in trace.events]
    assert "sched.retracted" in names and "cache.evicted" in names  # the workload did what it is for
    assert any(s["chunked"] for s in live.live)


@pytest.mark.parametrize("level", [1, 3])
def test_replay_equals_the_live_scheduler_at_levels_1_and_3(base_engine, tmp_path, level):
    engine = base_engine.fork(trace_dir=str(tmp_path), trace_level=level, **TIGHT)
    try:
        live = drive(engine, TIGHT_ARRIVALS)
    finally:
        engine.shutdown()
    trace = load_trace(tmp_path)
    assert trace.level == level and check_trace(trace) == []
    assert_replay_is_live(trace, live)
    names = {ev.name for ev in trace.events}
    assert ("sched.output_appended" in names) == (level >= 2)
    forward = next(ev for ev in trace.events if ev.name == "model.forward" and ev.ph == "B")
    assert ("positions" in forward.attrs) == (level == 3)


def test_replay_equals_the_live_scheduler_with_mixed_rounds(base_engine, tmp_path):
    """req-b arrives while req-a decodes: its chunks ride in MIXED batches with req-a's decode row."""
    engine = base_engine.fork(trace_dir=str(tmp_path), max_total_tokens=64, chunked_prefill_size=4,
                              enable_mixed_chunk=True)
    params = {**PARAMS, "max_new_tokens": 6}
    try:
        live = drive(engine, [Arrival(0, [("req-a", [10, 11, 12, 13, 14, 15], params)]),
                              Arrival(2, [("req-b", [20, 21, 22, 23, 24, 25, 26], params)])])
    finally:
        engine.shutdown()
    trace = load_trace(tmp_path)
    assert check_trace(trace) == []
    modes = [ev.get("forward_mode") for ev in trace.events if ev.name == "sched.batch_formed"]
    assert modes.count("MIXED") == 2, modes
    assert_replay_is_live(trace, live)


def test_replay_equals_the_live_scheduler_under_lpm(base_engine, tmp_path):
    """With req-p's prompt cached, lpm puts req-y (which shares it) ahead of req-x, which came first."""
    engine = base_engine.fork(trace_dir=str(tmp_path), max_total_tokens=64, schedule_policy="lpm",
                              max_running_requests=1)
    shared = [10, 11, 12, 13, 14, 15, 16, 17]
    try:
        live = drive(engine, [Arrival(0, [("req-p", shared, PARAMS)]),
                              Arrival(99, [("req-x", [40, 41, 42, 43], PARAMS),
                                           ("req-y", [*shared, 50], PARAMS)])])
    finally:
        engine.shutdown()
    trace = load_trace(tmp_path)
    assert check_trace(trace) == []
    sorted_queues = [ev.get("waiting") for ev in trace.events if ev.name == "sched.queue_sorted"]
    assert ["req-y", "req-x"] in sorted_queues
    admitted = [ev.rid for ev in trace.events
                if ev.name == "sched.admission" and ev.get("decision") == "admitted"]
    assert admitted == ["req-p", "req-y", "req-x"]
    assert_replay_is_live(trace, live)


def _up_to_round(trace, n: int):
    """The trace cut after round n's sched.round_end (the streamed request that follows is not compared)."""
    end = next(ev.index for ev in trace.events if ev.name == "sched.round_end" and ev.round == n)
    trace.events[:] = trace.events[: end + 1]
    trace.cache.clear()
    return trace


# ---- trace check on a real trace, broken one fact at a time ------------------------------------------
def _first_round_end_with(attr: str):
    """(file name, line number, record) of the first sched.round_end whose `attr` is set (not null, not 0)."""
    return lambda folder: _line_of(folder, lambda r: r["name"] == "sched.round_end" and r["attrs"][attr])


def _line_of(folder, pred) -> tuple[str, int, dict]:
    (path,) = folder.glob("*.jsonl")
    for n, line in enumerate(path.read_text().splitlines(), start=1):
        record = json.loads(line)
        if pred(record):
            return path.name, n, record
    raise LookupError("no such record")


def _set(target: dict, attr: str, value):
    """An edit of the `broken` fixture: the record equal to `target` gets attrs[attr] = value."""
    def edit(files):
        (records,) = files.values()
        records[records.index(target)]["attrs"][attr] = value
    return edit


@pytest.mark.parametrize("value", [None, "req-b"], ids=["null", "another request"])
def test_check_reports_a_chunked_request_that_replay_contradicts(run, broken, value):
    """A null is a claim too ("nothing is chunked"): it used to be skipped."""
    folder, _, _ = run
    name, line, rec = _first_round_end_with("chunked")(folder)
    failures = check_trace(load_trace(broken(folder, _set(rec, "chunked", value))))
    assert failures == [f"round {rec['round']}: chunked: replay says {rec['attrs']['chunked']!r}, "
                        f"sched.round_end says {value!r} ({name}:{line})"]


def test_check_reports_cached_slots_that_replay_contradicts(run, broken):
    folder, _, _ = run
    name, line, rec = _first_round_end_with("cached_slots")(folder)
    cached = rec["attrs"]["cached_slots"]
    failures = check_trace(load_trace(broken(folder, _set(rec, "cached_slots", cached + 1))))
    assert failures == [f"round {rec['round']}: cached_slots: replay says {cached}, sched.round_end says "
                        f"{cached + 1} ({name}:{line})"]


def test_check_reports_a_deleted_event_as_a_gap_in_seq(run, broken):
    """One kv.assigned line deleted: nothing else the trace says contradicts it, but its seq is gone."""
    folder, _, _ = run
    name, line, rec = _line_of(folder, lambda r: r["name"] == "kv.assigned")
    _, _, after = _line_of(folder, lambda r: r["seq"] == rec["seq"] + 1)

    def delete(files):
        (records,) = files.values()
        records.remove(rec)

    failures = check_trace(load_trace(broken(folder, delete)))
    assert failures == [f"seq: {name}:{line}: {after['name']} has seq {rec['seq'] + 1}: "
                        "1 event(s) missing before it"]
