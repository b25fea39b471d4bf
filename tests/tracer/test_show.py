"""trace show: the tables render at 80 columns and carry the rids and numbers a reader looks for."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from minisgl.cli import main
from tests.tracer.helpers import ENGINE, SERVER
from tracer.reader import TraceError, load_trace
from tracer.show import find_rid, show


def render(source, rid=None) -> str:
    console = Console(file=io.StringIO(), width=80, record=True, color_system=None)
    show(load_trace(source), console, rid)
    return console.export_text()


def test_tables_fit_80_columns_and_show_the_numbers():
    text = render(ENGINE, rid="req-b")
    assert max(len(line) for line in text.splitlines()) <= 80
    lines = text.splitlines()
    a = next(line for line in lines if line.split()[:1] == ["req-a"])
    b = next(line for line in lines if line.split()[:1] == ["req-b"])
    # rid, prompt, cached, out, wait, prefill rounds, decode rounds, TTFT, ITL, finish
    assert a.split()[:4] == ["req-a", "6", "0", "3"] and a.split()[5:7] == ["3", "1"]
    assert a.split()[-1] == "length"
    assert b.split()[:4] == ["req-b", "5", "4", "3"] and b.split()[5:7] == ["1", "2"]
    round2 = next(line for line in lines if line.split()[:2] == ["2", "EXTEND"])
    assert round2.split() == ["2", "EXTEND", "req-a", "req-b", "3", "2", "1", "6", "5", "5-7", "2.5"]
    assert "Request req-b" in text and "sched.finished" in text and "finish_reason" in text


def test_timeline_of_a_server_request_spans_the_processes():
    text = render(SERVER, rid="s1")
    timeline = text[text.index("Request s1"):]
    for lane in ("tm", "sched", "detok"):
        assert f" {lane} " in timeline
    assert "http.request_received" in timeline and "http.sse_chunk" in timeline


def test_rid_prefix_and_unknown_rid():
    trace = load_trace(ENGINE)
    assert find_rid(trace, "req-b") == "req-b"
    with pytest.raises(TraceError, match="start of 2 request ids"):
        find_rid(trace, "req")
    with pytest.raises(TraceError, match="no request 'zz'"):
        find_rid(trace, "zz")


def test_cli_show(capsys):
    assert main(["trace", "show", str(ENGINE), "--rid", "req-a"]) == 0
    out = capsys.readouterr().out
    assert "Requests" in out and "Rounds" in out and "Request req-a" in out
    assert main(["trace", "show", str(ENGINE), "--rid", "nope"]) == 2
    assert "no request 'nope'" in capsys.readouterr().err
