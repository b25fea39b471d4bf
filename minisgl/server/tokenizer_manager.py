"""TokenizerManager: the main process's bridge to the engine, on the asyncio event loop.

A request coroutine runs `generate_request`: tokenize (on the tokenizer thread: `run_in_tokenizer_thread`),
`_send_one_request` (send and return at once), then `_wait_one_response` (sleep on its ReqState's event).
One background task, `handle_loop`, receives every BatchStrOutput from the detokenizer, files each rid's
piece into its ReqState and wakes that waiter.
Tokenizing, validating and filing outputs are TokenizerManagerCore's (tokenizer_manager_core.py), which the
offline Engine uses too; this class adds the sockets, the waiters and the length checks against the limits
the scheduler reported.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict, deque
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

import zmq
import zmq.asyncio
from starlette.requests import Request

from minisgl.scheduler.io_struct import (
    AbortReq,
    BatchStrOutput,
    ContinueGenerationReqInput,
    FlushCacheReq,
    FlushCacheReqOutput,
    GetLoadReq,
    GetLoadReqOutput,
    PauseGenerationReqInput,
)
from minisgl.server import tm_trace
from minisgl.server.errors import RequestError, client_disconnected, server_shutting_down, server_unavailable
from minisgl.server.port_args import PortArgs
from minisgl.server.protocol import GenerateReqInput
from minisgl.server.request_validation import validate_one_request
from minisgl.server.tokenizer_manager_core import ReqState, TokenizerManagerCore, refusal
from minisgl.server.zmq_io import AsyncPullReceiver, PushSender

logger = logging.getLogger(__name__)

DISCONNECT_POLL_S = 1.0  # a waiter with nothing new checks this often whether its client is still there
T = TypeVar("T")


@dataclass(frozen=True)
class EngineLimits:
    """What the scheduler process reports when ready, so bad requests are refused before they are sent."""

    max_req_len: int  # prompt + output tokens one request may hold
    max_total_num_tokens: int  # KV cache slots
    context_len: int
    vocab_size: int


class TokenizerManager(TokenizerManagerCore):
    def __init__(self, port_args: PortArgs, tokenizer, limits: EngineLimits, metrics=None, dp_size: int = 1,
                 http_worker_ipc: str | None = None):
        self._context = zmq.Context()
        self._async_context = zmq.asyncio.Context()
        # with --dp-size > 1 the DataParallelController holds the scheduler's input address
        self.dp_size = dp_size
        # "prefill" or "decode": one half of a PD pair (server_lifecycle.py)
        self.disaggregation_mode = "null"
        self.allow_auto_truncate = False  # --allow-auto-truncate: shorten what does not fit, not refuse it
        self.tool_call_parser = self.reasoning_parser = None  # --tool-call-parser, --reasoning-parser
        send_to_scheduler = PushSender(self._context, port_args.scheduler_input_ipc_name,
                                       dst="scheduler" if dp_size == 1 else "data_parallel_controller")
        super().__init__(tokenizer, limits.vocab_size, send_to_scheduler)
        self.limits = limits
        self.dead_reason: str | None = None  # why the engine stopped answering, once a child died
        # a tokenizer worker (--tokenizer-worker-num > 1) receives on an address of its own, named in every
        # request and control message it sends, so that the detokenizer sends the answers back here
        self.http_worker_ipc = http_worker_ipc
        self.recv_from_detokenizer = AsyncPullReceiver(self._async_context,
                                                       http_worker_ipc or port_args.tokenizer_ipc_name,
                                                       src="detokenizer")
        # per reply type, in order: each waiter's future and the replies it has, by dp rank (one per rank)
        self._reply_waiters: dict[type, deque[tuple[asyncio.Future, dict[int, Any]]]] = defaultdict(deque)
        self.metrics = metrics  # a TokenizerMetricsCollector (metrics.py) with --enable-metrics, else None
        self.shutting_down = False  # set by graceful_shutdown.py: new requests are refused with 503
        self._tokenizer_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tokenizer")

    # ---- one request ------------------------------------------------------------------------------
    async def generate_request(self, obj: GenerateReqInput, request: Request | None = None
                               ) -> AsyncIterator[dict[str, Any]]:
        """Yield the request's outputs: every piece if obj.stream, else one final output.

        Every refusal raises RequestError before the first yield, so the caller can still pick a status.
        """
        self._check_alive()
        tm_trace.generate_req_input(obj.rid)
        tokenized = await self.run_in_tokenizer_thread(self._tokenize_one_request, obj)
        self._check_alive()  # a child may have died while the prompt was being tokenized
        validate_one_request(tokenized, self.limits, self.allow_auto_truncate)
        state = self._init_req_state(obj, event=asyncio.Event())
        if self.metrics is not None:
            self.metrics.request_started(obj.rid)
        tokenized.http_worker_ipc = self.http_worker_ipc
        try:
            self._send_one_request(tokenized)
            async for out in self._wait_one_response(obj, state, request):
                yield out
        finally:
            if self.rid_to_state.get(obj.rid) is state:  # cancelled mid-wait: the scheduler must let it go
                self.abort_request(obj.rid, drop_state=True)
            if self.metrics is not None:
                self.metrics.request_ended(obj.rid)

    def _init_req_state(self, obj: GenerateReqInput, event: asyncio.Event | None = None) -> ReqState:
        if self.shutting_down:  # checked where a request starts to run, so none slips in during a shutdown
            raise server_shutting_down()
        return super()._init_req_state(obj, event)

    async def run_in_tokenizer_thread(self, fn: Callable[..., T], *args: Any) -> T:
        """Run `fn` (the chat template and the tokenizer, or parsing a large body) off the event loop, so a
        long prompt never delays another request's tokens or /health: the fast tokenizer releases the GIL
        while it encodes (a 4 MB prompt takes seconds). One thread, like SGLang's single tokenizer worker:
        requests are tokenized and sent in the order they arrived, and no two encodes share the tokenizer
        (transformers may switch its padding and truncation settings per call, which is not thread-safe).
        The price: a huge prompt delays the tokenizing of the requests behind it, never a running one."""
        return await asyncio.get_running_loop().run_in_executor(self._tokenizer_thread, fn, *args)

    async def _wait_one_response(self, obj: GenerateReqInput, state: ReqState, request: Request | None
                                 ) -> AsyncIterator[dict[str, Any]]:
        while True:
            try:
                await asyncio.wait_for(state.event.wait(), timeout=DISCONNECT_POLL_S)
            except asyncio.TimeoutError:
                if request is not None and await request.is_disconnected():
                    self.abort_request(obj.rid, drop_state=True)
                    raise client_disconnected() from None
                continue
            if state.error is not None:
                raise state.error
            pieces, state.out_list = state.out_list, []
            state.event.clear()
            if not (state.finished or obj.stream):
                continue
            meta = pieces[-1]["meta_info"]
            error = refusal(meta)
            if error is not None:
                raise error
            yield {"text": state.text, "delta": "".join(p["delta"] for p in pieces),
                   "output_ids": list(state.output_ids), "meta_info": meta}
            if state.finished:
                return

    # ---- the background receiver ------------------------------------------------------------------
    async def handle_loop(self) -> None:
        """Receive from the detokenizer forever; one bad message is logged, never fatal to the loop."""
        while True:
            recv_obj = await self.recv_from_detokenizer.recv()
            try:
                if isinstance(recv_obj, BatchStrOutput):
                    self._handle_batch_output(recv_obj)
                elif isinstance(recv_obj, (GetLoadReqOutput, FlushCacheReqOutput)):
                    self._handle_reply(recv_obj)
                else:
                    logger.error("tokenizer manager got an unknown message: %s", type(recv_obj).__name__)
            except Exception:
                logger.exception("handling %s failed", type(recv_obj).__name__)

    def _wake(self, rid: str, state: ReqState, delta: str) -> None:
        state.event.set()
        tm_trace.waiter_woken(rid, delta, state.finished)
        if self.metrics is not None:
            self.metrics.output_arrived(rid, state.meta_info, state.finished)

    # ---- control messages -------------------------------------------------------------------------
    def abort_request(self, rid: str, drop_state: bool = False) -> bool:
        """Ask the scheduler to stop `rid`. Its waiter, if kept, still gets the final "abort" output.
        A rid this process does not know is not sent: the scheduler never had it, or was told when its
        waiter went away."""
        known = rid in self.rid_to_state
        if drop_state:
            self.rid_to_state.pop(rid, None)
        if known and self.dead_reason is None:
            self.send_to_scheduler.send(AbortReq(rid=rid))
        return known

    def abort_if_unfinished(self, rid: str) -> None:
        """Run after a streaming response ends, however it ended: a client that left must not keep KV."""
        if rid in self.rid_to_state:
            self.abort_request(rid, drop_state=True)

    async def get_load(self, timeout: float = 10.0) -> GetLoadReqOutput:
        """The load of all ranks added up (with one scheduler: its load)."""
        return combine_replies(await self.get_loads(timeout))

    async def get_loads(self, timeout: float = 10.0) -> list[GetLoadReqOutput]:
        """Each data-parallel rank's load, by rank (one entry without --dp-size)."""
        return await self._ask_scheduler(GetLoadReq(http_worker_ipc=self.http_worker_ipc), GetLoadReqOutput,
                                         timeout)

    async def flush_cache(self, timeout: float = 10.0) -> bool:
        return combine_replies(await self._ask_scheduler(FlushCacheReq(http_worker_ipc=self.http_worker_ipc),
                                                         FlushCacheReqOutput, timeout)).success

    def pause_generation(self, mode: str) -> None:
        """Sent in order with the requests (one socket), so a request sent after it finds the pause."""
        self._check_alive()
        self.send_to_scheduler.send(PauseGenerationReqInput(mode=mode))

    def continue_generation(self) -> None:
        self._check_alive()
        self.send_to_scheduler.send(ContinueGenerationReqInput())

    async def _ask_scheduler(self, req: Any, reply_type: type, timeout: float) -> Any:
        """Send a control message and await its replies, one per data-parallel rank, by rank; replies of one
        type come back in order (FIFO) from each rank."""
        self._check_alive()
        future = asyncio.get_running_loop().create_future()
        waiters = self._reply_waiters[reply_type]
        waiter = (future, {})
        waiters.append(waiter)
        self.send_to_scheduler.send(req)
        try:
            return await asyncio.wait_for(future, timeout)
        except asyncio.TimeoutError:
            raise RequestError(f"the scheduler did not answer {type(req).__name__} within {timeout:.0f} s",
                               status_code=503, err_type="server_error") from None
        finally:
            if waiter in waiters:
                waiters.remove(waiter)

    def _handle_reply(self, reply: Any) -> None:
        """File a reply with the oldest waiter that lacks this rank's; wake it once every rank answered."""
        waiters = self._reply_waiters[type(reply)]
        for future, replies in list(waiters):
            if future.done():
                waiters.remove((future, replies))
                continue
            if reply.dp_rank in replies:
                continue
            replies[reply.dp_rank] = reply
            if len(replies) == self.dp_size:
                waiters.remove((future, replies))
                future.set_result([replies[rank] for rank in sorted(replies)])
            return

    # ---- when a child process dies ----------------------------------------------------------------
    def _check_alive(self) -> None:
        if self.dead_reason is not None:
            raise server_unavailable(self.dead_reason)

    def fail_all(self, reason: str) -> None:
        """Wake every waiter with a 503: nothing more will come from the engine."""
        self.dead_reason = reason
        error = server_unavailable(reason)
        for state in self.rid_to_state.values():
            state.error = error
            state.event.set()
        self.rid_to_state.clear()
        for waiters in self._reply_waiters.values():
            for future, _ in waiters:
                if not future.done():
                    future.set_exception(error)
            waiters.clear()

    def close(self) -> None:
        self._tokenizer_thread.shutdown(wait=False, cancel_futures=True)
        self.send_to_scheduler.close()
        self.recv_from_detokenizer.close()
        self._context.term()
        self._async_context.term()



def combine_replies(replies: list[Any]) -> Any:
    """One reply from every rank's: loads add up (the server's queues and KV slots over all ranks), a cache
    flush succeeded if every rank flushed. With one rank, its reply as it is."""
    if len(replies) == 1:
        return replies[0]
    if isinstance(replies[0], GetLoadReqOutput):
        fields = ("num_running_reqs", "num_waiting_reqs", "free_slots", "cached_slots", "total_slots")
        return GetLoadReqOutput(**{f: sum(getattr(r, f) for r in replies) for f in fields}, dp_rank=-1)
    return FlushCacheReqOutput(success=all(r.success for r in replies), dp_rank=-1)
