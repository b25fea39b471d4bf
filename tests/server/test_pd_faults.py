"""Prefill/decode disaggregation when a peer never answers, with real servers and, as the silent peer, a
real ZeroMQ socket of this test that takes what the server sends and never replies. A prefill server whose
decode half never registers, one whose KV is never acknowledged, and a decode server whose KV never
arrives: each request fails with 503 and a message naming the timeout (the HTTP client's own limit is the
bound), its KV slots come back, the server keeps serving, and its trace passes `trace check`."""

from __future__ import annotations

import json
import re
import time

import httpx
import pytest
import zmq

from minisgl.disaggregation.bootstrap import BootstrapClient
from tests.server.conftest import ServeProcess, wait_drained
from tracer.check import check_trace
from tracer.reader import load_trace

FLAGS = ["--dtype", "float32", "--max-total-tokens", "1024", "--context-length", "512", "--log-level",
         "warning", "--disaggregation-bootstrap-timeout", "5", "--disaggregation-transfer-timeout", "5"]
PARAMS = {"max_new_tokens": 4, "temperature": 0}


@pytest.fixture(scope="module")
def prefill(tmp_path_factory):
    trace = tmp_path_factory.mktemp("prefill-trace")
    srv = ServeProcess([*FLAGS, "--disaggregation-mode", "prefill", "--disaggregation-bootstrap-port", "0",
                        "--trace", str(trace)]).wait_ready()
    # port 0: the bootstrap server binds a free port itself, and the ready line names it
    srv.bootstrap_port, srv.trace = int(re.search(r"; bootstrap port (\d+)", srv.output()).group(1)), trace
    yield srv
    assert srv.stop() == 0


@pytest.fixture(scope="module")
def decode(tmp_path_factory):
    trace = tmp_path_factory.mktemp("decode-trace")
    srv = ServeProcess([*FLAGS, "--disaggregation-mode", "decode", "--trace", str(trace)]).wait_ready()
    srv.trace = trace
    yield srv
    assert srv.stop() == 0


def _generate(url: str, room: int, port: int) -> httpx.Response:
    body = {"text": "The capital of France is", "sampling_params": PARAMS, "bootstrap_host": "127.0.0.1",
            "bootstrap_port": port, "bootstrap_room": room}
    return httpx.post(f"{url}/generate", json=body, timeout=120)


def _refused(resp: httpx.Response, words: str) -> None:
    assert resp.status_code == 503, resp.text
    assert words in resp.json()["error"]["message"]


def test_a_decode_half_that_never_registers(prefill):
    _refused(_generate(prefill.url, 101, prefill.bootstrap_port), "did not register for room 101 within 5 s")
    with httpx.Client(base_url=prefill.url) as http:
        wait_drained(http)


def test_a_decode_half_that_never_acknowledges(prefill):
    context = zmq.Context()
    silent = context.socket(zmq.PULL)  # the "decode server": it takes the KV and never acks
    port = silent.bind_to_random_port("tcp://127.0.0.1")
    client = BootstrapClient(context)
    try:
        client.register("127.0.0.1", prefill.bootstrap_port, 202, f"tcp://127.0.0.1:{port}", num_slots=6)
        answer = _generate(prefill.url, 202, prefill.bootstrap_port)
        _refused(answer, "did not acknowledge the KV of room 202")
        assert silent.poll(10_000), "the prefill server sent the KV before it gave up on the ack"
        with httpx.Client(base_url=prefill.url) as http:
            wait_drained(http)
            assert http.post("/generate", json={"text": "x", "sampling_params": PARAMS, "bootstrap_host":
                                                 "127.0.0.1", "bootstrap_port": prefill.bootstrap_port,
                                                 "bootstrap_room": 203}, timeout=120).status_code == 503
    finally:
        client.close()
        silent.close()
        context.term()


def test_a_prefill_half_whose_kv_never_arrives(decode):
    context = zmq.Context()
    silent = context.socket(zmq.PULL)  # the "prefill server's" bootstrap port: it hears the registration
    port = silent.bind_to_random_port("tcp://127.0.0.1")
    try:
        _refused(_generate(decode.url, 303, port), "did not arrive from its prefill server within 5 s")
        registration = json.loads(silent.recv(zmq.NOBLOCK))
        assert registration["type"] == "register" and registration["room"] == 303
        with httpx.Client(base_url=decode.url) as http:
            load = wait_drained(http)
            assert load["free_slots"] == load["total_slots"], "the preallocated slots came back"
    finally:
        silent.close()
        context.term()


def test_the_traces_show_the_timeouts_and_pass_the_checks(prefill, decode):
    for srv, queues in ((prefill, {"bootstrap", "inflight"}), (decode, {"transfer"})):
        trace = load_trace(srv.trace)
        timeouts = [ev for ev in trace.events if ev.name == "disagg.timeout"]
        assert {ev.get("queue") for ev in timeouts} >= queues
        assert check_trace(trace) == []


def test_an_abort_in_the_bootstrap_queue_frees_it_at_once(prefill):
    """/abort_request for a request still waiting for its decode half: it leaves at once (it holds no KV),
    long before the bootstrap timeout would end it (the abort is sent as soon as the request is queued)."""
    import threading

    answers: dict[str, httpx.Response] = {}
    waiting = threading.Thread(target=lambda: answers.setdefault("r", _generate(prefill.url, 404,
                                                                                prefill.bootstrap_port)))
    waiting.start()
    with httpx.Client(base_url=prefill.url) as http:
        deadline = time.monotonic() + 60
        while http.get("/health").json()["load"]["num_running_reqs"] == 0:  # it reached the scheduler
            assert time.monotonic() < deadline, "the request never reached the scheduler"
            time.sleep(0.05)
        assert http.post("/abort_request", json={"rid": "pd-404"}).json()["found"]
        waiting.join(60)
        assert answers["r"].status_code == 200, answers["r"].text
        assert answers["r"].json()["meta_info"]["finish_reason"]["type"] == "abort"
        wait_drained(http)
