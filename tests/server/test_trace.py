"""`minisgl serve --trace`: one request can be followed through all three processes, each handoff an
ipc.send/ipc.recv pair with one flow id, and the whole trace passes the tracer's own checks."""

from __future__ import annotations

import time

from tests.server.conftest import wait_drained
from tracer.check import check_trace
from tracer.reader import load_trace


def test_one_streamed_chat_through_every_process(server, client, model, http):
    chunks = list(client.chat.completions.create(model=model, temperature=0, max_tokens=8, stream=True,
                                                 messages=[{"role": "user", "content": "Name a color."}]))
    rid = chunks[0].id.removeprefix("chatcmpl-")
    wait_drained(http)
    trace = load_trace(server.trace_dir)
    evs = trace.by_rid(rid)
    names = [e.name for e in evs]
    every_handoff = {
        "http.request_received", "tm.generate_req_input", "tm.tokenized", "ipc.send", "ipc.recv",
        "sched.req_created", "sched.enqueued", "sched.prefix_matched", "sched.admission", "sched.batch_formed",
        "kv.assigned", "model.forward", "sched.sampled", "sched.output_appended", "sched.finished",
        "cache.inserted", "detok.decoded", "tm.waiter_woken", "http.sse_chunk", "http.response_finished",
    }
    assert every_handoff <= set(names), every_handoff - set(names)
    assert {"kv.alloc", "sched.round_end", "cache.tree"} <= {e.name for e in trace.events}
    first = {n: names.index(n) for n in dict.fromkeys(names)}
    for a, b in [("http.request_received", "tm.generate_req_input"), ("tm.generate_req_input", "tm.tokenized"),
                 ("tm.tokenized", "ipc.send"), ("sched.req_created", "model.forward"),
                 ("detok.decoded", "tm.waiter_woken"), ("tm.waiter_woken", "http.sse_chunk"),
                 ("http.sse_chunk", "http.response_finished")]:
        assert first[a] < first[b], (a, b)
    assert {e.proc for e in evs} == {"tokenizer_manager", "scheduler", "detokenizer"}
    tokenized = next(e for e in evs if e.name == "tm.tokenized")
    assert tokenized.get("type") == "TokenizedGenerateReqInput" and "<|im_start|>user" in tokenized.get("text")

    # the request's hand-over: sent by the tokenizer manager, received by the scheduler, same flow id
    send = next(e for e in evs if e.name == "ipc.send" and e.get("msg") == "TokenizedGenerateReqInput")
    recv = next(e for e in evs if e.name == "ipc.recv" and e.get("msg") == "TokenizedGenerateReqInput")
    assert (send.proc, send.get("dst"), recv.proc, recv.get("src")) == (
        "tokenizer_manager", "scheduler", "scheduler", "tokenizer_manager")
    assert send.flow_id == recv.flow_id and send.flow_dir == "send" and recv.flow_dir == "recv"
    back = [e for e in evs if e.name == "ipc.recv" and e.get("msg") == "BatchStrOutput"]
    assert back and all(e.proc == "tokenizer_manager" and e.get("src") == "detokenizer" for e in back)

    sse = [e for e in evs if e.name == "http.sse_chunk"]
    assert [e.get("index") for e in sse] == list(range(len(sse)))
    assert "".join(e.get("delta") for e in sse) == "".join(c.choices[0].delta.content or "" for c in chunks
                                                             if c.choices)


def _finish_reasons(trace_dir: str, rids: list[str], timeout: float = 60) -> dict[str, str]:
    """rid -> its sched.finished reason type, once the trace has one for every rid (polled, with a deadline)."""
    deadline = time.monotonic() + timeout
    while True:
        trace = load_trace(trace_dir)
        reasons = {ev.rid: ev.get("finish_reason")["type"] for ev in trace.events
                   if ev.name == "sched.finished" and ev.rid in rids}
        if len(reasons) == len(rids):
            return reasons
        if time.monotonic() > deadline:
            raise AssertionError(f"no sched.finished within {timeout} s for {set(rids) - set(reasons)}")
        time.sleep(0.2)


def test_whole_trace_passes_the_tracer_checks(server, client, model, http):
    """Whatever ran before, the trace holds a request of each kind this test makes itself: a chat streamed
    to its end, a plain completion cut by max_tokens, a stream its client leaves after two chunks, and an abort
    of a rid it never received."""
    streamed = list(client.chat.completions.create(model=model, temperature=0, max_tokens=6, stream=True,
                                                   messages=[{"role": "user", "content": "Name a fruit."}]))
    plain = client.completions.create(model=model, prompt="One, two, three,", temperature=0, max_tokens=5)
    with client.completions.create(model=model, prompt="Once upon a time", temperature=0, max_tokens=400,
                                   stream=True, extra_body={"ignore_eos": True}) as left:
        chunks = iter(left)
        first = [next(chunks), next(chunks)]
    # a rid this server never received: not forwarded, so the trace holds no request without a beginning
    assert http.post("/abort_request", json={"rid": "never-received"}).json() == {"rid": "never-received",
                                                                                 "found": False}
    rids = [streamed[0].id.removeprefix("chatcmpl-"), plain.id.removeprefix("cmpl-"),
            first[0].id.removeprefix("cmpl-")]
    reasons = _finish_reasons(server.trace_dir, rids)
    assert [reasons[r] for r in rids] == [streamed[-1].choices[0].finish_reason, "length", "abort"]
    wait_drained(http)
    # the client that left has its text in the trace as a prefix of what it would have got
    assert check_trace(load_trace(server.trace_dir)) == []
