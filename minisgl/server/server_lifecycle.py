"""launch_server: the whole server's life. Start the scheduler and detokenizer processes, wait until they are
ready, serve the app (http_server.py) with uvicorn, watch the children, and clean up however it ends.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import signal
import sys
from typing import Any

import uvicorn

from minisgl.server.graceful_shutdown import ShutdownServer, graceful_shutdown
from minisgl.server.http_server import create_app
from minisgl.server.http_server_args import HttpServerArgs
from minisgl.server.port_args import PortArgs
from minisgl.server.router_endpoints import WorkerInfo, build_worker_info
from minisgl.server.subprocesses import EngineProcesses, StartupError
from minisgl.server.tokenizer_manager import EngineLimits, TokenizerManager
from minisgl.server_args import ServerArgs
from tracer.api import tracer

logger = logging.getLogger(__name__)

WATCHDOG_INTERVAL_S = 0.2
# after a child died: time for waiting clients to receive their 503 before the port closes
DEATH_GRACE_S = 1.0


# ---- the whole server -----------------------------------------------------------------------------
class _StopFlag:
    """SIGINT/SIGTERM only set a flag: start-up polls it, and uvicorn hands its signals back to it on exit,
    so cleanup in launch_server's `finally` always runs. While serving, ShutdownServer takes them over
    (graceful_shutdown.py)."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self._old = {sig: signal.signal(sig, self._handle) for sig in (signal.SIGINT, signal.SIGTERM)}

    def _handle(self, signum: int, frame: Any) -> None:
        self.signum = signum

    def is_set(self) -> bool:
        return self.signum is not None

    def restore(self) -> None:
        for sig, handler in self._old.items():
            signal.signal(sig, handler)


def launch_server(server_args: ServerArgs, http_args: HttpServerArgs) -> int:
    """Start the children, wait until they are ready, serve until a signal or a child's death; clean up.
    Returns the exit status: 0 after a signal, 1 if a child died, 2 if the model could not be loaded."""
    from minisgl.model_loader.loader import load_model_config, load_tokenizer, resolve_model

    logging.basicConfig(level=http_args.log_level.upper(),
                        format="[tokenizer_manager %(process)d] %(levelname)s %(name)s: %(message)s")
    from minisgl.distributed.launch import check_heads, with_dist_init_addr

    source = resolve_model(server_args.model)  # a missing model fails here, before any child starts
    model_config = load_model_config(source)
    check_heads(server_args, model_config.num_attention_heads, model_config.num_key_value_heads)
    server_args = with_dist_init_addr(server_args)  # --tp-size N on one node: the ranks meet on a free port
    if server_args.node_rank > 0:  # only this node's scheduler ranks; node 0 serves HTTP
        from minisgl.distributed.worker_node import launch_worker_node

        stop = _StopFlag()
        try:
            return launch_worker_node(server_args, http_args, stop)
        finally:
            stop.restore()
    served_model_name = http_args.served_model_name or source.name
    trace_dir = http_args.resolve_trace_dir()
    if trace_dir is not None:
        tracer.configure(trace_dir, "tokenizer_manager", http_args.trace_level)
        print(f"minisgl serve: tracing to {trace_dir} (level {http_args.trace_level})", flush=True)
    stop = _StopFlag()
    port_args = PortArgs.init_new()
    processes: EngineProcesses | None = None
    what = ("the scheduler and detokenizer processes" if server_args.dp_size == 1 else
            f"the data parallel controller, {server_args.dp_size} scheduler ranks "
            f"({server_args.load_balance_method}) and the detokenizer processes")
    print(f"minisgl serve: starting {what} (sockets in {port_args.ipc_dir})", flush=True)
    try:
        processes = EngineProcesses(server_args, http_args, port_args)
        tokenizer = load_tokenizer(source)  # while the children load the model
        processes.wait_ready(stop.is_set)
        info = processes.scheduler_info()
        if info.get("bootstrap_port") is not None:  # --disaggregation-bootstrap-port 0: the one it took
            server_args = dataclasses.replace(server_args,
                                              disaggregation_bootstrap_port=info["bootstrap_port"])
        limits = EngineLimits(info["max_req_len"], info["max_total_num_tokens"], info["context_len"],
                              info["vocab_size"])
        worker_info = build_worker_info(server_args, http_args, source, model_config, info, served_model_name,
                                        server_args.dp_size)
        return asyncio.run(_serve(server_args, http_args, port_args, processes, tokenizer, limits,
                                  served_model_name, stop, worker_info))
    except StartupError as e:
        print(f"minisgl serve: error: {e}", file=sys.stderr, flush=True)
        return e.exit_code
    except KeyboardInterrupt:
        return 0
    finally:
        if processes is not None:
            processes.stop()
        port_args.remove()
        tracer.close()
        stop.restore()


