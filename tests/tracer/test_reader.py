"""load_trace: merging per-process files on one clock, and refusing what it cannot read."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.tracer.helpers import ENGINE, SERVER
from tracer.reader import TraceError, load_trace


def test_merges_processes_on_the_wall_clock():
    trace = load_trace(SERVER)
    assert [p.proc for p in trace.processes()] == ["detokenizer", "scheduler", "tokenizer_manager"]
    times = [ev.time_ns for ev in trace.events]
    assert times == sorted(times)
    # each file's clock is far from the others' (3 s, 7 s, 11 s): only the alignment makes this causal
    for flow in {ev.flow_id for ev in trace.events if ev.flow_id}:
        send = next(ev for ev in trace.events if ev.flow_id == flow and ev.name == "ipc.send")
        recv = next(ev for ev in trace.events if ev.flow_id == flow and ev.name == "ipc.recv")
        assert send.index < recv.index and send.proc != recv.proc
    for pid in {ev.pid for ev in trace.events}:
        seqs = [ev.seq for ev in trace.events if ev.pid == pid]
        assert seqs == list(range(len(seqs)))
    assert [ev.index for ev in trace.events] == list(range(len(trace.events)))


def test_aligns_with_process_start_and_breaks_ties_by_pid():
    trace = load_trace(SERVER)
    starts = [ev for ev in trace.events if ev.name == "trace.process_start"]
    for ev in trace.events:
        start = next(s for s in starts if s.pid == ev.pid)
        assert ev.time_ns == start.get("wall_ns") + ev.ts - start.get("mono_ns")
    # the tokenizer manager (pid 100) and detokenizer (pid 300) started at the same instant
    assert [ev.pid for ev in trace.events[:2]] == [100, 300]


def test_indexes_by_request_and_round():
    trace = load_trace(ENGINE)
    assert trace.rids() == ["req-a", "req-b"]
    assert trace.rounds() == [1, 2, 3, 4, 5]
    assert trace.level == 2
    assert all("req-b" in ev.all_rids for ev in trace.by_rid("req-b"))
    # batches, messages and forwards carry rids: they are part of each request's story
    names = {ev.name for ev in trace.by_rid("req-b")}
    assert {"sched.batch_formed", "ipc.send", "model.forward", "kv.assigned"} <= names
    assert {ev.round for ev in trace.events_in_round(3)} == {3}
    assert [ev.name for ev in trace.events_in_round(3)][-1] == "sched.round_end"


def test_torn_last_line_is_skipped_with_a_warning(tmp_path: Path):
    shutil.copytree(ENGINE, tmp_path / "t")
    (path,) = (tmp_path / "t").glob("*.jsonl")
    whole = len(path.read_text().splitlines())
    with path.open("a") as f:
        f.write('{"v":1,"seq":999,"ts":12,"proc":"engine","pid":42')  # the writer was killed here
    trace = load_trace(tmp_path / "t")
    assert len(trace.events) == whole
    assert len(trace.warnings) == 1 and path.name in trace.warnings[0] and "torn" in trace.warnings[0]


def test_corrupt_line_in_the_middle_names_file_and_line(tmp_path: Path):
    shutil.copytree(ENGINE, tmp_path / "t")
    (path,) = (tmp_path / "t").glob("*.jsonl")
    lines = path.read_text().splitlines()
    lines[9] = lines[9][:30]
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(TraceError, match=rf"{path.name}:10: corrupt line"):
        load_trace(tmp_path / "t")


def test_torn_line_that_is_not_the_last_is_corrupt(tmp_path: Path):
    shutil.copytree(ENGINE, tmp_path / "t")
    (path,) = (tmp_path / "t").glob("*.jsonl")
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines[:-1] + [lines[-1][:20]]) + "\n")  # cut, but a newline follows
    with pytest.raises(TraceError, match=rf"{path.name}:{len(lines)}: corrupt line"):
        load_trace(tmp_path / "t")


def test_version_1_traces_still_load():
    """Version 2 only added events and fields: the committed version 1 fixtures read as before."""
    for folder in (ENGINE, SERVER):
        trace = load_trace(folder)
        assert {ev.v for ev in trace.events} == {1}
        lines = sum(len(p.read_text().splitlines()) for p in folder.glob("*.jsonl"))
        assert len(trace) == lines and not trace.warnings


def test_unknown_schema_version_is_refused(tmp_path: Path):
    shutil.copytree(ENGINE, tmp_path / "t")
    (path,) = (tmp_path / "t").glob("*.jsonl")
    lines = path.read_text().splitlines()
    third = json.loads(lines[2])
    third["v"] = 3  # one line of a newer minisgl is enough to refuse the file
    lines[2] = json.dumps(third)
    path.write_text("".join(line + "\n" for line in lines))
    with pytest.raises(TraceError, match=rf"^\S*{path.name}:3: trace schema version 3 is not supported "
                                         r"\(this reader knows versions 1 and 2\); read it with the minisgl "
                                         r"that wrote it$"):
        load_trace(tmp_path / "t")


def test_missing_fields_are_corrupt(tmp_path: Path):
    (tmp_path / "engine-1.jsonl").write_text('{"v":1,"seq":0,"proc":"engine","pid":1,"name":"x"}\n')
    with pytest.raises(TraceError, match=r"engine-1.jsonl:1: corrupt event, missing field\(s\) ts"):
        load_trace(tmp_path)


def test_events_before_process_start_cannot_be_aligned(tmp_path: Path):
    line = '{"v":1,"seq":0,"ts":5,"proc":"engine","pid":1,"name":"sched.x"}\n'
    (tmp_path / "engine-1.jsonl").write_text(line)
    with pytest.raises(TraceError, match="before the file's trace.process_start"):
        load_trace(tmp_path)


@pytest.mark.parametrize("make, message", [
    (lambda p: p / "nope", "does not exist"),
    (lambda p: p, "has no \\*.jsonl files"),
    (lambda p: (p / "engine-1.jsonl").write_text("") or p, "has no events"),
    (lambda p: (p / "f.jsonl").write_text("") or p / "f.jsonl", "is not a folder"),
])
def test_empty_or_missing_folder(tmp_path: Path, make, message):
    with pytest.raises(TraceError, match=message):
        load_trace(make(tmp_path))
