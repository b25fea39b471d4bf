"""serve_http: one HTTP server's life on the event loop: a TokenizerManager, the app (http_server.py) under
uvicorn, and the tasks beside it (the receive loop, the watchdog, the graceful shutdown, the ready line).

The main process runs it with one TokenizerManager (server_lifecycle.py); with --tokenizer-worker-num N > 1
each tokenizer worker process runs it on the listening socket the main process bound
(tokenizer_worker.py). What differs is told by `watch` (a child's death, as a reason) and `announce`.
"""

from __future__ import annotations

import asyncio
import socket
import sys
from collections.abc import Callable
from dataclasses import dataclass, field

import uvicorn

from minisgl.server.graceful_shutdown import ShutdownServer, graceful_shutdown
from minisgl.server.http_server import create_app
from minisgl.server.http_server_args import HttpServerArgs
from minisgl.server.port_args import PortArgs
from minisgl.server.router_endpoints import WorkerInfo
from minisgl.server.tokenizer_manager import EngineLimits, TokenizerManager
from minisgl.server_args import ServerArgs

WATCHDOG_INTERVAL_S = 0.2
# after a child died: time for waiting clients to receive their 503 before the port closes
DEATH_GRACE_S = 1.0


@dataclass
class ServeSpec:
    """What one HTTP server needs, besides the tokenizer: the engine's facts the main process learned."""

    server_args: ServerArgs
    http_args: HttpServerArgs
    port_args: PortArgs
    limits: EngineLimits
    served_model_name: str
    worker_info: WorkerInfo
    pids: dict[str, int | None] = field(default_factory=dict)  # every process of the server, by name


async def serve_http(spec: ServeSpec, tokenizer, early_signal: Callable[[], int | None],
                     watch: Callable[[], str | None], announce: Callable[[int], None],
                     http_worker_ipc: str | None = None, sockets: list[socket.socket] | None = None,
                     ignored_signals: tuple[int, ...] = ()) -> int:
    """Serve until a signal (exit status 0) or a death `watch` reports (1). `announce` gets the bound port
    once uvicorn serves; `ignored_signals`: a tokenizer worker leaves Ctrl+C to the main process."""
    server_args, http_args = spec.server_args, spec.http_args
    if early_signal() is not None:
        return 0
    metrics = None
    if http_args.enable_metrics:
        from minisgl.server.metrics import TokenizerMetricsCollector

        metrics = TokenizerMetricsCollector(spec.served_model_name)
    tokenizer_manager = TokenizerManager(spec.port_args, tokenizer, spec.limits, metrics, server_args.dp_size,
                                         http_worker_ipc)
    tokenizer_manager.disaggregation_mode = server_args.disaggregation_mode  # names PD requests by their room
    tokenizer_manager.allow_auto_truncate = server_args.allow_auto_truncate
    # the chat endpoint's parsers (serving_chat.py)
    tokenizer_manager.tool_call_parser = http_args.tool_call_parser
    tokenizer_manager.reasoning_parser = http_args.reasoning_parser
    app = create_app(tokenizer_manager, spec.served_model_name, http_args.api_key, spec.pids,
                     http_args.max_request_body_bytes, http_args.allowed_origins, spec.worker_info)
    if metrics is not None:
        from minisgl.server.metrics import add_metrics_route

        add_metrics_route(app, metrics, tokenizer_manager)
    # timeout_graceful_shutdown: after graceful_shutdown ended every request, the time left to write the
    # last responses before uvicorn closes their connections
    config = uvicorn.Config(app, host=http_args.host, port=http_args.port, log_level=http_args.log_level,
                            access_log=http_args.log_level == "debug", timeout_graceful_shutdown=3)
    server = ShutdownServer(config)
    server.ignored_signals = ignored_signals
    outcome = {"exit_code": 0}
    tasks = [
        asyncio.create_task(tokenizer_manager.handle_loop(), name="handle_loop"),
        asyncio.create_task(_watchdog(watch, tokenizer_manager, server, outcome), name="watchdog"),
        asyncio.create_task(graceful_shutdown(server, tokenizer_manager, http_args.graceful_shutdown_timeout,
                                              early_signal), name="graceful_shutdown"),
        asyncio.create_task(_announce_when_ready(server, announce), name="announce"),
    ]
    tasks[0].add_done_callback(lambda task: _loop_ended(task, tokenizer_manager, server, outcome))
    try:
        await server.serve(sockets=sockets)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        tokenizer_manager.close()
    return outcome["exit_code"]


def _loop_ended(task: asyncio.Task, tokenizer_manager: TokenizerManager, server: uvicorn.Server,
                outcome: dict[str, int]) -> None:
    """handle_loop runs until shutdown; if it stops on its own no reply can reach a waiter again: answer
    everyone with 503 and shut down (exit status 1), instead of letting each request wait for its timeout."""
    if task.cancelled() or server.should_exit:
        return
    exc = task.exception()
    reason = "the TokenizerManager's handle_loop stopped" + (f": {type(exc).__name__}: {exc}" if exc else "")
    print(f"minisgl serve: error: {reason}; failing every request with 503 and shutting down",
          file=sys.stderr, flush=True)
    tokenizer_manager.fail_all(reason)
    outcome["exit_code"] = 1
    server.should_exit = True


async def _watchdog(watch: Callable[[], str | None], tokenizer_manager: TokenizerManager,
                    server: uvicorn.Server, outcome: dict[str, int]) -> None:
    """A dead child means no more tokens: answer everyone with 503 at once, then shut down, exit status 1."""
    while not server.should_exit:
        await asyncio.sleep(WATCHDOG_INTERVAL_S)
        reason = watch()
        if reason is None:
            continue
        print(f"minisgl serve: error: {reason}; failing every request with 503 and shutting down",
              file=sys.stderr, flush=True)
        tokenizer_manager.fail_all(reason)
        outcome["exit_code"] = 1
        await asyncio.sleep(DEATH_GRACE_S)
        server.should_exit = True
        return


def ready_line(spec: ServeSpec, port: int, extra: str = "") -> str:
    """The line a launcher waits for: where, which model, and every process's pid."""
    pids = ", ".join(f"{name} pid {pid}" for name, pid in spec.pids.items())
    return (f"minisgl serve: ready at http://{spec.http_args.host}:{port} "
            f"(model {spec.served_model_name}{extra}; {pids})")


async def _announce_when_ready(server: uvicorn.Server, announce: Callable[[int], None]) -> None:
    while not server.started:
        await asyncio.sleep(0.05)
    announce(server.servers[0].sockets[0].getsockname()[1])
