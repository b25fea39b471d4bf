"""Unit tests of the tm_wait_loop lab: your handle_loop and _wait_one_response under `minisgl lab test
tm_wait_loop`, else the engine's.

A real TokenizerManager on real ZeroMQ sockets (PortArgs.init_new()); the tests play the other processes with
the engine's own socket wrappers: a PULL socket where the scheduler would receive (it sees the requests and
the AbortReqs) and a PUSH socket where the detokenizer would send BatchStrOutputs and replies. No model.
"""

import asyncio
import contextlib
import gc

import pytest
import zmq
from starlette.requests import Request

from minisgl.labs.testing import component

component("tm_wait_loop")  # installs your two functions on TokenizerManager (under `minisgl lab test`)

from minisgl.scheduler.io_struct import (
    AbortReq,
    BatchStrOutput,
    GetLoadReq,
    GetLoadReqOutput,
    TokenizedGenerateReqInput,
)
from minisgl.server.errors import RequestError
from minisgl.server.port_args import PortArgs
from minisgl.server.protocol import GenerateReqInput
from minisgl.server.tokenizer_manager import EngineLimits, TokenizerManager
from minisgl.server.zmq_io import PullReceiver, PushSender

WAIT_S = 1.5  # how long a test waits for something your code should do at once


class Server:
    """A TokenizerManager (with its handle_loop task running, if `loop`), and the scheduler's and the
    detokenizer's ends of its sockets."""

    def __init__(self, loop: bool):
        self.port_args = PortArgs.init_new()
        self.context = zmq.Context()
        self.scheduler = PullReceiver(self.context, self.port_args.scheduler_input_ipc_name,
                                      src="tokenizer_manager")
        self.tm = TokenizerManager(self.port_args, tokenizer=None, limits=EngineLimits(64, 256, 64, 1000))
        self.detokenizer = PushSender(self.context, self.port_args.tokenizer_ipc_name,
                                      dst="tokenizer_manager")
        self.loop_task = asyncio.create_task(self.tm.handle_loop()) if loop else None
        self.to_scheduler: list = []

    def send(self, msg) -> None:
        """What the detokenizer process does: one message to the TokenizerManager (handle_loop receives
        it)."""
        self.detokenizer.send(msg)

    def deliver(self, batch: BatchStrOutput) -> None:
        """What handle_loop does with a BatchStrOutput, without the socket: file the pieces, wake the waiters.
        The tests of _wait_one_response use it, so they do not depend on your handle_loop."""
        self.tm._handle_batch_output(batch)

    async def until(self, what: str, cond) -> None:
        """Wait (at most WAIT_S) until cond() holds; fail at once if handle_loop stopped."""
        deadline = asyncio.get_running_loop().time() + WAIT_S
        while not cond():
            if self.loop_task is not None and self.loop_task.done():
                exc = None if self.loop_task.cancelled() else self.loop_task.exception()
                raise AssertionError(f"handle_loop stopped ({exc!r}) while waiting for: {what}")
            if asyncio.get_running_loop().time() > deadline:
                raise AssertionError(f"after {WAIT_S} s, still waiting for: {what}")
            await asyncio.sleep(0.01)

    async def scheduler_gets(self, kind: type):
        """The next message of `kind` the scheduler receives."""
        def arrived():
            self.to_scheduler += self.scheduler.recv_all()
            return any(isinstance(m, kind) for m in self.to_scheduler)

        await self.until(f"the scheduler to receive a {kind.__name__}", arrived)
        msg = next(m for m in self.to_scheduler if isinstance(m, kind))
        self.to_scheduler.remove(msg)
        return msg

    async def close(self) -> None:
        if self.loop_task is not None:
            self.loop_task.cancel()
            with contextlib.suppress(BaseException):
                await self.loop_task
        self.tm.close()
        self.scheduler.close()
        self.detokenizer.close()
        self.context.term()
        self.port_args.remove()


