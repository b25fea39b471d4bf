"""`minisgl serve --trace`: one request can be followed through all three processes, each handoff an
ipc.send/ipc.recv pair with one flow id, and the whole trace passes the tracer's own checks."""

from __future__ import annotations

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


def test_whole_trace_passes_the_tracer_checks(server, http):
    wait_drained(http)
    trace = load_trace(server.trace_dir)
    # clients that left mid-stream (other tests do that) included: their text checks as a prefix
    assert check_trace(trace) == []
