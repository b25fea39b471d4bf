"""TraceTail: reading a trace folder while its writers are still appending to it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.tracer.helpers import ENGINE, SERVER
from tracer.reader import TraceError, TraceTail, load_trace
from tracer.replay import replay


def _key(trace) -> list[tuple[int, int, str]]:
    return [(ev.pid, ev.seq, ev.name) for ev in trace.events]


def _lines(folder: Path) -> dict[str, list[str]]:
    return {p.name: p.read_text().splitlines(keepends=True) for p in sorted(folder.glob("*.jsonl"))}


def test_line_by_line_ends_equal_to_load_trace(tmp_path: Path):
    (name, lines), = _lines(ENGINE).items()
    tail = TraceTail(tmp_path)
    assert tail.poll() is None and len(tail.trace) == 0  # an empty folder: waiting for the writer
    path = tmp_path / name
    for i, line in enumerate(lines):
        with path.open("a") as f:
            f.write(line)
        assert tail.poll() == i  # one process: every line lands at the end
    full = load_trace(ENGINE)
    assert _key(tail.trace) == _key(full)
    assert [ev.index for ev in tail.trace.events] == list(range(len(full)))
    assert tail.trace.rids() == full.rids() and tail.trace.rounds() == full.rounds()
    assert tail.trace.processes()[0].num_events == len(full)
    assert [s.waiting for s in replay(tail.trace)] == [s.waiting for s in replay(full)]


def test_a_half_written_line_waits_for_its_newline(tmp_path: Path):
    (name, lines), = _lines(ENGINE).items()
    path = tmp_path / name
    path.write_text("".join(lines[:10]) + lines[10][:25])
    tail = TraceTail(tmp_path)
    tail.poll()
    assert len(tail.trace) == 10
    assert tail.poll() is None
    with path.open("a") as f:
        f.write(lines[10][25:])
    assert tail.poll() == 10
    assert tail.trace.events[10].seq == 10


def test_a_late_line_from_another_process_is_merged_into_place(tmp_path: Path):
    files = _lines(SERVER)
    tail = TraceTail(tmp_path)
    # the scheduler's whole file first, then the tokenizer manager's, whose lines mostly come earlier
    for name in ("scheduler-200.jsonl", "tokenizer_manager-100.jsonl", "detokenizer-300.jsonl"):
        (tmp_path / name).write_text("".join(files[name]))
        changed = tail.poll()
        assert changed is not None
    full = load_trace(SERVER)
    assert _key(tail.trace) == _key(full)
    assert [ev.index for ev in tail.trace.events] == list(range(len(full)))
    assert [ev.seq for ev in tail.trace.by_rid("s1")] == [ev.seq for ev in full.by_rid("s1")]


def test_extend_reports_where_the_timeline_changed_and_drops_stale_replay(tmp_path: Path):
    files = _lines(SERVER)
    for name, lines in files.items():
        (tmp_path / name).write_text("".join(lines[:3]))
    tail = TraceTail(tmp_path)
    tail.poll()
    before = replay(tail.trace)
    assert before == []  # no round has ended yet
    sched = tmp_path / "scheduler-200.jsonl"
    with sched.open("a") as f:
        f.write("".join(files["scheduler-200.jsonl"][3:]))
    start = tail.poll()
    assert start is not None and start < len(tail.trace)
    assert [s.round for s in replay(tail.trace)] == [1, 2]  # replay's cached checkpoints were dropped


def test_a_missing_folder_or_a_corrupt_line_is_an_error(tmp_path: Path):
    with pytest.raises(TraceError, match="does not exist"):
        TraceTail(tmp_path / "nope")
    (tmp_path / "engine-1.jsonl").write_text("not json\n")
    with pytest.raises(TraceError, match=r"engine-1.jsonl:1: corrupt line"):
        TraceTail(tmp_path).poll()
