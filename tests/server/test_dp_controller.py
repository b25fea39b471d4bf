"""The DataParallelController's dispatching on real ZeroMQ sockets, without a model: the test binds each
rank's input address as a scheduler rank would and plays the TokenizerManager and the ranks' load reports.
round_robin goes in turn, shortest_queue to the rank with the fewest requests (reported, plus those sent
since), a routed_dp_rank always wins, control messages reach every rank; the flags refuse what is not built."""

from __future__ import annotations

import time

import pytest
import zmq

from minisgl.scheduler.io_struct import (
    AbortReq,
    FlushCacheReq,
    FlushCacheReqOutput,
    GetLoadReq,
    GetLoadReqOutput,
    TokenizedGenerateReqInput,
)
from minisgl.server.data_parallel_controller import DataParallelController
from minisgl.server.port_args import PortArgs
from minisgl.server.tokenizer_manager import combine_replies
from minisgl.server.zmq_io import PullReceiver, PushSender
from minisgl.server_args import ServerArgs


@pytest.fixture
def wired(request):
    """(controller, ranks' receivers, the ranks' load sender) for 3 ranks and the method given by param."""
    port_args = PortArgs.init_new()
    context = zmq.Context()
    ranks = [PullReceiver(context, port_args.for_dp_rank(r).scheduler_input_ipc_name, src="dp") for r in range(3)]
    controller = DataParallelController(ServerArgs(dp_size=3, load_balance_method=request.param), port_args, context)
    load_sender = PushSender(context, port_args.dp_controller_load_ipc_name, dst="data_parallel_controller")
    yield controller, ranks, load_sender
    for sock in [*ranks, load_sender, controller.recv_from_tokenizer, controller.recv_load, *controller.workers]:
        sock.close()
    context.term()
    port_args.remove()


def _req(rid: str, rank: int | None = None) -> TokenizedGenerateReqInput:
    return TokenizedGenerateReqInput(rid=rid, input_text=None, input_ids=[1, 2, 3], sampling_params={},
                                     routed_dp_rank=rank)


def _received(ranks: list[PullReceiver], expected: int) -> list[tuple[str, int]]:
    """(rid, or the message type when it has none; the rank that got it), once `expected` arrived."""
    out: list[tuple[str, int]] = []
    deadline = time.monotonic() + 60
    while len(out) < expected and time.monotonic() < deadline:
        for r, sock in enumerate(ranks):
            out += [(getattr(msg, "rid", type(msg).__name__), r) for msg in sock.recv_all(block=False)]
        time.sleep(0.02)
    return out


@pytest.mark.parametrize("wired", ["round_robin"], indirect=True)
def test_round_robin_goes_in_turn_and_a_routed_rank_wins(wired):
    controller, ranks, _ = wired
    for i in range(4):
        controller.process_input_request(_req(f"r{i}"))
    controller.process_input_request(_req("pinned", rank=2))
    controller.process_input_request(_req("r4"))
    assert dict(_received(ranks, 6)) == {"r0": 0, "r1": 1, "r2": 2, "r3": 0, "pinned": 2, "r4": 1}


@pytest.mark.parametrize("wired", ["shortest_queue"], indirect=True)
def test_shortest_queue_goes_to_the_least_loaded_rank(wired):
    controller, ranks, load_sender = wired
    for rank, n in ((0, 5), (1, 1), (2, 3)):
        load_sender.send(GetLoadReqOutput(num_running_reqs=n, num_waiting_reqs=0, free_slots=0, cached_slots=0,
                                          total_slots=0, dp_rank=rank))
    deadline = time.monotonic() + 60
    while controller.num_reqs != [5, 1, 3] and time.monotonic() < deadline:
        for load in controller.recv_load.recv_all(block=True):
            controller.handle_load_update(load)
    assert controller.num_reqs == [5, 1, 3]
    # rank 1 (1, 2, then 3 = rank 2's: a tie goes to the lower rank), then rank 2 (3 against rank 1's 4)
    for i in range(4):
        controller.process_input_request(_req(f"q{i}"))
    assert dict(_received(ranks, 4)) == {"q0": 1, "q1": 1, "q2": 1, "q3": 2}
    assert controller.num_reqs == [5, 4, 4]


