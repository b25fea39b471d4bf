"""--tokenizer-worker-num N > 1: the HTTP server as N processes on one port (SGLang's multi-tokenizer mode).

    main process          binds the port, starts the N tokenizer workers, prints the ready line, then only
                          watches: the engine's children and the workers
    tokenizer_worker{i}   the app and a TokenizerManager each (tokenizer_worker.py); the kernel hands each
                          new connection to one of them
    detokenizer           sends each output to the worker whose address the request carried

A child's death (engine or worker) is told to every worker, which answers its requests 503 and exits; the
server's exit status is then 1. SIGTERM or SIGINT to the main process is passed to every worker as SIGTERM
(each drains its own requests, graceful_shutdown.py); a second one is passed on too, and stops them at once.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import socket
import sys
import time

from minisgl.server.serve_http import DEATH_GRACE_S, ServeSpec, ready_line
from minisgl.server.subprocesses import ChildProcess, EngineProcesses, StartupError, wait_ready
from minisgl.server.tokenizer_worker import run_tokenizer_worker_process

POLL_S = 0.2
EXIT_SLACK_S = 15.0  # past the graceful-shutdown timeout: the workers' wait for an idle scheduler, and more


def bind_listening_socket(host: str, port: int) -> socket.socket:
    """The one socket every worker accepts on (port 0: a free one, which the ready line names)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        raise StartupError(f"cannot listen on {host}:{port}: {e.strerror}") from None
    sock.listen(2048)
    return sock


class TokenizerWorkers:
    def __init__(self, spec: ServeSpec):
        n = spec.http_args.tokenizer_worker_num
        self.sock = bind_listening_socket(spec.http_args.host, spec.http_args.port)
        ctx = mp.get_context("spawn")
        self.children: list[ChildProcess] = []
        for worker_id in range(n):
            here, there = ctx.Pipe(duplex=True)
            proc = ctx.Process(target=run_tokenizer_worker_process, args=(spec, worker_id, self.sock, there),
                               name=f"tokenizer_worker{worker_id}", daemon=True)
            proc.start()
            there.close()
            self.children.append(ChildProcess(proc.name, proc, here))

    def wait_ready(self, should_stop) -> int:
        """Block until every worker serves; return the port. StartupError if one failed first."""
        wait_ready(self.children, should_stop)
        return self.children[0].info["port"]

    def first_death(self) -> ChildProcess | None:
        for child in self.children:
            child.read_pipe()
            if not child.process.is_alive():
                return child
        return None

    def tell_death(self, reason: str) -> None:
        for child in self.children:
            try:
                child.pipe.send({"dead": reason})
            except OSError:
                pass  # that worker is the one that died

    def signal_all(self, sig: int) -> None:
        for child in self.children:
            if child.process.is_alive():
                try:
                    os.kill(child.process.pid, sig)
                except ProcessLookupError:
                    pass  # it ended just now

    def wait_exit(self, timeout: float, poll=lambda: None) -> None:
        deadline = time.monotonic() + timeout
        while any(c.process.is_alive() for c in self.children) and time.monotonic() < deadline:
            poll()
            time.sleep(0.05)

    def stop(self) -> None:
        """Whoever is still running: SIGTERM, then SIGKILL; close the socket."""
        self.signal_all(signal.SIGTERM)
        self.wait_exit(5.0)
        for child in self.children:
            if child.process.is_alive():
                child.process.kill()
            child.process.join(2)
            child.pipe.close()
        self.sock.close()


def serve_with_tokenizer_workers(spec: ServeSpec, processes: EngineProcesses, stop) -> int:
    """Start the workers, announce, watch until a signal (exit status 0) or a death (1)."""
    workers = TokenizerWorkers(spec)
    try:
        port = workers.wait_ready(stop.is_set)
        spec.pids.update({c.name: c.process.pid for c in workers.children})
        print(ready_line(spec, port), flush=True)
        return _supervise(spec, processes, workers, stop)
    finally:
        workers.stop()


def _supervise(spec: ServeSpec, processes: EngineProcesses, workers: TokenizerWorkers, stop) -> int:
    while True:
        if stop.is_set():
            passed = 0

            def pass_signals() -> None:  # every signal that came is passed on once: a second stops at once
                nonlocal passed
                while passed < stop.count:
                    workers.signal_all(signal.SIGTERM)
                    passed += 1

            workers.wait_exit(spec.http_args.graceful_shutdown_timeout + EXIT_SLACK_S, pass_signals)
            return 0
        dead = processes.first_death() or workers.first_death()
        if dead is not None:
            reason = dead.death_reason()
            print(f"minisgl serve: error: {reason}; every tokenizer worker fails its requests with 503 and "
                  "shuts down", file=sys.stderr, flush=True)
            workers.tell_death(reason)
            workers.wait_exit(DEATH_GRACE_S + 5.0)
            return 1
        time.sleep(POLL_S)
