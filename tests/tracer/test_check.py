"""check_trace: the fixtures pass; each invariant, broken in a copy, is reported in one clear line."""

from __future__ import annotations

import pytest

from minisgl.cli import main
from tests.tracer.helpers import ENGINE, SERVER, find
from tracer.check import check_trace
from tracer.reader import load_trace

ENG, TM, DETOK = "engine-4242.jsonl", "tokenizer_manager-100.jsonl", "detokenizer-300.jsonl"


@pytest.mark.parametrize("source", [ENGINE, SERVER])
def test_good_fixtures_pass(source):
    assert check_trace(load_trace(source)) == []


def drop(file: str, name: str, **match):
    return lambda files: files[file].remove(find(files[file], name, **match))


def set_attr(file: str, name: str, key: str, value, **match):
    def edit(files):
        find(files[file], name, **match)["attrs"][key] = value
    return edit


def renumber_round(files):
    for r in files[ENG]:
        if r.get("round") == 5:
            r["round"] = 6


BROKEN = [
    ("lost message", SERVER, drop(DETOK, "ipc.recv", flow={"id": "200:2", "dir": "recv"}),
     "ipc: message 200:2 (BatchTokenIDOutput) was sent by scheduler (scheduler-200.jsonl:28) "
     "but never received"),
    ("unsent message", ENGINE, drop(ENG, "ipc.send", rid="req-a"),
     "ipc: message 4242:1 (TokenizedGenerateReqInput) was received by engine"),
    ("never finished", ENGINE, drop(ENG, "sched.finished", rid="req-b"),
     "request req-b: never finished or aborted (no sched.finished or sched.refused)"),
    ("no HTTP response", SERVER, drop(TM, "http.response_finished"),
     "request s1: never finished or aborted (no http.response_finished or http.error)"),
    ("never received", SERVER, drop(TM, "http.request_received"),
     "request s1: never received (no http.request_received event)"),
    ("leaked slots", ENGINE, drop(ENG, "cache.inserted", rid="req-a", slots=[9]),
     "kv: 1 slot(s) [9] still held by req-a at the end: never freed or cached"),
    ("double alloc", ENGINE, set_attr(ENG, "kv.alloc", "slots", [4], slots=[10]),
     "kv: engine-4242.jsonl:"),
    ("sampled != detokenized", ENGINE, set_attr(ENG, "detok.decoded", "token_ids", [50, 51], rid="req-b"),
     "tokens: request req-b: sampled [50, 51, 52] but detokenized [50, 51]"),
    ("text != SSE", SERVER, set_attr(TM, "http.sse_chunk", "delta", " word", index=1),
     "text: request s1: detokenizer sent 'Hello world' but SSE chunks carried 'Hello word'"),
    ("SSE not a prefix though the client left", SERVER, lambda files: (
        set_attr(TM, "http.sse_chunk", "delta", " word", index=1)(files),
        set_attr(TM, "http.response_finished", "status", 499)(files)),
     "text: request s1: detokenizer sent 'Hello world' but SSE chunks carried 'Hello word'"),
    ("round gap", ENGINE, renumber_round,
     "rounds: sched.round_end rounds go [1, 2, 3, 4, 6], expected [1, 2, 3, 4, 5]"),
    ("free slots disagree", ENGINE, set_attr(ENG, "sched.round_end", "free_slots", 2, round=3),
     "round 3: free_slots: replay says 1, sched.round_end says 2"),
    ("waiting disagrees", ENGINE, set_attr(ENG, "sched.round_end", "waiting", [], round=4),
     "round 4: waiting: replay says ['req-a'], sched.round_end says []"),
    ("running disagrees", ENGINE, set_attr(ENG, "sched.round_end", "running", ["req-a", "req-b"], round=2),
     "round 2: running: replay says [], sched.round_end says ['req-a', 'req-b']"),
    ("tree disagrees", ENGINE, drop(ENG, "cache.inserted", rid="req-a", slots=[8]),
     "round 4: the tree holds slots [1, 2, 3, 4, 5, 6, 7, 8, 9, 10] but cache events gave it"),
]


def test_a_client_that_left_mid_stream_was_sent_a_beginning_of_the_text(broken):
    def leave_after_first_chunk(files):
        records = files[TM]
        chunks = [r for r in records if r["name"] == "http.sse_chunk"]
        assert len(chunks) >= 2
        for r in chunks[1:]:
            records.remove(r)
        end = find(records, "http.response_finished")
        records[records.index(end)] = {**end, "name": "http.error", "attrs": {"status": 499,
                                                                             "message": "client left"}}
        for seq, r in enumerate(records):  # as the process would have numbered them: no chunk was written
            r["seq"] = seq

    folder = broken(SERVER, leave_after_first_chunk)
    assert check_trace(load_trace(folder)) == []


@pytest.mark.parametrize("what, source, edit, line", BROKEN, ids=[b[0] for b in BROKEN])
def test_each_broken_invariant_is_reported(broken, what, source, edit, line):
    failures = check_trace(load_trace(broken(source, edit)))
    assert any(f.startswith(line) for f in failures), failures


def test_cli_check_ok(capsys):
    assert main(["trace", "check", str(ENGINE)]) == 0
    assert capsys.readouterr().out.strip() == "trace OK: 89 events, 2 requests, 5 rounds"


def test_cli_check_failures(broken, capsys):
    folder = broken(ENGINE, drop(ENG, "sched.finished", rid="req-b"))
    assert main(["trace", "check", str(folder)]) == 1
    out = capsys.readouterr().out
    assert "request req-b: never finished" in out and out.strip().splitlines()[-1].startswith("trace FAILED")


@pytest.mark.parametrize("command", ["check", "show", "export"])
def test_cli_unreadable_trace_is_one_line_and_exit_2(tmp_path, capsys, command):
    (tmp_path / "engine-1.jsonl").write_text('{"v": 9}\n{"v": 9}\n')
    assert main(["trace", command, str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"minisgl trace {command}: error: ") and "version 9" in err
    assert main(["trace", command, str(tmp_path / "missing")]) == 2
    assert "does not exist" in capsys.readouterr().err