async def _serve(server_args: ServerArgs, http_args: HttpServerArgs, port_args: PortArgs,
                 processes: EngineProcesses, tokenizer, limits: EngineLimits, served_model_name: str,
                 stop: _StopFlag, worker_info: WorkerInfo
                 ) -> int:
    if stop.is_set():
        return 0
    metrics = None
    if http_args.enable_metrics:
        from minisgl.server.metrics import TokenizerMetricsCollector

        metrics = TokenizerMetricsCollector(served_model_name)
    tokenizer_manager = TokenizerManager(port_args, tokenizer, limits, metrics, server_args.dp_size)
    tokenizer_manager.disaggregation_mode = server_args.disaggregation_mode  # names PD requests by their room
    tokenizer_manager.allow_auto_truncate = server_args.allow_auto_truncate
    # the chat endpoint's parsers (serving_chat.py)
    tokenizer_manager.tool_call_parser = http_args.tool_call_parser
    tokenizer_manager.reasoning_parser = http_args.reasoning_parser
    app = create_app(tokenizer_manager, served_model_name, http_args.api_key, processes.pids(),
                     http_args.max_request_body_bytes, http_args.allowed_origins, worker_info)
    if metrics is not None:
        from minisgl.server.metrics import add_metrics_route

        add_metrics_route(app, metrics, tokenizer_manager)
    # timeout_graceful_shutdown: after graceful_shutdown ended every request, the time left to write the
    # last responses before uvicorn closes their connections
    config = uvicorn.Config(app, host=http_args.host, port=http_args.port, log_level=http_args.log_level,
                            access_log=http_args.log_level == "debug", timeout_graceful_shutdown=3)
    server = ShutdownServer(config)
    outcome = {"exit_code": 0}
    bootstrap = (f"; bootstrap port {server_args.disaggregation_bootstrap_port}"
                 if server_args.disaggregation_mode == "prefill" else "")  # a PD prefill's, on the ready line
    tasks = [
        asyncio.create_task(tokenizer_manager.handle_loop(), name="handle_loop"),
        asyncio.create_task(_watchdog(processes, tokenizer_manager, server, outcome), name="watchdog"),
        asyncio.create_task(graceful_shutdown(server, tokenizer_manager, http_args.graceful_shutdown_timeout,
                                              lambda: stop.signum), name="graceful_shutdown"),
        asyncio.create_task(_announce_when_ready(server, http_args.host, served_model_name + bootstrap,
                                                 processes),
                            name="announce"),
    ]
    tasks[0].add_done_callback(lambda task: _loop_ended(task, tokenizer_manager, server, outcome))
    try:
        await server.serve()
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


async def _watchdog(processes: EngineProcesses, tokenizer_manager: TokenizerManager, server: uvicorn.Server,
                    outcome: dict[str, int]) -> None:
    """A dead child means no more tokens: answer everyone with 503 at once, then shut down, exit status 1."""
    while not server.should_exit:
        await asyncio.sleep(WATCHDOG_INTERVAL_S)
        dead = processes.first_death()
        if dead is None:
            continue
        reason = dead.death_reason()
        print(f"minisgl serve: error: {reason}; failing every request with 503 and shutting down",
              file=sys.stderr, flush=True)
        tokenizer_manager.fail_all(reason)
        outcome["exit_code"] = 1
        await asyncio.sleep(DEATH_GRACE_S)
        server.should_exit = True
        return


async def _announce_when_ready(server: uvicorn.Server, host: str, served_model_name: str,
                               processes: EngineProcesses) -> None:
    while not server.started:
        await asyncio.sleep(0.05)
    port = server.servers[0].sockets[0].getsockname()[1]
    pids = ", ".join(f"{name} pid {pid}" for name, pid in processes.pids().items())
    print(f"minisgl serve: ready at http://{host}:{port} (model {served_model_name}; {pids})", flush=True)
