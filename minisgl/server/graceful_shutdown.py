"""What `minisgl serve` does with SIGTERM or SIGINT: a graceful shutdown.

    1. the signal      new generation requests get 503 in OpenAI's error format (so does /health, which
                       tells a load balancer to stop sending); the port stays open so they hear why
    2. the grace       running requests have --graceful-shutdown-timeout seconds to finish as usual
    3. its end         every request still running is ended: a stream gets an error event and
                       `data: [DONE]`, a waiting non-streaming client a 503; each is aborted in the
                       scheduler, so its KV slots are freed
    4. the engine idle when the scheduler reports nothing running or waiting, uvicorn stops: the port
                       closes and the last responses are written
    5. the children    launch_server stops the scheduler and detokenizer, removes the socket folder; exit 0

A second signal during 2-4 stops at once, as uvicorn does by default: running streams are cut.

uvicorn by itself closes the port at the first signal and cuts whatever still runs after its
timeout_graceful_shutdown. SGLang keeps serving HTTP while it drains (its /health answers 503) and waits
without a deadline for every request to finish; here the wait has a deadline, and requests that arrive
during it are refused instead of admitted.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable
from typing import Any

import uvicorn

from minisgl.server import tm_trace
from minisgl.server.errors import RequestError, server_shutting_down
from minisgl.server.tokenizer_manager import TokenizerManager

POLL_S = 0.05
IDLE_TIMEOUT_S = 10.0  # after the aborts: how long to wait for the scheduler to let them go


class ShutdownServer(uvicorn.Server):
    """uvicorn's Server, except that the first SIGTERM/SIGINT only records the signal (graceful_shutdown
    does the rest); a second one, or one that comes while the server already stops, is uvicorn's exit at
    once."""

    def __init__(self, config: uvicorn.Config):
        super().__init__(config)
        self.shutdown_signal: int | None = None
        self.ignored_signals: tuple[int, ...] = ()  # a tokenizer worker's SIGINT: the main process decides

    def handle_exit(self, sig: int, frame: Any) -> None:
        if sig in self.ignored_signals:
            return
        if self.shutdown_signal is None and not self.should_exit:
            self.shutdown_signal = sig
            return
        self.should_exit = True
        self.force_exit = True


async def graceful_shutdown(server: ShutdownServer, tokenizer_manager: TokenizerManager, grace_s: float,
                            early_signal: Callable[[], int | None] = lambda: None) -> None:
    """Runs for the server's whole life: waits for the first signal, then steps 1-4 of the module docstring.
    early_signal: one that came after start-up but before uvicorn took the signals over."""
    while server.shutdown_signal is None:
        if server.should_exit:  # stopping for another reason (a child died)
            return
        if server.started and early_signal() is not None:
            server.shutdown_signal = early_signal()
            break
        await asyncio.sleep(POLL_S)
    name = signal.Signals(server.shutdown_signal).name
    running = list(tokenizer_manager.rid_to_state)
    print(f"minisgl serve: {name}: shutting down; new requests get 503; {len(running)} running request(s) "
          f"have {grace_s:g} s to finish (send {name} again to stop at once)", flush=True)
    tokenizer_manager.shutting_down = True
    tm_trace.shutdown(name, grace_s, running)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + grace_s
    while tokenizer_manager.rid_to_state and loop.time() < deadline:
        await asyncio.sleep(POLL_S)
    left = end_running_requests(tokenizer_manager, grace_s)
    if left:
        print(f"minisgl serve: {len(left)} request(s) outlasted the {grace_s:g} s grace period: ended with "
              "503", flush=True)
    await _scheduler_idle(tokenizer_manager)
    server.should_exit = True


def end_running_requests(tokenizer_manager: TokenizerManager, grace_s: float) -> list[str]:
    """Wake every waiter with a 503 and abort its request in the scheduler; return their rids."""
    left = list(tokenizer_manager.rid_to_state.items())
    error = server_shutting_down(f"the server shut down: the request was still running when the {grace_s:g} "
                                 f"s grace period ended")
    for rid, state in left:
        tm_trace.shutdown_aborted(rid, grace_s)
        state.error = error
        state.event.set()
        # the waiter's own cleanup then has nothing to do
        tokenizer_manager.abort_request(rid, drop_state=True)
    return [rid for rid, _ in left]


async def _scheduler_idle(tokenizer_manager: TokenizerManager) -> None:
    """Until the scheduler has nothing running or waiting: every abort was received and every slot freed.
    Its answer travels behind its last outputs (scheduler -> detokenizer -> here), so those arrived too."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + IDLE_TIMEOUT_S
    while loop.time() < deadline:
        try:
            load = await tokenizer_manager.get_load(timeout=max(0.1, deadline - loop.time()))
        except RequestError:  # the engine is gone or does not answer: nothing left to wait for
            return
        if load.num_running_reqs == 0 and load.num_waiting_reqs == 0:
            return
        await asyncio.sleep(POLL_S)
