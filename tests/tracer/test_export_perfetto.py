"""trace export --format perfetto: valid trace-event JSON whose slices nest and whose flows pair up."""

from __future__ import annotations

import json
from collections import defaultdict

import pytest

from minisgl.cli import main
from tests.tracer.helpers import ENGINE, SERVER
from tracer.export_perfetto import export_perfetto
from tracer.reader import load_trace


def check_structure(doc: dict) -> None:
    """What a viewer relies on: flows pair up, B/E balance, complete slices on one track never overlap."""
    events = doc["traceEvents"]
    flows = defaultdict(list)
    for e in events:
        if e["ph"] in ("s", "f"):
            flows[e["id"]].append(e["ph"])
    assert all(sorted(v) == ["f", "s"] for v in flows.values()), flows
    stacks = defaultdict(list)
    for e in sorted((e for e in events if e["ph"] in ("B", "E")), key=lambda e: e["ts"]):
        track = (e["pid"], e["tid"])
        if e["ph"] == "B":
            stacks[track].append(e["name"])
        else:
            assert stacks[track] and stacks[track].pop() == e["name"]
    assert not any(stacks.values())
    spans = defaultdict(list)
    for e in events:
        if e["ph"] == "X":
            assert e["dur"] >= 0
            spans[(e["pid"], e["tid"])].append((e["ts"], e["ts"] + e["dur"], e["name"]))
    for track, xs in spans.items():
        xs.sort()
        for (s0, e0, n0), (s1, _, n1) in zip(xs, xs[1:]):
            assert e0 <= s1 + 1e-9, f"{track}: {n0} [{s0}, {e0}] overlaps {n1} at {s1}"


@pytest.mark.parametrize("source", [ENGINE, SERVER])
def test_structure(source):
    doc = json.loads(export_perfetto(load_trace(source)))
    check_structure(doc)


def test_tracks_rounds_requests_and_flows():
    doc = json.loads(export_perfetto(load_trace(SERVER)))
    events = doc["traceEvents"]
    names = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    assert names == {"tokenizer_manager (100)", "scheduler (200)", "detokenizer (300)", "requests"}
    threads = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert threads >= {"s1", "rounds", "model", "ipc"}
    slices = [e["name"] for e in events if e["ph"] == "X"]
    assert slices.count("round 1") == 1 and slices.count("round 2") == 1
    assert [n for n in slices if n in ("queued", "prefill", "decode")] == ["queued", "prefill", "decode"]
    assert sum(1 for e in events if e["ph"] == "s") == 5  # every message, both ends in the trace
    assert any(e["ph"] == "i" and e["name"] == "http.sse_chunk" for e in events)


def test_engine_request_tracks_show_the_retraction():
    doc = json.loads(export_perfetto(load_trace(ENGINE)))
    track = {e["tid"] for e in doc["traceEvents"] if e["ph"] == "M" and e["args"].get("name") == "req-a"}
    phases = [e["name"] for e in sorted(doc["traceEvents"], key=lambda e: e["ts"])
              if e["ph"] == "X" and e["cat"] == "request" and e["tid"] in track]
    assert phases == ["queued", "prefill", "decode", "queued (retracted)", "prefill", "decode"]


def test_cli_export(tmp_path, capsys):
    out = tmp_path / "t.json"
    assert main(["trace", "export", str(ENGINE), "--format", "perfetto", "-o", str(out)]) == 0
    check_structure(json.loads(out.read_text()))
    assert f"wrote {out}" in capsys.readouterr().out
