"""run_tokenizer_worker_process: one of the --tokenizer-worker-num N processes that serve HTTP (SGLang's
TokenizerWorker). Each runs the whole app (serve_http.py) with a TokenizerManager of its own, accepting
connections on the listening socket the main process bound and handed down, and receiving its answers on an
address of its own (PortArgs.tokenizer_worker_ipc_name), which every request it sends names.

It traces as a `tokenizer_manager` (its file carries its pid); `http.request_received` says which worker.
SIGINT is left to the main process, which passes a stop on as SIGTERM: a graceful shutdown here. The pipe
to the main process carries "ready" (with the port) one way and a child's death the other; if the main
process itself dies, the pipe closes and this worker fails its requests and leaves.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import sys
from multiprocessing.connection import Connection

from minisgl.server import tm_trace
from minisgl.server.child_process import one_line
from minisgl.server.serve_http import ServeSpec, serve_http
from tracer.api import tracer

logger = logging.getLogger(__name__)


def run_tokenizer_worker_process(spec: ServeSpec, worker_id: int, sock: socket.socket, conn: Connection
                                 ) -> None:
    name = f"tokenizer_worker{worker_id}"
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    stop: dict[str, int] = {}
    signal.signal(signal.SIGTERM, lambda signum, frame: stop.setdefault("signum", signum))
    http_args = spec.http_args
    logging.basicConfig(level=http_args.log_level.upper(),
                        format=f"[{name} %(process)d] %(levelname)s %(name)s: %(message)s")
    try:
        from minisgl.labs.swap import apply_from_env
        from minisgl.model_loader.loader import load_tokenizer, resolve_model

        apply_from_env(quiet=True)  # a lab's TokenizerManager part (MINISGL_LAB) runs here too
        if http_args.trace_dir:
            tracer.configure(http_args.trace_dir, "tokenizer_manager", http_args.trace_level)
        tm_trace.worker_id = worker_id
        spec.pids[name] = os.getpid()  # /health and /server_info name the worker that answered
        tokenizer = load_tokenizer(resolve_model(spec.server_args.model))
    except Exception as e:
        logger.exception("the tokenizer worker could not start")
        conn.send({"status": "error", "message": one_line(e), "exit_code": 1})
        sys.exit(1)

    def watch() -> str | None:
        """A death the main process reports, or the main process's own."""
        try:
            if not conn.poll():
                return None
            return conn.recv()["dead"]
        except (EOFError, OSError):
            return "the main process died"

    def announce(port: int) -> None:
        conn.send({"status": "ready", "port": port})

    try:
        code = asyncio.run(serve_http(spec, tokenizer, lambda: stop.get("signum"), watch, announce,
                                      http_worker_ipc=spec.port_args.tokenizer_worker_ipc_name(worker_id),
                                      sockets=[sock], ignored_signals=(signal.SIGINT,)))
    except Exception as e:
        logger.exception("the tokenizer worker crashed")
        conn.send({"status": "died", "message": one_line(e)})
        code = 1
    finally:
        tracer.close()
    sys.exit(code)