def run(test, loop=True):
    """Run `await test(server)` on a fresh event loop, with a fresh server, and close everything after."""
    async def main():
        server = Server(loop)
        try:
            await test(server)
        finally:
            await server.close()

    try:
        asyncio.run(main())
    finally:
        gc.collect()  # what the test left (generators, frames) goes now, not while pytest renders a failure


def piece(rid, text, ids, finish=None, completion=1):
    """One rid's piece of a BatchStrOutput, as the detokenizer sends it."""
    return BatchStrOutput(rids=[rid], output_strs=[text], output_ids=[ids], finished_reasons=[finish],
                          prompt_tokens=[3], completion_tokens=[completion], cached_tokens=[0])


def request(rid, stream=True):
    return GenerateReqInput(rid=rid, input_ids=[5, 6, 7], sampling_params={"max_new_tokens": 4},
                            stream=stream)


def state_of(tm, rid, stream=True):
    obj = request(rid, stream)
    return obj, tm._init_req_state(obj, event=asyncio.Event())


async def still_waiting(task) -> bool:
    await asyncio.sleep(0.1)
    return not task.done()


STOP = {"type": "stop", "matched": 2}


# ---- handle_loop ------------------------------------------------------------------------------------

def test_handle_loop_files_a_batch_and_wakes_each_waiter():
    async def test(s):
        _, a = state_of(s.tm, "A")
        _, b = state_of(s.tm, "B")
        s.send(BatchStrOutput(rids=["A", "B"], output_strs=["Hi", "Yo"], output_ids=[[11], [21]],
                              finished_reasons=[STOP, None], prompt_tokens=[3, 3], completion_tokens=[1, 1],
                              cached_tokens=[0, 0]))
        await s.until("both waiters to be woken", lambda: a.event.is_set() and b.event.is_set())
        assert (a.text, a.output_ids, a.finished) == ("Hi", [11], True)
        assert (b.text, b.output_ids, b.finished) == ("Yo", [21], False)
        assert [p["delta"] for p in b.out_list] == ["Yo"]
        assert "A" not in s.tm.rid_to_state and "B" in s.tm.rid_to_state  # a finished request is forgotten

    run(test)


def test_handle_loop_hands_replies_to_whoever_asked():
    async def test(s):
        ask = asyncio.create_task(s.tm.get_load(timeout=WAIT_S))
        await s.scheduler_gets(GetLoadReq)
        reply = GetLoadReqOutput(num_running_reqs=2, num_waiting_reqs=1, free_slots=100, cached_slots=5,
                                 total_slots=256)
        s.send(reply)
        assert await ask == reply

    run(test)


def test_handle_loop_survives_bad_messages():
    async def test(s):
        _, a = state_of(s.tm, "A")
        s.send("not a message the tokenizer manager knows")
        broken = BatchStrOutput(rids=["A"], output_strs=[], output_ids=[], finished_reasons=[],
                                prompt_tokens=[], completion_tokens=[], cached_tokens=[])
        s.send(broken)  # handling it raises IndexError
        s.send(piece("A", "ok", [11]))
        await s.until("the good message after two bad ones to wake A", lambda: a.event.is_set())
        assert a.text == "ok" and not s.loop_task.done()

    run(test)


# ---- _wait_one_response -----------------------------------------------------------------------------

def test_a_stream_yields_each_piece_as_it_comes():
    async def test(s):
        outputs = s.tm.generate_request(request("A"))
        first = asyncio.create_task(outputs.__anext__())
        sent = await s.scheduler_gets(TokenizedGenerateReqInput)
        assert sent.rid == "A"
        s.send(piece("A", "Hel", [11]))
        out = await asyncio.wait_for(first, WAIT_S)
        assert (out["text"], out["delta"], out["output_ids"]) == ("Hel", "Hel", [11])
        assert out["meta_info"]["finish_reason"] is None
        second = asyncio.create_task(outputs.__anext__())
        assert await still_waiting(second), (
            "after a piece is taken, the next wait must wait (clear the event)")
        s.send(piece("A", "lo", [12], finish=STOP, completion=2))
        out = await asyncio.wait_for(second, WAIT_S)
        assert (out["text"], out["delta"], out["output_ids"]) == ("Hello", "lo", [11, 12])
        assert out["meta_info"]["finish_reason"] == STOP and out["meta_info"]["completion_tokens"] == 2
        with pytest.raises(StopAsyncIteration):  # a finished request has nothing more to give
            await asyncio.wait_for(outputs.__anext__(), WAIT_S)
        assert "A" not in s.tm.rid_to_state

    run(test)


