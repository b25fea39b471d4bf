"""A grading scenario of the tm_wait_loop lab: a client without stream that goes away. Nothing reaches such a
client until its request finishes, so only the waiter's poll notices it left: every DISCONNECT_POLL_S without
news, _wait_one_response asks the connection, and on a closed one sends AbortReq and answers 499.

A timer is not a round, so the scenario pins the rounds down with SGLang's /pause_generation (mode
"in_place"): no batch runs while both requests wait in the scheduler's queue, KEPT (whose client stays) and
GONE (whose client closes its connection). GONE is aborted while waiting, KEPT's waiter polls and finds its
client there, then /continue_generation lets KEPT run. The trace is the same however long the polls took.
"""

from __future__ import annotations

import json
import threading

from minisgl.scenarios.base import Look, Scenario
from minisgl.scenarios.look import first

WAIT_S = 30  # for the server to reach each step; the poll takes about a second


def _body(rid: str) -> dict:
    return {"rid": rid, "text": f" {rid.lower()} one two three", "stream": False,
            "sampling_params": {"max_new_tokens": 3, "temperature": 0, "ignore_eos": True}}


def _waiting_until(url: str, done, what: str) -> None:
    from minisgl.scenarios.http_client import wait_load

    wait_load(url, lambda load: done(load["num_waiting_reqs"]), what, timeout=WAIT_S, poll=0.05)


def drive(url: str) -> dict:
    import http.client
    from urllib.parse import urlsplit

    import httpx

    from minisgl.scenarios.http_client import wait_idle

    def post(path: str, body: dict | None = None) -> None:
        resp = httpx.post(f"{url}{path}", json=body, timeout=60)
        if resp.status_code != 200:
            raise RuntimeError(f"POST {path} answered {resp.status_code}: {resp.text[:500]}")

    post("/pause_generation", {"mode": "in_place"})
    kept: dict = {}
    keeper = threading.Thread(target=lambda: kept.update(
        httpx.post(f"{url}/generate", json=_body("KEPT"), timeout=300).json()), daemon=True)
    try:
        keeper.start()
        _waiting_until(url, lambda n: n == 1, "KEPT is not in the scheduler's queue")
        where = urlsplit(url)
        gone = http.client.HTTPConnection(where.hostname, where.port, timeout=60)
        gone.request("POST", "/generate", json.dumps(_body("GONE")), {"Content-Type": "application/json"})
        _waiting_until(url, lambda n: n == 2, "GONE is not in the scheduler's queue")
        gone.close()  # the client leaves without reading an answer
        _waiting_until(url, lambda n: n < 2, "the server has not noticed that GONE's client left")
    finally:  # a server that never noticed must still run KEPT: the scenario fails, it does not hang
        post("/continue_generation")
    keeper.join(timeout=300)
    wait_idle(url)
    return {"KEPT": kept, "GONE": {"rid": "GONE", "left": "its connection closed, no answer read"}}


def look_at(trace) -> Look:
    error = first(trace, "http.error", lambda ev: ev.rid == "GONE")
    asked = first(trace, "sched.abort_requested", lambda ev: ev.rid == "GONE")
    done = first(trace, "http.response_finished", lambda ev: ev.rid == "KEPT")
    lines = []
    if error is not None:
        lines.append(f"GONE: its waiter's poll found the client gone: http.error {error.get('status')}")
    if asked is not None:
        lines.append(f"GONE: AbortReq reached the scheduler while it was {asked.get('where')}")
    reason = (done.get("finish_reason") or {}).get("type") if done else None
    lines.append(f"KEPT: its client stayed; finished by {reason}" if done else "KEPT never finished")
    return Look(lines, rid="GONE")


SCENARIO = Scenario(
    name="tm_disconnect",
    title="A client without stream leaves while its request waits",
    teaches="_wait_one_response's poll: a closed connection is aborted (AbortReq, 499), an open one waits on",
    lesson="tokenizer-manager",
    flags={"max_total_tokens": 128},
    server=drive,
    look_at=look_at,
)
