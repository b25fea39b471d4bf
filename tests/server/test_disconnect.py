"""A client that leaves mid-request: the server sends AbortReq, the scheduler finishes the request as
"abort" within a couple of rounds of receiving it, and every KV slot it held is free or cached again.

The rounds are read from the server's trace: the round in which the scheduler received the AbortReq, and
the round in which the request finished.
"""

from __future__ import annotations

import json
import time

import httpx
import pytest

from tests.server.conftest import AUTH, wait_drained
from tracer.reader import load_trace

LONG = {"prompt": "Once upon a time", "max_tokens": 600, "ignore_eos": True, "temperature": 0}


def _scheduler_rounds(trace_dir: str, rid: str, timeout: float = 30) -> tuple[int, int, dict]:
    """(round that received the AbortReq, round of sched.finished, its finish_reason)."""
    deadline = time.monotonic() + timeout
    while True:
        evs = load_trace(trace_dir).by_rid(rid)
        recv = [e for e in evs if e.name == "ipc.recv" and e.get("msg") == "AbortReq" and e.proc == "scheduler"]
        done = [e for e in evs if e.name == "sched.finished"]
        if recv and done:
            return recv[0].round, done[0].round, done[0].get("finish_reason")
        if time.monotonic() > deadline:
            raise AssertionError(f"no AbortReq/sched.finished for {rid} in the trace: {[e.name for e in evs]}")
        time.sleep(0.2)


def _new_requests(trace_dir: str, before: set[str], timeout: float = 30) -> list[str]:
    """The rids not in `before` that the HTTP server received, as soon as the trace shows one."""
    deadline = time.monotonic() + timeout
    while True:
        trace = load_trace(trace_dir)
        rids = [r for r in trace.rids()
                if r not in before and any(e.name == "http.request_received" for e in trace.by_rid(r))]
        if rids:
            return rids
        if time.monotonic() > deadline:
            raise AssertionError(f"no new http.request_received in the trace within {timeout} s")
        time.sleep(0.2)


def _assert_aborted_and_freed(server, http, rid: str) -> None:
    load = wait_drained(http, timeout=60)
    assert load["free_slots"] + load["cached_slots"] == load["total_slots"]
    abort_round, finish_round, reason = _scheduler_rounds(server.trace_dir, rid)
    assert reason["type"] == "abort"
    assert finish_round - abort_round <= 2


def test_streaming_client_disconnect_aborts_and_frees_kv(server, http, model):
    with httpx.Client(base_url=server.url, headers=AUTH, timeout=300) as c, \
            c.stream("POST", "/v1/completions", json={**LONG, "model": model, "stream": True}) as resp:
        assert resp.status_code == 200
        lines = resp.iter_lines()  # kept alive: a closed iterator would close the connection too early
        chunks = []
        while len(chunks) < 3:
            line = next(lines)
            if line.startswith("data: "):
                chunks.append(json.loads(line[6:]))
        rid = chunks[0]["id"].removeprefix("cmpl-")
        assert http.get("/health").json()["load"]["num_running_reqs"] >= 1
    # leaving both blocks closed the connection, three tokens into six hundred
    _assert_aborted_and_freed(server, http, rid)


def test_non_streaming_client_disconnect_aborts_and_frees_kv(server, http, model):
    before = set(load_trace(server.trace_dir).rids())
    with httpx.Client(base_url=server.url, headers=AUTH, timeout=httpx.Timeout(300, read=2.0)) as c, \
            pytest.raises(httpx.ReadTimeout):
        c.post("/v1/completions", json={**LONG, "model": model})
    rids = _new_requests(server.trace_dir, before)
    assert len(rids) == 1
    _assert_aborted_and_freed(server, http, rids[0])
