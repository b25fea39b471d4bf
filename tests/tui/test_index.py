"""TraceIndex and the lanes: which process holds a request at each event, with which type."""

from __future__ import annotations

from tui.index import TYPE_CHAIN, TraceIndex, streamed_text
from tui.lanes import current_type, lane_states


def test_a_served_request_crosses_every_lane_with_every_type(server_trace):
    index = TraceIndex(server_trace)
    info = index.requests["s1"]
    assert info.prompt_text == "hi there" and info.prompt_ids == [1, 2, 3]
    assert info.endpoint == "/v1/completions"
    lanes = [(h.lane, h.type, h.name) for h in info.handoffs]
    assert lanes[:4] == [("tm", "CompletionRequest", "http.request_received"),
                         ("tm", "GenerateReqInput", "tm.generate_req_input"),
                         ("tm", "TokenizedGenerateReqInput", "tm.tokenized"),
                         ("tm", "TokenizedGenerateReqInput", "ipc.send")]
    assert lanes[4] == ("sched", "TokenizedGenerateReqInput", "ipc.recv")  # the scheduler received it
    send = next(h for h in info.handoffs if h.name == "ipc.send" and h.type == "BatchTokenIDOutput")
    assert (send.lane, send.sending_to) == ("sched", "detok")
    types = [t for t in TYPE_CHAIN if t != "ChatCompletionRequest"]  # this request was a plain completion
    assert set(types) <= {h.type for h in info.handoffs}
    # the lane of each event is the process that emitted it (ipc: the sender, or the receiver on recv)
    procs = {"tm": "tokenizer_manager", "sched": "scheduler", "model": "scheduler", "detok": "detokenizer"}
    for h in info.handoffs:
        assert server_trace.events[h.index].proc == procs[h.lane], h


def test_lanes_light_up_as_the_cursor_moves(server_trace):
    index = TraceIndex(server_trace)
    events = server_trace.events
    first_chunk = next(ev.index for ev in events if ev.name == "http.sse_chunk")
    lit = [ls.lane for ls in lane_states(index, "s1", first_chunk) if ls.lit]
    assert lit == ["tm"] and current_type(index, "s1", first_chunk) == "SSE chunk"
    forward = next(ev.index for ev in events if ev.name == "model.forward" and ev.round == 2)
    states = {ls.lane: ls for ls in lane_states(index, "s1", forward)}
    assert states["model"].lit and states["model"].type == "ForwardBatch"
    # at the same moment the tokenizer manager has already streamed round 1's token
    assert states["tm"].type == "SSE chunk" and states["detok"].type == "BatchStrOutput"
    assert [ls.type for ls in lane_states(index, "s1", 0)] == [None] * 4


def test_token_text_and_streamed_text(engine_trace, server_trace):
    index = TraceIndex(engine_trace)
    assert index.text_of(40) == " one" and index.text_of(10) is None  # prompt tokens are not spelled out
    assert index.round_ends == [ev.index for ev in engine_trace.events if ev.name == "sched.round_end"]
    assert index.round_ends_of("req-b") == index.round_ends[:4]
    info = TraceIndex(server_trace).requests["s1"]
    assert streamed_text(info.chunks, info.chunks[0][0] - 1) == ("", 0)
    assert streamed_text(info.chunks, info.chunks[0][0]) == ("Hello", 1)
    assert streamed_text(info.chunks, len(server_trace.events)) == ("Hello world", 2)
