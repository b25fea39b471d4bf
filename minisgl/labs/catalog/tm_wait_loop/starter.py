"""Lab tm_wait_loop (your file). The TokenizerManager's two halves that meet at an asyncio.Event.

The main process runs one asyncio event loop for HTTP and for the engine's answers. A request's coroutine
(`generate_request`, already written) tokenizes the prompt, makes a ReqState with a fresh asyncio.Event,
sends the request to the scheduler and returns at once; then it iterates YOUR `_wait_one_response`, which
sleeps until there is something to hand to the HTTP side. Meanwhile ONE background task, YOUR
`handle_loop`, receives everything the detokenizer process sends back and wakes the right waiter:

    detokenizer --BatchStrOutput--> handle_loop --_handle_batch_output--> ReqState(text, out_list, finished)
                                                                           |  _wake: state.event.set()
    HTTP <--yield {"text", "delta", ...}-- _wait_one_response <------------+  (await state.event.wait())

What is already there (on `self`, from tokenizer_manager.py and tokenizer_manager_core.py):
- `self.recv_from_detokenizer.recv()`: await the next message from the detokenizer (any type);
- `self._handle_batch_output(batch)`: files each rid's piece of a BatchStrOutput into its ReqState
  (text, output_ids, out_list, meta_info, finished; a finished rid leaves `self.rid_to_state`) and calls
  `self._wake(...)`, which sets that state's event (and records `tm.waiter_woken` in the trace);
- `self._handle_reply(reply)`: hands a GetLoadReqOutput / FlushCacheReqOutput to whoever awaits it
  (`get_load()` for /health, `flush_cache()`);
- `self.abort_request(rid, drop_state=True)`: forget the ReqState and send the scheduler an AbortReq;
- `refusal(meta_info)`: the RequestError for a request the scheduler refused, else None;
- `client_disconnected()`: the RequestError (499) for a client that went away.

Neither function emits trace events: the socket wrapper records `ipc.recv`, `_wake` records
`tm.waiter_woken` and the HTTP layer records one `http.sse_chunk` per output you yield. So the trace
sees exactly which messages you handle and what you yield, and when.
"""

from __future__ import annotations

import asyncio  # noqa: F401  (asyncio.wait_for, asyncio.TimeoutError)
import logging
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request

from minisgl.scheduler.io_struct import BatchStrOutput, FlushCacheReqOutput, GetLoadReqOutput  # noqa: F401
from minisgl.server.errors import client_disconnected  # noqa: F401
from minisgl.server.protocol import GenerateReqInput
# (seconds between disconnect checks)
from minisgl.server.tokenizer_manager import DISCONNECT_POLL_S  # noqa: F401
from minisgl.server.tokenizer_manager_core import ReqState, refusal  # noqa: F401

logger = logging.getLogger("minisgl.server.tokenizer_manager")


async def _wait_one_response(self, obj: GenerateReqInput, state: ReqState, request: Request | None
                             ) -> AsyncIterator[dict[str, Any]]:
    """Yield the request's outputs: with obj.stream, one per wake-up; without, exactly one, at the finish.

    Loop:
    1. Sleep on `state.event`, but at most DISCONNECT_POLL_S seconds at a time
       (`await asyncio.wait_for(state.event.wait(), timeout=DISCONNECT_POLL_S)`). On a timeout, if there is
       a `request` and `await request.is_disconnected()`, nobody reads the answer any more:
       `self.abort_request(obj.rid, drop_state=True)` and raise `client_disconnected()` (use
       `raise ... from None`). Otherwise go back to sleep.
    2. Woken. If `state.error` is set (the engine died: `fail_all`), raise it.
    3. Take the pieces filed since the last wake-up (`state.out_list`) and leave an empty list in their
       place; clear the event, so the next wait really waits. Several pieces may have arrived at once.
    4. Not finished and not streaming: nothing to hand out yet, go back to sleep.
    5. The newest piece's meta_info is the one to report. If `refusal(meta)` gives an error (the scheduler
       refused the request), raise it.
    6. Yield one dict:
           {"text": everything so far (state.text),
            "delta": the text of the pieces taken in step 3, joined,
            "output_ids": a copy of state.output_ids,
            "meta_info": meta}
    7. If the request finished, return (the generator ends); else loop.

    This must stay an async generator (an `async def` with a `yield`): the HTTP side iterates it.
    """
    raise NotImplementedError("TODO: _wait_one_response")
    yield  # (never reached) the yield makes this function an async generator, as the engine's is


async def handle_loop(self) -> None:
    """The background task: receive from the detokenizer forever and dispatch each message.

    - a BatchStrOutput: `self._handle_batch_output(msg)` (it files the pieces and wakes the waiters);
    - a GetLoadReqOutput or a FlushCacheReqOutput (a reply to a control message): `self._handle_reply(msg)`;
    - anything else: `logger.error(...)` naming its type, and go on.

    It runs for the server's whole life, so one bad message must never end it: if handling a message
    raises, `logger.exception(...)` and keep receiving. (The server cancels the task at shutdown; let
    that CancelledError through.)
    """
    raise NotImplementedError("TODO: handle_loop")
