"""Prefill/decode disaggregation when a peer never answers, with real servers and, as the silent peer, a
real ZeroMQ socket of this test that takes what the server sends and never replies. A prefill server whose
decode half never registers, one whose KV is never acknowledged, and a decode server whose KV never
arrives: each request fails with 503 and a message naming the timeout (the HTTP client's own limit is the
bound), its KV slots come back, the server keeps serving, and its trace passes `trace check`. After every
fault, the two servers paired directly (the test doing SGLang's router's part) still give the offline
Engine's greedy text, several requests at once and streamed, and a client that leaves a stream frees the
decode server's slots. (The pair behind the router itself is the pd_disaggregation scenario's run,
test_pd_disaggregation.py.)"""

from __future__ import annotations

import json
import os
import re
import signal
import threading
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


def _timed_out(srv, queue: str, room: int) -> None:
    """The server's trace shows the timeout (disagg.timeout in `queue`, for `room`) and passes the checks."""
    from tracer.reader import TraceError

    def seen() -> bool:
        try:
            events = load_trace(str(srv.trace)).events
        except TraceError:  # nothing written yet
            return False
        return any(ev.name == "disagg.timeout" and ev.get("queue") == queue and ev.get("room") == room
                   for ev in events)

    _until(seen, f"no disagg.timeout in the {queue} queue for room {room}", 60)
    assert check_trace(load_trace(str(srv.trace))) == []


def test_a_decode_half_that_never_registers(prefill):
    _refused(_generate(prefill.url, 101, prefill.bootstrap_port), "did not register for room 101 within 5 s")
    with httpx.Client(base_url=prefill.url) as http:
        wait_drained(http)
    _timed_out(prefill, "bootstrap", 101)


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
    _timed_out(prefill, "inflight", 202)


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
    _timed_out(decode, "transfer", 303)


def test_an_abort_in_the_bootstrap_queue_frees_it_at_once(prefill):
    """/abort_request for a request still waiting for its decode half: it leaves at once (it holds no KV),
    long before the bootstrap timeout would end it (the abort is sent as soon as the request is queued)."""
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


def _in_thread(fn) -> tuple[threading.Thread, dict]:
    """Run fn on a thread: its answer in out["r"], or the error that ended it (a killed server's)."""
    out: dict = {}

    def run() -> None:
        try:
            out["r"] = fn()
        except httpx.TransportError as e:
            out["error"] = e

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, out