def test_pieces_that_arrive_together_come_out_as_one():
    async def test(s):
        obj, a = state_of(s.tm, "A")
        s.deliver(piece("A", "Hel", [11]))
        s.deliver(piece("A", "lo", [12]))
        out = await asyncio.wait_for(s.tm._wait_one_response(obj, a, None).__anext__(), WAIT_S)
        assert (out["text"], out["delta"], out["output_ids"]) == ("Hello", "Hello", [11, 12])
        assert a.out_list == [] and not a.event.is_set()  # taken, and the event cleared

    run(test, loop=False)


def test_without_stream_one_output_at_the_finish():
    async def test(s):
        obj, a = state_of(s.tm, "A", stream=False)
        outputs = s.tm._wait_one_response(obj, a, None)
        task = asyncio.create_task(outputs.__anext__())
        s.deliver(piece("A", "Hel", [11]))
        s.deliver(piece("A", "lo", [12], completion=2))
        assert await still_waiting(task), "without stream, nothing comes out before the finish"
        s.deliver(piece("A", "!", [13], finish=STOP, completion=3))
        out = await asyncio.wait_for(task, WAIT_S)
        assert (out["text"], out["output_ids"]) == ("Hello!", [11, 12, 13])
        assert out["meta_info"]["finish_reason"] == STOP and out["meta_info"]["completion_tokens"] == 3
        with pytest.raises(StopAsyncIteration):
            await asyncio.wait_for(outputs.__anext__(), WAIT_S)

    run(test, loop=False)


def test_a_refused_request_raises_its_error():
    async def test(s):
        obj, a = state_of(s.tm, "A")
        refused = {"type": "abort", "message": "the prompt is too long", "status_code": 400}
        s.deliver(piece("A", "", [], finish=refused, completion=0))
        with pytest.raises(RequestError) as e:
            await asyncio.wait_for(s.tm._wait_one_response(obj, a, None).__anext__(), WAIT_S)
        assert e.value.status_code == 400 and "too long" in e.value.message

    run(test, loop=False)


def test_a_dead_engine_wakes_the_waiter_with_its_error():
    async def test(s):
        obj, a = state_of(s.tm, "A")
        task = asyncio.create_task(s.tm._wait_one_response(obj, a, None).__anext__())
        assert await still_waiting(task), "with nothing filed, the waiter must wait"
        s.tm.fail_all("the scheduler process died")
        with pytest.raises(RequestError) as e:
            await asyncio.wait_for(task, WAIT_S)
        assert e.value.status_code == 503 and "scheduler process died" in e.value.message

    run(test, loop=False)


def test_a_client_that_left_is_aborted():
    """Takes about one DISCONNECT_POLL_S: the waiter notices on its first timeout."""
    async def gone():
        return {"type": "http.disconnect"}

    async def test(s):
        obj, a = state_of(s.tm, "A")
        client = Request({"type": "http", "method": "POST", "path": "/", "headers": []}, gone)
        with pytest.raises(RequestError) as e:
            await asyncio.wait_for(s.tm._wait_one_response(obj, a, client).__anext__(), 1 + 2 * WAIT_S)
        assert e.value.status_code == 499
        assert (await s.scheduler_gets(AbortReq)).rid == "A"
        assert "A" not in s.tm.rid_to_state  # its state is dropped: late outputs for A wake nobody

    run(test, loop=False)
