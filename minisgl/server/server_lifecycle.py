"""launch_server: the whole server's life. Start the scheduler and detokenizer processes, wait until they are
ready, serve the app (serve_http.py), watch the children, and clean up however it ends. With
--tokenizer-worker-num N > 1 the app runs in N tokenizer worker processes instead (multi_tokenizer.py).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import signal
import sys
from typing import Any

from minisgl.server.http_server_args import HttpServerArgs
from minisgl.server.port_args import PortArgs
from minisgl.server.router_endpoints import build_worker_info
from minisgl.server.serve_http import ServeSpec, ready_line, serve_http
from minisgl.server.subprocesses import EngineProcesses, StartupError
from minisgl.server.tokenizer_manager import EngineLimits
from minisgl.server_args import ServerArgs
from tracer.api import tracer

logger = logging.getLogger(__name__)


# ---- the whole server -----------------------------------------------------------------------------
class _StopFlag:
    """SIGINT/SIGTERM only set a flag: start-up polls it, and uvicorn hands its signals back to it on exit,
    so cleanup in launch_server's `finally` always runs. While serving, ShutdownServer takes them over
    (graceful_shutdown.py)."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self.count = 0  # how many came: with tokenizer workers, a second one is passed on too
        self._old = {sig: signal.signal(sig, self._handle) for sig in (signal.SIGINT, signal.SIGTERM)}

    def _handle(self, signum: int, frame: Any) -> None:
        self.signum = self.signum or signum
        self.count += 1

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
    # --tp-size N on one node: the ranks meet on a port bound here and handed to rank 0
    server_args, dist_socket = with_dist_init_addr(server_args)
    if server_args.nnodes > 1 and server_args.node_rank == 0:  # what the other nodes need to be told
        print(f"minisgl serve: node 0 of {server_args.nnodes}: the ranks meet at "
              f"{server_args.dist_init_addr}", flush=True)
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
        if http_args.tokenizer_worker_num == 1:  # else each worker traces as a tokenizer_manager
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
        processes = EngineProcesses(server_args, http_args, port_args, dist_socket)
        # while the children load the model (tokenizer workers load their own)
        tokenizer = load_tokenizer(source) if http_args.tokenizer_worker_num == 1 else None
        processes.wait_ready(stop.is_set)
        info = processes.scheduler_info()
        if info.get("bootstrap_port") is not None:  # --disaggregation-bootstrap-port 0: the one it took
            server_args = dataclasses.replace(server_args,
                                              disaggregation_bootstrap_port=info["bootstrap_port"])
        limits = EngineLimits(info["max_req_len"], info["max_total_num_tokens"], info["context_len"],
                              info["vocab_size"])
        worker_info = build_worker_info(server_args, http_args, source, model_config, info, served_model_name,
                                        server_args.dp_size)
        spec = ServeSpec(server_args, http_args, port_args, limits, served_model_name, worker_info,
                         processes.pids())
        if http_args.tokenizer_worker_num > 1:
            from minisgl.server.multi_tokenizer import serve_with_tokenizer_workers

            return serve_with_tokenizer_workers(spec, processes, stop)
        return asyncio.run(_serve(spec, processes, tokenizer, stop))
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


async def _serve(spec: ServeSpec, processes: EngineProcesses, tokenizer, stop: _StopFlag) -> int:
    """One TokenizerManager in this process, watching the engine's children."""
    args = spec.server_args
    bootstrap = (f"; bootstrap port {args.disaggregation_bootstrap_port}"
                 if args.disaggregation_mode == "prefill" else "")  # a PD prefill's, on the ready line

    def watch() -> str | None:
        dead = processes.first_death()
        return None if dead is None else dead.death_reason()

    def announce(port: int) -> None:
        print(ready_line(spec, port, bootstrap), flush=True)

    return await serve_http(spec, tokenizer, lambda: stop.signum, watch, announce)