@pytest.mark.parametrize("wired", ["round_robin"], indirect=True)
def test_control_messages_reach_every_rank(wired):
    controller, ranks, _ = wired
    for msg in (AbortReq(rid="x"), FlushCacheReq(), GetLoadReq()):
        controller.process_input_request(msg)
    assert sorted(_received(ranks, 9)) == sorted((name, r) for name in ("x", "FlushCacheReq", "GetLoadReq")
                                                 for r in range(3))


def test_replies_of_every_rank_combine_into_one():
    loads = [GetLoadReqOutput(num_running_reqs=1, num_waiting_reqs=2, free_slots=10, cached_slots=4, total_slots=16,
                              dp_rank=0),
             GetLoadReqOutput(num_running_reqs=3, num_waiting_reqs=0, free_slots=12, cached_slots=0, total_slots=16,
                              dp_rank=1)]
    combined = combine_replies(loads)
    assert (combined.num_running_reqs, combined.num_waiting_reqs, combined.free_slots, combined.cached_slots,
            combined.total_slots) == (4, 2, 22, 4, 32)
    replies = [FlushCacheReqOutput(success=True, dp_rank=0), FlushCacheReqOutput(success=False, dp_rank=1)]
    assert combine_replies(replies).success is False
    assert combine_replies(loads[:1]) is loads[0]


@pytest.mark.parametrize(("flags", "words"), [
    ({"dp_size": 0}, "--dp-size must be >= 1"),
    ({"load_balance_method": "minimum_tokens"}, "not implemented in minisgl"),
    ({"load_balance_method": "random"}, "must be round_robin or shortest_queue"),
])
def test_bad_flags_are_refused(flags, words):
    with pytest.raises(ValueError, match=words):
        ServerArgs(**flags).validate()


def test_the_offline_engine_refuses_dp():
    from minisgl.entrypoints.engine import Engine

    with pytest.raises(ValueError, match="needs `minisgl serve`"):
        Engine(dp_size=2)


@pytest.mark.parametrize(("headers", "body", "rank_or_error"), [
    ({}, {}, None),  # no choice: the controller picks
    ({}, {"routed_dp_rank": 1}, 1),
    ({}, {"data_parallel_rank": 0}, 0),  # the older name
    ({"X-Data-Parallel-Rank": "0"}, {"routed_dp_rank": 1}, 0),  # the header wins over the body
    ({}, {"routed_dp_rank": 2}, ("routed_dp_rank", "`routed_dp_rank` asks for rank 2, but this server runs 2 "
                                                   "data-parallel ranks (0 to 1), so rank 2 does not exist")),
    ({}, {"data_parallel_rank": 5}, ("data_parallel_rank", "asks for rank 5")),
    ({"X-Data-Parallel-Rank": "2"}, {"routed_dp_rank": 0},
     (None, "the X-Data-Parallel-Rank header asks for rank 2")),
    ({"X-Data-Parallel-Rank": "one"}, {}, (None, "must be an integer, not 'one'")),
])
def test_the_chosen_rank_is_read_header_first_and_checked_against_dp_size(headers, body, rank_or_error):
    """What the HTTP server makes of a chosen rank with two ranks (the data_parallel scenario runs the header
    and the body end to end; the one-rank server's refusal is in test_fields_and_logprobs.py)."""
    from starlette.requests import Request

    from minisgl.server.errors import RequestError
    from minisgl.server.protocol_chat import ChatCompletionRequest
    from minisgl.server.serving_base import extract_routed_dp_rank

    request = ChatCompletionRequest(messages=[{"role": "user", "content": "Hi"}], **body)
    raw = Request({"type": "http", "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()]})
    if not isinstance(rank_or_error, tuple):
        assert extract_routed_dp_rank(request, raw, dp_size=2) == rank_or_error
        return
    with pytest.raises(RequestError) as refused:
        extract_routed_dp_rank(request, raw, dp_size=2)
    param, words = rank_or_error
    assert refused.value.param == param and words in str(refused.value)
