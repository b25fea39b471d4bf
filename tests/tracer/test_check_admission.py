"""check_admission on a real engine trace: it passes as written, and a budget edited by one token is caught
on the candidate whose arithmetic no longer adds up and on the next one, whose starting point moved."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tracer.check import check_trace
from tracer.check_admission import check_admission
from tracer.reader import load_trace


@pytest.fixture(scope="module")
def folder(base_engine, tmp_path_factory) -> Path:
    """Round 1 of max_prefill_tokens 8 and 32 KV slots: R1 (3 rows) and R2 (4) admitted, R3 (5) refused."""
    folder = tmp_path_factory.mktemp("admission")
    engine = base_engine.fork(trace_dir=str(folder), trace_level=1, max_total_tokens=32, max_prefill_tokens=8,
                              max_running_requests=4)
    try:
        engine.generate(input_ids=[[10, 11, 12], [20, 21, 22, 23], [30, 31, 32, 33, 34]], rid=["R1", "R2", "R3"],
                        sampling_params={"max_new_tokens": 2, "ignore_eos": True, "temperature": 0.0})
    finally:
        engine.shutdown()
    return folder


def edit(folder: Path, tmp_path: Path, name: str, rid: str | None, change) -> Path:
    """A copy of the trace with the first round-1 `name` event (of `rid`) changed in place by change(attrs)."""
    shutil.copytree(folder, tmp_path / "t")
    (path,) = (tmp_path / "t").glob("*.jsonl")
    lines = path.read_text().splitlines()
    i = next(i for i, line in enumerate(lines) if (r := json.loads(line))["name"] == name
             and r.get("rid") == rid and r.get("round") == 1)
    record = json.loads(lines[i])
    change(record["attrs"])
    lines[i] = json.dumps(record)
    path.write_text("".join(line + "\n" for line in lines))
    return tmp_path / "t"


def where(trace, name: str, rid: str | None) -> str:
    return next(ev.where for ev in trace.events if ev.name == name and ev.rid == rid and ev.round == 1)


def test_the_engine_trace_adds_up(folder):
    trace = load_trace(folder)
    assert check_admission(trace) == [] and check_trace(trace) == []
    decisions = [(ev.rid, ev.get("decision"), ev.get("after")["rem_kv_room"]) for ev in trace.events_in_round(1)
                 if ev.name == "sched.admission"]
    assert decisions == [("R1", "admitted", 29), ("R2", "admitted", 25), ("R3", "refused", 25)]


def test_an_after_that_does_not_add_up(folder, tmp_path):
    def one_more_slot(attrs):
        attrs["after"]["rem_kv_room"] += 1

    trace = load_trace(edit(folder, tmp_path, "sched.admission", "R2", one_more_slot))
    r2, r3 = where(trace, "sched.admission", "R2"), where(trace, "sched.admission", "R3")
    assert check_admission(trace) == [
        f"admission: round 1: R2 ({r2}): after.rem_kv_room is 26, expected 25 (admitted: before 29 - spent 4)",
        f"admission: round 1: R3 ({r3}): before.rem_kv_room is 25, but the round's budgets stood at 26",
    ]


def test_a_start_that_does_not_add_up(folder, tmp_path):
    def one_more_free(attrs):
        attrs["available_size"] += 1

    trace = load_trace(edit(folder, tmp_path, "sched.prefill_budget", None, one_more_free))
    at = where(trace, "sched.prefill_budget", None)
    assert check_admission(trace) == [
        f"admission: round 1 ({at}): rem_total_tokens starts at 32, expected 33 (33 - 0 reserved)",
        f"admission: round 1 ({at}): rem_kv_room starts at 32, expected 33 (available + evictable)",
    ]
