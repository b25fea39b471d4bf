"""The main process's view of its children: start them, wait until they are ready, notice when one dies,
and stop them all. Each child reports over a one-way Pipe: "ready" (with facts), "error", or "died"."""

from __future__ import annotations

import multiprocessing as mp
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any

from minisgl.detokenizer.detokenizer_process import run_detokenizer_process
from minisgl.distributed.launch import node_tp_ranks, scheduler_process_name
from minisgl.server.data_parallel_controller import run_data_parallel_controller_process
from minisgl.server.http_server_args import HttpServerArgs
from minisgl.server.port_args import PortArgs
from minisgl.server.scheduler_process import run_scheduler_process
from minisgl.server_args import ServerArgs


class StartupError(RuntimeError):
    def __init__(self, message: str, exit_code: int = 1):
        super().__init__(message)
        self.exit_code = exit_code


@dataclass
class ChildProcess:
    name: str
    process: BaseProcess
    pipe: Connection  # the reading end; the child holds the writing end
    info: dict[str, Any] | None = None  # what it sent with "ready"
    last_words: list[str] = field(default_factory=list)  # "error"/"died" messages

    def read_pipe(self) -> None:
        try:
            while self.pipe.poll():
                msg = self.pipe.recv()
                if msg.get("status") == "ready":
                    self.info = msg
                else:
                    self.last_words.append(msg.get("message", ""))
                    if msg.get("status") == "error":
                        raise StartupError(f"the {self.name} process could not start: {msg['message']}",
                                           msg.get("exit_code", 1))
        except (EOFError, OSError):
            pass  # the child is gone; its exit code tells the rest

    def death_reason(self) -> str:
        """One line: which child, how it ended, and what it said last."""
        self.process.join(timeout=0.1)
        code = self.process.exitcode
        if code is not None and code < 0:
            how = f"killed by {signal.Signals(-code).name}"
        else:
            how = f"exit code {code}"
        said = f": {self.last_words[-1]}" if self.last_words else ""
        return f"the {self.name} process died ({how}){said}"


def wait_ready(children: list[ChildProcess], should_stop: Callable[[], bool]) -> None:
    """Block until every child said "ready"; raise StartupError if one failed or died first."""
    while any(c.info is None for c in children):
        if should_stop():  # first: Ctrl-C also reaches a child still starting, and may kill it
            raise KeyboardInterrupt
        for child in children:
            child.read_pipe()
            if child.info is None and not child.process.is_alive():
                child.read_pipe()
                raise StartupError(child.death_reason().replace("died", "died while starting", 1))
        time.sleep(0.05)


class EngineProcesses:
    """The scheduler and detokenizer children, started with the spawn method: a fresh interpreter each,
    so no torch threads or sockets are inherited from the main process. With --dp-size N > 1: a
    DataParallelController and N schedulers (scheduler_dp0 …) instead of the one scheduler; all are children
    of the main process (in SGLang the controller starts the ranks), so one watchdog and one stop cover
    all."""

    def __init__(self, server_args: ServerArgs, http_args: HttpServerArgs, port_args: PortArgs,
                 dist_socket=None):
        ctx = mp.get_context("spawn")
        self.children: list[ChildProcess] = []
        # one scheduler per tensor-parallel rank on this node (distributed/launch.py)
        if server_args.dp_size == 1:
            # rank 0 gets the socket its TCPStore listens on (--tp-size N > 1 on one node; else None)
            targets = [(scheduler_process_name(r), run_scheduler_process,
                        (None, r, dist_socket if r == 0 else None)) for r in node_tp_ranks(server_args)]
        else:
            targets = [("data_parallel_controller", run_data_parallel_controller_process, ())]
            targets += [(f"scheduler_dp{rank}", run_scheduler_process, (rank,))
                        for rank in range(server_args.dp_size)]
        if server_args.node_rank == 0:  # with tp ranks: right after rank 0, so "scheduler, detokenizer" lead
            targets.insert(1 if server_args.dp_size == 1 else len(targets),
                           ("detokenizer", run_detokenizer_process, ()))
        for name, target, extra in targets:
            reader, writer = ctx.Pipe(duplex=False)
            proc = ctx.Process(target=target, args=(server_args, http_args, port_args, writer, *extra),
                               name=name, daemon=True)
            proc.start()
            writer.close()  # the child has its own copy; ours would keep the pipe open after it died
            self.children.append(ChildProcess(name, proc, reader))

    def scheduler_info(self) -> dict[str, Any]:
        """What the (first) scheduler reported when ready; every rank runs the same model and flags."""
        return next(c for c in self.children if c.name.startswith("scheduler")).info

    def __getitem__(self, name: str) -> ChildProcess:
        return next(c for c in self.children if c.name == name)

    def pids(self) -> dict[str, int | None]:
        return {c.name: c.process.pid for c in self.children}

    def wait_ready(self, should_stop: Callable[[], bool]) -> None:
        wait_ready(self.children, should_stop)

    def first_death(self) -> ChildProcess | None:
        for child in self.children:
            if not child.process.is_alive():
                child.read_pipe()
                return child
        return None

    def stop(self, timeout: float = 5.0) -> None:
        """SIGTERM all, wait, then SIGKILL whoever is left: nothing outlives the server."""
        for child in self.children:
            if child.process.is_alive():
                child.process.terminate()
        deadline = time.monotonic() + timeout
        for child in self.children:
            child.process.join(max(0.0, deadline - time.monotonic()))
            if child.process.is_alive():
                child.process.kill()
                child.process.join(2)
            child.pipe.close()