def _until(cond, what: str, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while not cond():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def _aborted_at_once(resp: httpx.Response) -> None:
    """An abort's own answer (200, finish_reason abort), not the 503 the timeout would give later."""
    assert resp.status_code == 200, resp.text
    assert resp.json()["meta_info"]["finish_reason"]["type"] == "abort"


def test_aborts_in_the_decode_servers_prealloc_and_transfer_queues_free_everything(decode):
    """Two long prompts preallocate most of the KV pool and wait in the transfer queue for KV a silent
    "prefill server" never sends; a third cannot preallocate and waits in the prealloc queue. Each is
    aborted: the third leaves at once, never registered; the two others give their slots back at once
    (kv.free `aborted`), not when the transfer timeout would."""
    context = zmq.Context()
    silent = context.socket(zmq.PULL)
    port = silent.bind_to_random_port("tcp://127.0.0.1")
    long_text = "one two three four five six seven eight " * 55  # ~440 tokens: two fit the 1024 slots
    rooms = (801, 802, 803)
    try:
        with httpx.Client(base_url=decode.url) as http:
            sent = []
            for room in rooms:
                body = {"text": long_text, "sampling_params": PARAMS, "bootstrap_host": "127.0.0.1",
                        "bootstrap_port": port, "bootstrap_room": room}
                sent.append(_in_thread(lambda body=body: httpx.post(f"{decode.url}/generate", json=body,
                                                                    timeout=120)))
                _until(lambda n=len(sent): http.get("/health").json()["load"]["num_running_reqs"] == n,
                       f"request {len(sent)} never reached the scheduler")
            registered = []
            _until(lambda: silent.poll(0) and registered.append(json.loads(silent.recv())) is None
                   and len(registered) == 2, "the first two never registered", 60)
            assert [r["room"] for r in registered] == [801, 802]
            for room, (thread, out) in zip(reversed(rooms), reversed(sent)):  # the waiting one first
                assert http.post("/abort_request", json={"rid": f"pd-{room}"}).json()["found"]
                thread.join(60)
                _aborted_at_once(out["r"])
            load = wait_drained(http)
            assert load["free_slots"] == load["total_slots"]
            assert not silent.poll(0), "the request aborted in the prealloc queue registered after all"
    finally:
        silent.close()
        context.term()
    frees = [ev for ev in load_trace(decode.trace).events if ev.name == "kv.free"
             and ev.get("reason") == "aborted"]
    assert len(frees) == 2 and all(len(ev.get("slots")) > 400 for ev in frees)


def test_an_abort_in_the_prefill_servers_inflight_queue_frees_it_at_once(prefill):
    """The KV is sent to a silent "decode server" that never acknowledges it; the request, waiting in the
    inflight queue, is aborted: it ends at once as abort (not with the timeout's 503), and the server
    drains."""
    context = zmq.Context()
    silent = context.socket(zmq.PULL)
    port = silent.bind_to_random_port("tcp://127.0.0.1")
    client = BootstrapClient(context)
    try:
        client.register("127.0.0.1", prefill.bootstrap_port, 1101, f"tcp://127.0.0.1:{port}", num_slots=6)
        thread, out = _in_thread(lambda: _generate(prefill.url, 1101, prefill.bootstrap_port))
        assert silent.poll(60_000), "the prefill server never sent the KV"
        with httpx.Client(base_url=prefill.url) as http:
            assert http.post("/abort_request", json={"rid": "pd-1101"}).json()["found"]
            thread.join(60)
            _aborted_at_once(out["r"])
            wait_drained(http)
    finally:
        client.close()
        silent.close()
        context.term()
    assert check_trace(load_trace(str(prefill.trace))) == []


def _registered(srv, room: int) -> bool:
    from tracer.reader import TraceError

    try:
        events = load_trace(str(srv.trace)).events
    except TraceError:  # nothing written yet
        return False
    return any(ev.name == "disagg.bootstrap" and ev.get("room") == room for ev in events)


def test_a_prefill_server_killed_during_bootstrap(decode, tmp_path):
    """The decode half registered at a real prefill server, which is then SIGKILLed: the decode request
    fails with 503 when the transfer timeout passes, its slots come back, and the killed server leaves no
    process."""
    trace = tmp_path / "doomed-prefill"
    doomed = ServeProcess([*FLAGS, "--disaggregation-mode", "prefill", "--disaggregation-bootstrap-port", "0",
                           "--trace", str(trace)]).wait_ready()
    try:
        port = int(re.search(r"; bootstrap port (\d+)", doomed.output()).group(1))
        thread, out = _in_thread(lambda: _generate(decode.url, 901, port))
        _until(lambda: _registered(decode, 901), "the decode half never registered")
        doomed.proc.kill()
        thread.join(120)
        _refused(out["r"], "did not arrive from its prefill server within 5 s")
        with httpx.Client(base_url=decode.url) as http:
            load = wait_drained(http)
            assert load["free_slots"] == load["total_slots"]
        assert doomed.alive_descendants(within=30) == []
        assert check_trace(load_trace(str(decode.trace))) == []
    finally:
        doomed.stop(signal.SIGKILL)


def test_a_decode_server_stopped_then_killed_while_its_kv_is_in_flight(prefill, tmp_path):
    """A real decode server registers for a room, then its scheduler is stopped (SIGSTOP) before the KV
    comes: the prefill server sends the KV, hears no acknowledgement, and fails its request with 503 when
    the transfer timeout passes, freeing what it held; the decode server is then SIGKILLed and leaves no
    process. The prefill server keeps serving, and its trace passes the checks."""
    trace = tmp_path / "doomed-decode"
    doomed = ServeProcess([*FLAGS, "--disaggregation-mode", "decode", "--trace", str(trace)]).wait_ready()
    doomed.trace = trace
    try:
        thread, _ = _in_thread(lambda: _generate(doomed.url, 1001, prefill.bootstrap_port))
        _until(lambda: _registered(doomed, 1001), "the decode half never registered")
        os.kill(doomed.pids["scheduler"], signal.SIGSTOP)
        answer = _generate(prefill.url, 1001, prefill.bootstrap_port)
        _refused(answer, "did not acknowledge the KV of room 1001")
        with httpx.Client(base_url=prefill.url) as http:
            wait_drained(http)
        for pid in (doomed.proc.pid, doomed.pids["scheduler"]):
            os.kill(pid, signal.SIGKILL)
        thread.join(120)
        assert doomed.alive_descendants(within=30) == []
        assert check_trace(load_trace(str(prefill.trace))) == []
    finally:
        doomed.stop(signal.SIGKILL)


# ---- after every fault above: the two servers paired directly still serve ----------------------------------
TEXTS = ["The capital of France is", "List three prime numbers:", "Once upon a time"]
CHAT = [{"role": "user", "content": "What is the capital of China?"}]
GREEDY = {"max_new_tokens": 12, "temperature": 0}


def _to_both(prefill, decode, path: str, body: dict, room: int) -> httpx.Response:
    """One request sent to both halves at once, as SGLang's router sends it (the same bootstrap room, the
    prefill server's bootstrap address): the decode half's answer, once the prefill half's came back."""
    body = {**body, "bootstrap_host": "127.0.0.1", "bootstrap_port": prefill.bootstrap_port,
            "bootstrap_room": room}
    thread, half = _in_thread(lambda: httpx.post(f"{prefill.url}{path}", json=body, timeout=120))
    answer = httpx.post(f"{decode.url}{path}", json=body, timeout=120)
    thread.join(120)
    assert half["r"].status_code == 200, half["r"].text
    return answer


def _stream_chat(prefill, decode, room: int, max_tokens: int, leave_after: int | None = None) -> str:
    """A streamed chat completion on both halves; the decode half's text (or its first `leave_after`
    messages', then the connection is closed as a client that goes away would)."""
    body = {"messages": CHAT, "max_tokens": max_tokens, "temperature": 0, "stream": True, "ignore_eos":
            leave_after is not None, "bootstrap_host": "127.0.0.1", "bootstrap_port": prefill.bootstrap_port,
            "bootstrap_room": room}
    thread, half = _in_thread(lambda: httpx.post(f"{prefill.url}/v1/chat/completions", json=body,
                                                 timeout=120))
    text, messages = "", 0
    with httpx.stream("POST", f"{decode.url}/v1/chat/completions", json=body, timeout=120) as resp:
        assert resp.status_code == 200, resp.read()
        for line in resp.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            assert chunk["id"] == f"chatcmpl-pd-{room}"  # both halves are named after the room
            text += "".join(c["delta"].get("content") or "" for c in chunk["choices"])
            messages += 1
            if leave_after is not None and messages >= leave_after:
                break
    thread.join(120)
    return text


def test_the_two_servers_paired_directly_give_the_engines_greedy_text(prefill, decode, engine):
    """The test does the router's part: several requests at once (batched on both servers), a chat
    completion and a streamed one, each on both halves with its own room, equal the offline Engine's greedy
    text; the decode server alone refuses a request without the router's fields; both drain, the decode
    server holding no slot."""
    from concurrent.futures import ThreadPoolExecutor

    rooms = [5001, 5002, 5003]
    with ThreadPoolExecutor(len(TEXTS)) as pool:
        answers = list(pool.map(lambda text, room: _to_both(
            prefill, decode, "/generate", {"text": text, "sampling_params": GREEDY}, room), TEXTS, rooms))
    assert [a.json()["text"] for a in answers] == [engine.generate(t, GREEDY)["text"] for t in TEXTS]
    assert [a.json()["meta_info"]["id"] for a in answers] == [f"pd-{r}" for r in rooms]
    reference = engine.generate(CHAT, GREEDY)["text"]
    chat = {"messages": CHAT, "max_tokens": GREEDY["max_new_tokens"], "temperature": 0}
    reply = _to_both(prefill, decode, "/v1/chat/completions", chat, 5004).json()
    assert reply["choices"][0]["message"]["content"] == reference and reply["id"] == "chatcmpl-pd-5004"
    assert _stream_chat(prefill, decode, 5005, GREEDY["max_new_tokens"]) == reference

    alone = httpx.post(f"{decode.url}/generate", json={"text": "Hi", "sampling_params": GREEDY}, timeout=60)
    assert alone.status_code == 400
    assert "sglang-router --pd-disaggregation" in alone.json()["error"]["message"]
    with httpx.Client(base_url=prefill.url) as http:
        wait_drained(http)
    with httpx.Client(base_url=decode.url) as http:
        load = wait_drained(http)
    assert load["free_slots"] == load["total_slots"]  # the decode server keeps no tree


def test_a_client_that_leaves_a_pairs_stream_frees_the_decode_servers_slots(prefill, decode):
    """A streamed chat on both halves whose client leaves after three messages: the decode server aborts
    the request and gives all its KV slots back; the prefill half had finished with its one token."""
    assert len(_stream_chat(prefill, decode, 5006, 64, leave_after=3)) > 0
    with httpx.Client(base_url=decode.url) as http:
        load = wait_drained(http)
    assert load["free_slots"] == load["total_slots"]
    trace = load_trace(decode.trace)
    (done,) = [ev for ev in trace.events if ev.name == "sched.finished" and ev.rid == "pd-5006"]
    assert done.get("finish_reason")["type"] == "abort" and done.get("output_len") < 64
    assert check_trace(trace) == []
