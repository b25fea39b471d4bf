"""The overlap scheduler (--enable-overlap-schedule) against the normal loop, on one workload driven round by
round: the same greedy tokens and finish reasons, no KV slot leaked, and a trace that checks, replays,
opens in the replay app and shows the forward of round N beside the forming of round N+1 in Perfetto."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from minisgl.server.protocol import GenerateReqInput
from tracer.check import check_trace
from tracer.export_perfetto import THREAD_TRACKS, perfetto_events
from tracer.reader import load_trace
from tracer.replay import replay

from .conftest import WORKLOAD, assert_no_leak, chat
from .test_equivalence import RETRACT_PARAMS, RETRACT_PROMPTS

ROOT = Path(__file__).resolve().parents[2]
LONG = "Here is a list of the planets of the solar system, from the closest to the Sun: " * 3
FLAGS = dict(chunked_prefill_size=16)  # the long prompt runs in chunks
# (rid, prompt, sampling params, the step it is submitted at)
REQUESTS = [
    ("eos-a", chat("Is the sky blue? Answer yes or no."), {"max_new_tokens": 48}, 0),
    ("eos-b", chat(WORKLOAD[0]), {"max_new_tokens": 48}, 0),
    ("len-1", chat(WORKLOAD[1]), {"max_new_tokens": 1}, 0),
    ("len-7", chat(WORKLOAD[2]), {"max_new_tokens": 7}, 0),
    ("long", LONG, {"max_new_tokens": 12}, 1),
    ("stop", chat(WORKLOAD[3]), {"max_new_tokens": 40, "stop": ["."]}, 1),
    ("abort", "Once upon a time", {"max_new_tokens": 40, "ignore_eos": True}, 0),
    ("hit", chat(WORKLOAD[0]), {"max_new_tokens": 10}, 4),  # eos-b's prompt, cached by then
]
ABORT_AT = 6  # the step before which "abort" is aborted


def drive(engine) -> dict[str, dict]:
    """Submit each request at its step, abort one, and step until everything finished and the scheduler
    has processed every launched round; the results by rid."""
    states, step = {}, 0
    while len(states) < len(REQUESTS) or not all(s.finished for s in states.values()) \
            or engine.scheduler.result_queue:
        for rid, prompt, params, at in REQUESTS:
            if at == step:
                kind = "text" if isinstance(prompt, str) else "messages"
                obj = GenerateReqInput(rid=rid, sampling_params={**params, "temperature": 0}, **{kind: prompt})
                states[rid] = engine.submit(obj)
        if step == ABORT_AT:
            engine.abort("abort")
        engine.step()
        step += 1
        assert step < 400, "the workload did not finish"
    engine.step()  # an idle round: the scheduler's own leak check runs
    return {rid: engine.result(state) for rid, state in states.items()}


@pytest.fixture(scope="module")
def normal(base_engine):
    engine = base_engine.fork(**FLAGS)
    results = drive(engine)
    assert_no_leak(engine)
    return results


@pytest.fixture(scope="module")
def overlap(base_engine, tmp_path_factory):
    folder = tmp_path_factory.mktemp("overlap-trace")
    engine = base_engine.fork(trace_dir=str(folder), enable_overlap_schedule=True, **FLAGS)
    try:
        results = drive(engine)
        assert_no_leak(engine)
    finally:
        engine.shutdown()
    return results, folder


def test_the_workload_covers_every_way_to_finish(normal):
    reasons = {rid: r["finish_reason"]["type"] for rid, r in normal.items()}
    assert reasons["eos-a"] == reasons["eos-b"] == "stop" and normal["eos-a"]["finish_reason"]["matched"] == 2
    assert reasons["len-1"] == reasons["len-7"] == reasons["long"] == "length"
    assert normal["stop"]["finish_reason"]["matched"] == "."
    assert reasons["abort"] == "abort"
    assert normal["hit"]["usage"]["cached_tokens"] > 0


def test_overlap_gives_the_same_tokens_and_finish_reasons(normal, overlap):
    results, _ = overlap
    for rid, ref in normal.items():
        got = results[rid]
        assert got["finish_reason"] == ref["finish_reason"], rid
        if rid == "abort":  # the abort is seen one round late: one token fewer
            assert got["output_ids"] == ref["output_ids"][: len(got["output_ids"])]
            assert len(ref["output_ids"]) - len(got["output_ids"]) == 1
        else:
            assert got["output_ids"] == ref["output_ids"], rid
            assert got["usage"] == ref["usage"], rid


def test_the_overlap_trace_checks_and_replays(overlap):
    _, folder = overlap
    trace = load_trace(folder)
    assert check_trace(trace) == []
    assert any(ev.name == "sched.admission" and ev.rid == "long" and ev.get("decision") == "chunked"
               for ev in trace.events)
    names = {(ev.name, ev.thread) for ev in trace.events}
    assert ("model.forward", "forward") in names and ("model.forward", None) not in names
    late = [ev for ev in trace.events if ev.name == "sched.sampled"]
    assert late and all(ev.get("batch_round") == ev.round - 1 for ev in late)  # processed one round late
    states = replay(trace)
    assert states and states[-1].running == [] and states[-1].waiting == []
    # extra rows: a request that finished a round late gives its row's KV slot back
    extra = [ev for ev in trace.events if ev.name == "kv.free" and ev.get("reason") == "finished"]
    assert extra
    r = subprocess.run([sys.executable, "-m", "minisgl.cli", "trace", "check", str(folder)], cwd=ROOT,
                       env={**os.environ, "HF_HUB_OFFLINE": "1"}, text=True, capture_output=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "trace OK" in r.stdout and "overlap" in r.stdout


def test_perfetto_shows_the_forward_beside_the_next_round(overlap):
    _, folder = overlap
    events = perfetto_events(load_trace(folder))["traceEvents"]
    forwards = [e for e in events if e.get("ph") == "X" and e["name"].startswith("forward")]
    rounds = {e["name"]: e for e in events if e.get("ph") == "X" and e["cat"] == "round"}
    assert forwards and all(e["tid"] == THREAD_TRACKS["forward"] for e in forwards)
    assert any(e["args"] == {"name": "forward thread"} for e in events if e.get("ph") == "M")
    beside = [f for f in forwards if (nxt := rounds.get(f"round {f['args']['round'] + 1}")) is not None
              and nxt["ts"] < f["ts"] + f["dur"] and f["ts"] < nxt["ts"] + nxt["dur"]]
    assert beside, "no forward overlaps the next round's forming"
    json.dumps(events)


def test_the_replay_app_opens_the_overlap_trace(overlap):
    from tui.app import ReplayApp

    _, folder = overlap
    trace = load_trace(folder)

    async def run() -> None:
        app = ReplayApp(trace)
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.pause()
            await pilot.press("end")
            await pilot.pause()
            assert app.timeline.cursor == len(trace.events) - 1

    asyncio.run(run())


def test_a_retraction_under_overlap_keeps_the_tokens(base_engine):
    roomy = [o["output_ids"] for o in base_engine.fork().generate(RETRACT_PROMPTS, RETRACT_PARAMS)]
    tight = base_engine.fork(max_total_tokens=120, chunked_prefill_size=8, enable_overlap_schedule=True)
    try:
        got = [o["output_ids"] for o in tight.generate(RETRACT_PROMPTS, RETRACT_PARAMS)]
        assert tight.scheduler.num_retracted > 0, "the pool must be small enough to force a retraction"
        assert got == roomy
        assert_no_leak(tight)
    finally:
        tight.shutdown()


def test_the_two_overlap_flags_contradict(base_engine):
    with pytest.raises(ValueError, match="contradict"):
        base_engine.fork(enable_overlap_schedule=True, disable_overlap_schedule=True)
